"""`guiderag eval` and `guiderag devbench`: argument handling and printing only."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

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
        print(f"{outcome.total} questions, mode {args.mode or settings.mode}, pipeline {settings.pipeline}: "
              f"results in {args.out}")
        print(_summary_table(outcome.summary))
    return 0


def _list(value: str, name: str) -> list[str]:
    items = [v.strip() for v in (value or "").split(",") if v.strip()]
    if not items:
        raise InputError(f"--{name} needs at least one value")
    return items


SUITES = ("jsquad", "patient", "pdf", "conversation", "all")


def run_devbench(args: argparse.Namespace, settings: Settings) -> int:
    """The dev benchmarks (--suite jsquad|patient|pdf|conversation|all): build or serve each
    site, scrape it, evaluate, print the tables and the refusal curves (pdf: beside the HTML
    edition's, which it runs too unless the patient suite ran already; conversation: each
    turn with its history and alone)."""
    suite = getattr(args, "suite", None) or "all"
    if suite not in SUITES:
        raise InputError(f"--suite must be one of {', '.join(SUITES)}, not {suite!r}")
    workdir = args.workdir
    out: dict[str, Any] = {}
    texts: list[str] = []
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
        from .patient import run_patient_suite, suite_dir

        try:
            folder = suite_dir(getattr(args, "patient_dir", None))
        except InputError as exc:
            if suite == "patient":
                raise
            if suite == "all":
                out["patient"] = {"skipped": str(exc)}
            texts.append(f"patient suite skipped: {exc}")
        else:
            patient = run_patient_suite(
                settings, bench_dir=folder, limit=args.limit,
                workdir=workdir / "patient" if workdir is not None and suite != "patient" else workdir,
            )
            if suite != "pdf":
                out["patient"] = patient.to_json()
                texts.append(patient.text())
    if suite in ("pdf", "all"):
        from .pdfsuite import run_pdf_suite, suite_dir as pdf_dir

        try:
            pdf_folder = pdf_dir(getattr(args, "pdf_dir", None))
        except InputError as exc:
            if suite == "pdf":
                raise
            out["pdf"] = {"skipped": str(exc)}
            texts.append(f"pdf suite skipped: {exc}")
        else:
            pdf = run_pdf_suite(
                settings, bench_dir=pdf_folder, html=patient, limit=args.limit,
                workdir=workdir / "pdf" if workdir is not None and suite == "all" else workdir,
            )
            out["pdf"] = pdf.to_json()
            texts.append(pdf.text())
    if suite in ("conversation", "all"):
        from .conversation import run_conversation_suite

        try:
            conversations = run_conversation_suite(
                settings, bench_dir=getattr(args, "conversation_dir", None),
                patient_dir=getattr(args, "patient_dir", None), limit=args.limit,
                workdir=workdir / "conversation" if workdir is not None and suite == "all" else workdir,
            )
        except InputError as exc:
            if suite == "conversation":
                raise
            out["conversation"] = {"skipped": str(exc)}
            texts.append(f"conversation suite skipped: {exc}")
        else:
            out["conversation"] = conversations.to_json()
            texts.append(conversations.text())
    if getattr(args, "json", False):
        # all: the JSQuAD report's fields as before, the other suites' under their names
        _print_json({**out["jsquad"], "patient": out["patient"], "pdf": out["pdf"],
                     "conversation": out["conversation"]} if suite == "all" else next(iter(out.values())))
    else:
        print("\n\n".join(texts))
    return 0
