"""`guiderag eval` and `guiderag devbench`: argument handling and printing only."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

from guiderag.errors import InputError
from guiderag.settings import Settings


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


def _summary_table(summary: dict[str, dict]) -> str:
    lines = [f"{'metric':<28}{'value':>10}{'n':>7}  description"]
    for name, info in summary.items():
        v = info.get("value")
        lines.append(f"{name:<28}{'-' if v is None else f'{v:.4f}':>10}{info.get('n') or 0:>7}  {info.get('description', '')}")
    return "\n".join(lines)


def run_eval(args: argparse.Namespace, settings: Settings) -> int:
    """Run a question workbook into a results workbook, or compare two results workbooks."""
    from .workbook import read_questions

    as_json = bool(getattr(args, "json", False))
    if args.compare:
        if args.questions or args.out:
            raise InputError("give either QUESTIONS.xlsx --out RESULTS.xlsx, or --compare A.xlsx B.xlsx, not both")
        from .compare import compare_workbooks

        a, b = args.compare
        result = compare_workbooks(a, b)
        if as_json:
            _print_json(result.to_json())
        else:
            print(result.table())
        return 0
    if args.questions is None:
        raise InputError("give a question workbook: guiderag eval QUESTIONS.xlsx --out RESULTS.xlsx")
    if args.out is None:
        raise InputError("--out RESULTS.xlsx is required: where to write the scored results")
    if args.out.suffix.lower() != ".xlsx":
        raise InputError(f"--out must name an .xlsx workbook, not {args.out}")
    if args.out.exists() and args.out.resolve() == args.questions.resolve():
        raise InputError("--out is the question workbook itself: choose another file for the results")
    questions = read_questions(args.questions)

    from .runner import EvalInterrupted, run_questions

    try:
        outcome = run_questions(settings, questions, args.out, mode=args.mode)
    except EvalInterrupted as exc:
        if exc.written:
            print(f"guiderag: interrupted: the {exc.done} of {exc.total} questions done so far are in "
                  f"{args.out} (marked partial)", file=sys.stderr)
        else:
            older = (f"; {args.out} is an earlier run's and was left untouched" if args.out.exists() else "")
            print(f"guiderag: interrupted before any question was answered: no results were written{older}",
                  file=sys.stderr)
        raise
    if as_json:
        _print_json({"out": str(args.out), "questions": outcome.total,
                     "summary": {k: v["value"] for k, v in outcome.summary.items()}})
    else:
        print(f"{outcome.total} questions, mode {args.mode or settings.answer.mode}, pipeline {settings.retrieval.pipeline}: "
              f"results in {args.out}")
        print(_summary_table(outcome.summary))
    return 0


def _list(value: str, name: str) -> list[str]:
    items = [v.strip() for v in (value or "").split(",") if v.strip()]
    if not items:
        raise InputError(f"--{name} needs at least one value")
    return items


SUITES = ("jsquad", "patient", "pdf", "conversation", "all", "coverage")


def run_devbench(args: argparse.Namespace, settings: Settings) -> int:
    """The dev benchmarks (--suite jsquad|patient|pdf|conversation|all): build or serve each
    site, scrape it, evaluate, print the tables and the refusal curves (pdf: beside the HTML
    edition's, which it runs too unless the patient suite ran already; conversation: each
    turn with its history and alone)."""
    suite = getattr(args, "suite", None) or "all"
    if suite not in SUITES:
        raise InputError(f"--suite must be one of {', '.join(SUITES)}, not {suite!r}")
    workdir = args.workdir
    if suite == "coverage":  # not in "all": it measures every labelled site and fits the model
        from . import coverage_bench
        from .workdir import workdir_for

        with workdir_for(workdir, "guiderag-coverage-") as (work, _):
            text = coverage_bench.run(settings, workdir=work, write_model=getattr(args, "write_model", None),
                                      with_ablation=not getattr(args, "no_ablation", False))
        print(text)
        return 0
    out: dict[str, Any] = {}
    texts: list[str] = []
    skips: list[str] = []

    def folder(name: str, find: Callable[[], Any]) -> Any:
        """The benchmark folder of a suite; missing: the error when the suite was asked for
        by name, else a note that it was skipped (and None)."""
        try:
            return find()
        except InputError as exc:
            if suite == name:
                raise
            if suite == "all":
                out[name] = {"skipped": str(exc)}
            skips.append(f"{name} suite skipped: {exc}")
            return None

    # every suite's benchmark folder first: one asked for by name and missing fails at once
    from .conversation import gastric_set
    from .patient import suite_dir
    from .pdfsuite import suite_dir as pdf_dir

    patient_found = folder("patient", lambda: suite_dir(getattr(args, "patient_dir", None))) \
        if suite in ("patient", "pdf", "all") else None
    pdf_found = folder("pdf", lambda: pdf_dir(getattr(args, "pdf_dir", None))) if suite in ("pdf", "all") else None
    conversations_found = folder("conversation", lambda: gastric_set(getattr(args, "conversation_dir", None),
                                                                     getattr(args, "patient_dir", None))) \
        if suite in ("conversation", "all") else None
    if suite in ("jsquad", "all"):
        from .devbench import run_devbench as bench

        report = bench(
            settings,
            pipelines=_list(args.pipelines, "pipelines"),
            modes=_list(args.modes, "modes"),
            bench_dir=args.bench_dir,
            limit=args.limit,
            workdir=workdir,
        )
        out["jsquad"] = report.to_json()
        texts.append(report.table())
    patient = None
    if suite in ("patient", "pdf", "all"):
        from .patient import run_patient_suite

        if patient_found is not None:
            patient = run_patient_suite(
                settings, bench_dir=patient_found, limit=args.limit,
                workdir=workdir / "patient" if workdir is not None and suite != "patient" else workdir,
            )
            if suite != "pdf":
                out["patient"] = patient.to_json()
                texts.append(patient.text())
    if suite in ("pdf", "all"):
        from .pdfsuite import run_pdf_suite

        if pdf_found is not None:
            pdf = run_pdf_suite(
                settings, bench_dir=pdf_found, html=patient, limit=args.limit,
                workdir=workdir / "pdf" if workdir is not None and suite == "all" else workdir,
            )
            out["pdf"] = pdf.to_json()
            texts.append(pdf.text())
    if suite in ("conversation", "all"):
        from .conversation import run_conversation_suite

        if conversations_found is not None:
            conversations = run_conversation_suite(
                settings, bench_dir=getattr(args, "conversation_dir", None),
                patient_dir=getattr(args, "patient_dir", None), limit=args.limit,
                workdir=workdir / "conversation" if workdir is not None and suite == "all" else workdir,
            )
            out["conversation"] = conversations.to_json()
            texts.append(conversations.text())
    texts.extend(skips)
    if getattr(args, "json", False):
        # all: the JSQuAD report's fields as before, the other suites' under their names
        _print_json({**out["jsquad"], "patient": out["patient"], "pdf": out["pdf"],
                     "conversation": out["conversation"]} if suite == "all" else next(iter(out.values())))
    else:
        print("\n\n".join(texts))
    return 0


def run_calibrate(args: argparse.Namespace, settings: Settings) -> int:
    """Fit the guideline's coverage decision to a labelled workbook and store it (eval.calibrate),
    or with --reset go back to the shipped model."""
    import time

    from guiderag.store import Store, calibration

    as_json = bool(getattr(args, "json", False))
    if getattr(args, "reset", False):
        if args.questions is not None or args.out is not None:
            raise InputError("--reset takes no workbook and no --out: it deletes the guideline's calibration")
        with Store(settings.store, create=False) as store:
            gid = store.resolve_guideline(settings.storage.guideline)
            removed = calibration.remove(store, gid)
        message = (f"guideline {gid}: calibration removed; the shipped coverage model applies again" if removed
                   else f"guideline {gid} had no calibration: the shipped coverage model applies")
        if as_json:
            _print_json({"guideline": gid, "reset": True, "removed": removed})
        print(message, file=sys.stderr)
        return 0
    if args.questions is None:
        raise InputError("give a labelled question workbook: guiderag calibrate QUESTIONS.xlsx (or --reset)")
    if args.out is not None and args.out.suffix.lower() != ".xlsx":
        raise InputError(f"--out must name an .xlsx workbook (the PNG goes beside it), not {args.out}")
    from guiderag import retrieval
    from guiderag.chatbot.coverage_decision import CoverageDecision
    from guiderag.retrieval.pipeline_ours import OursRetriever

    from . import calibrate as cal
    from .coverage_data import collect_questions
    from .coverage_sites import Labelled
    from .workbook import IN_SCOPE, read_questions

    questions = read_questions(args.questions, require_id=False)
    labelled = [Labelled(q, q.category or ("in scope" if q.kind == IN_SCOPE else "out of scope")) for q in questions]
    n_in = sum(1 for q in labelled if q.in_scope)
    cal.check_set([{"in_scope": q.in_scope} for q in labelled])  # refuse before any work
    target = float(args.target_refusal)
    with Store(settings.store, create=False) as store:
        gid = store.resolve_guideline(settings.storage.guideline)
        scope = settings.guideline_scope(gid)
        retriever = retrieval.load_retriever(settings.retrieval, settings.storage, scope,
                                             progress=settings.progress_reporter)
        if not isinstance(retriever, OursRetriever):
            raise InputError("calibrate fits the coverage model of the ours pipeline; the protocol pipeline keeps "
                             "its published threshold (use --pipeline ours)")
        corpus = retriever.corpus_version
        decision = CoverageDecision.for_retriever(retriever)  # the shipped model of the guideline's form
        started = time.monotonic()
        records = collect_questions(retriever, labelled, settings, gid)
        fit = cal.fit(records, decision.model, target)
        model = fit.model.with_operating_point(fit.model.operating_point, target, form=decision.form,
                                               fitted_on=str(args.questions.name), refit=fit.refit)
        rows = cal.curve(records, fit.probabilities, cal.cuts_with(model.operating_point))
        at_point = next(r for r in rows if r["operating_point"] == model.operating_point)
        gold_set = any(q.question.golds for q in labelled)
        summary = {"workbook": str(args.questions), "counts": fit.counts, "refit": fit.refit, "why": fit.why,
                   "target_refusal": target, "form": decision.form, "shipped_operating_point":
                   decision.model.operating_point, "at_operating_point": at_point, "gold_answers": gold_set,
                   "seconds": round(time.monotonic() - started, 1)}
        plot = None
        if args.out is not None:  # the curve first: a failure to write it stores nothing
            plot = cal.write_curve(args.out, rows, records, fit.probabilities, model.operating_point,
                                   {"guideline": gid, "corpus_version": corpus, "refit": fit.refit, "why": fit.why,
                                    "target_refusal": target, "operating_point": round(model.operating_point, 4),
                                    "in_scope": n_in, "out_of_scope": len(labelled) - n_in})
        stored = calibration.save(store, gid, corpus, model.to_json(), summary)
    if as_json:
        _print_json({"guideline": gid, "corpus_version": corpus, "fitted_at": stored.fitted_at,
                     "operating_point": round(model.operating_point, 4), "shipped_operating_point":
                     round(decision.model.operating_point, 4), "target_refusal": target, "refit": fit.refit,
                     "why": fit.why, "counts": fit.counts, "at_operating_point": at_point, "curve": rows,
                     "out": str(args.out) if args.out else None, "plot": str(plot) if plot else None})
    else:
        print(f"guideline {gid}: {fit.counts['in_scope']} in-scope and {fit.counts['out_of_scope']} out-of-scope "
              f"questions; refitted: {fit.refit} ({fit.why})")
        print(f"operating point {model.operating_point:.3f} (shipped {decision.model.operating_point:.3f}) for "
              f"out-of-scope refused >= {target}; stored for corpus {corpus[:12]}")
        print(cal.text(rows, model.operating_point, gold_set))
        if args.out is not None:
            print(f"wrote {args.out} and {plot}", file=sys.stderr)
    return 0
