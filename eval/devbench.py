"""The JSQuAD dev benchmark as one command.

Build the guidebook-like site of the in-scope JSQuAD articles in a work folder, serve it
on 127.0.0.1, scrape it with our scraper (no delay) into a fresh store there, then run
every question through each retrieval pipeline and answer mode, and print one table.
Modes that need a language model are reported as skipped when none is configured.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlsplit

from guiderag.errors import InputError
from guiderag.progress import ProgressReporter
from guiderag.settings import EXTRACT, MODES, OURS, PIPELINES, Settings
from guiderag.scraper.sample import serve_directory

from . import jsquad
from .metrics import summarize
from .patient import SuiteReport, apply_gate, open_run, operating_point, suite_report
from .runner import run_questions
from .workdir import fresh_store, workdir_for
from .workbook import IN_SCOPE, write_questions

DB_NAME = "devbench.db"
SITE_DIR = "site"

# Table columns: (summary metric, header, format).
TABLE: list[tuple[str, str, str]] = [
    ("coverage_in_scope", "answered", "{:.3f}"),
    ("right_page_first", "right page first", "{:.3f}"),
    ("routing_accuracy", "routed right", "{:.3f}"),
    ("answer_in_reference", "answer in reference", "{:.3f}"),
    ("gold_in_answer", "gold in answer", "{:.3f}"),
    ("answer_chars_mean", "mean answer chars", "{:.0f}"),
    ("refusal_rate_out_of_scope", "out-of-scope refused", "{:.3f}"),
    ("no_candidate_out_of_scope", "oos no candidate", "{:.3f}"),
    ("verbatim_rate", "verbatim", "{:.3f}"),
    ("latency_mean_ms", "s per answer", "{:.2f}"),
    ("model_fallback_rate", "model fell back", "{:.3f}"),
    ("model_decline_rate", "model declined", "{:.3f}"),
    ("summary_repeat_rate", "summary repeats", "{:.3f}"),
    ("latency_p50_ms", "p50 ms", "{:.1f}"),
]
# Shown in seconds (the metric is in ms).
_SECONDS = {"latency_mean_ms"}


@dataclass
class BenchRun:
    pipeline: str
    mode: str
    status: str  # "ok" | "skipped"
    reason: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    workbook: str | None = None
    seconds: float | None = None
    workers: int = 1  # processes that answered the questions (latency is measured inside each)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class BenchReport:
    questions: int
    in_scope: int
    out_of_scope: int
    sampled: str  # "" when every question ran
    articles: int
    site_pages: int
    stored_pages: int
    scrape: dict[str, int]
    workdir: str | None
    runs: list[BenchRun]
    curves: list[SuiteReport] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["runs"] = [r.to_json() for r in self.runs]
        data["curves"] = [c.to_json() for c in self.curves]
        return data

    def table(self) -> str:
        head = (
            f"JSQuAD dev benchmark: {self.questions} questions ({self.in_scope} in scope, "
            f"{self.out_of_scope} out of scope){' — ' + self.sampled if self.sampled else ''}; "
            f"{self.site_pages} of {self.articles} articles on the site, {self.stored_pages} pages stored by the scraper"
        )
        cols = ["pipeline", "mode"] + [h for _, h, _ in TABLE]
        widths = [max(9, len(c)) for c in cols]
        lines = [head, "", "  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(cols, widths)))]
        for run in self.runs:
            cells = [run.pipeline, run.mode]
            if run.status != "ok":
                cells += [f"skipped: {run.reason}"]
                lines.append("  ".join(c.ljust(w) for c, w in zip(cells[:2], widths)) + "  " + cells[2])
                continue
            for key, _, fmt in TABLE:
                value = run.metrics.get(key)
                if value is not None and key in _SECONDS:
                    value = value / 1000.0
                cells.append("-" if value is None else fmt.format(value))
            lines.append("  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))))
        lines += [
            "",
            "right page first, answer in reference, gold in answer: in-scope questions; a refusal counts as a miss.",
            "routed right: in-scope questions whose gold page belongs to the guideline they were routed to "
            "(one guideline here, so every question with a stored gold page).",
            "answer in reference: a gold answer string inside the retrieval reference "
            "(at most reference_chars); gold in answer: inside the answer shown (at most answer_chars).",
            "out-of-scope refused: held-back articles' questions answered with the refusal; "
            "oos no candidate: those left with no candidate page at all.",
            "answered: in-scope questions answered (not refused).",
            "verbatim: answered questions whose every line is a stored line of a cited page.",
            "s per answer: mean seconds per question; model fell back / declined (lines, generate): "
            "share of all questions whose model answer could not be used (extract or the refusal shown "
            "instead) / that the model declined (the refusal shown); '-' where no model answers. "
            "summary repeats: shown summaries with a line or sentence said twice (0 expected).",
            "p50 ms: latency of one question (keywords, retrieval, answer, audit row), measured with "
            + ", ".join(sorted({f"{r.workers} worker processes" if r.workers > 1 else "one process" for r in self.runs
                                if r.status == "ok"})) + " running; "
            + "wall time per run: " + ", ".join(f"{r.pipeline}/{r.mode} {r.seconds:.0f} s" for r in self.runs
                                                if r.status == "ok") + ".",
        ]
        if self.workdir:
            lines.append(f"site, store and result workbooks: {self.workdir}")
        for c in self.curves:
            lines += ["", c.text()]
        return "\n".join(lines)


def run_devbench(
    settings: Settings,
    *,
    pipelines: Sequence[str],
    modes: Sequence[str],
    bench_dir: Path | None = None,
    limit: int | None = None,
    workdir: Path | None = None,
    log: Any = None,
) -> BenchReport:
    """Build, serve, scrape, evaluate; return the report (see BenchReport.table/to_json)."""
    from guiderag import scraper
    from guiderag.store import Store

    log = log or (lambda msg: print(msg, file=sys.stderr))
    for p in pipelines:
        if p not in PIPELINES:
            raise InputError(f"unknown pipeline {p!r}: use {' and/or '.join(PIPELINES)}")
    for m in modes:
        if m not in MODES:
            raise InputError(f"unknown mode {m!r}: use {', '.join(MODES[:-1])} and/or {MODES[-1]}")
    if limit is not None and limit <= 0:
        raise InputError(f"--limit must be a positive number of questions, not {limit}")

    articles = jsquad.load_articles(bench_dir, settings=settings)
    inside, outside = jsquad.split_articles(articles, jsquad.HELD_OUT, jsquad.SEED)
    all_questions = jsquad.questions(inside, outside)
    n = limit or settings.eval.devbench_sample
    chosen = jsquad.sample(all_questions, n, jsquad.SEED) if n else all_questions
    sampled = ""
    if len(chosen) < len(all_questions):
        why = "--limit" if limit else "GUIDERAG_DEVBENCH_SAMPLE"
        sampled = f"a deterministic sample of {len(chosen)} of {len(all_questions)} ({why})"

    with workdir_for(workdir) as (work, keep):
        site = work / SITE_DIR
        toc = jsquad.build_site(inside, site)
        base = settings.replace(db=work / DB_NAME, delay_s=0.0, urls_xlsx=work / "urls.xlsx")
        fresh_store(base)
        write_questions(chosen, work / "questions.xlsx")
        log(f"devbench: {len(inside)} articles on the site, {len(outside)} held back; {len(chosen)} questions")
        with serve_directory(site) as root:
            summary = scraper.scrape(base.scraper, base.storage, root + toc,
                                     progress=ProgressReporter(enabled=base.cli.progress))
        with Store(base.storage.db, create=False) as store:
            stored = store.current_pages()
        expected = {a.path for a in inside}
        got = {urlsplit(p.url).path.lstrip("/") for p in stored}
        missing = sorted(expected - got)
        if missing:
            log(f"devbench: warning: the scraper did not store {len(missing)} article page(s), e.g. {missing[:3]}")
        extra = sorted(got - expected)
        if extra:
            log(f"devbench: warning: the scraper stored {len(extra)} page(s) that are not articles, e.g. {extra[:3]}")

        from guiderag import retrieval

        # as `guiderag scrape` does after a changed corpus
        retrieval.build_index(base.retrieval, base.storage, progress=base.progress_reporter)
        runs: list[BenchRun] = []
        curves: list[SuiteReport] = []
        for pipeline in pipelines:
            ps = base.replace(pipeline=pipeline)
            retriever = None
            for mode in modes:
                if mode != EXTRACT and not ps.replace(mode=mode).model_configured:
                    runs.append(BenchRun(pipeline, mode, "skipped", "no language model configured "
                                         "(set GUIDERAG_MODEL and OPENAI_BASE_URL or OPENAI_API_KEY)"))
                    continue
                if retriever is None:
                    retriever = retrieval.load_retriever(ps.retrieval, ps.storage, progress=ps.progress_reporter)
                out = work / f"results-{pipeline}-{mode}.xlsx"
                t0 = time.monotonic()
                # ours/extract: answered with the decision open (eval.patient.open_run), so the
                # refusal curve over its cut is exact; the table applies the decision's own cut.
                # (Model modes are not opened: the open decision would ask the model for every
                # out-of-scope question.)
                rs = open_run(ps) if pipeline == OURS and mode == EXTRACT else ps
                curve_run = rs is not ps
                outcome = run_questions(
                    rs, chosen, out, mode=mode, retriever=retriever, label=f"{pipeline}/{mode}",
                    extra_meta=[("benchmark", "JSQuAD v1.3 dev site"), ("sample", sampled or "all questions")],
                )
                cut = operating_point(outcome.rows, ps) if curve_run else 0.0
                rows = apply_gate(outcome.rows, cut) if curve_run else outcome.rows
                values = {k: v["value"] for k, v in summarize(rows).items()}
                if curve_run:
                    kinds = {str(r.get("id")): "in scope" if r.get("kind") == IN_SCOPE else "out of scope"
                             for r in outcome.rows}
                    curves.append(suite_report(f"JSQuAD ({pipeline}/{mode})", outcome.rows, kinds,
                                               cut, ps.retrieval.threshold, (), ()))
                runs.append(BenchRun(pipeline, mode, "ok", metrics=values,
                                     workbook=str(out) if keep else None,
                                     seconds=round(time.monotonic() - t0, 1),
                                     workers=int(dict(outcome.meta).get("worker_processes", 1))))
        return BenchReport(
            questions=len(chosen),
            in_scope=sum(q.kind == IN_SCOPE for q in chosen),
            out_of_scope=sum(q.kind != IN_SCOPE for q in chosen),
            sampled=sampled,
            articles=len(articles),
            site_pages=len(inside),
            stored_pages=len(stored),
            scrape=summary.counts(),
            workdir=str(work) if keep else None,
            runs=runs,
            curves=curves,
        )
