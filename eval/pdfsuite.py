"""The PDF edition of the patient-worded benchmark (../shared/bench/pdf-gastric), beside the
HTML edition (../shared/bench/patient-gastric) on the same 200 questions.

The suite serves the PDF edition's site on 127.0.0.1 (an HTML table of contents linking
eight chapter PDFs, a printable form and a second spelling of one chapter), scrapes it
into a fresh store and scores:

- harvest precision and recall against gold.json's content_urls (the chapters stored, the
  form and the duplicate not);
- what the scraper removed from the PDFs' text (running heads and feet, folios, their own
  tables of contents), and how many shown lines are such lines (0 expected);
- a second scrape of the unchanged site: how many versions it changed (0 expected);
- every question answered (extract, offline, as the patient suite: the refusal curve's
  run, eval.patient), in the patient suite's table, beside the HTML edition's;
- the page citation: of the answers showing a gold string, the share whose passage
  holding it cites the gold string's PDF page (`pdf_page == gold_pdf_page`).
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlsplit

from guiderag.errors import InputError
from guiderag.resources import shared_bench_dir

from . import metrics
from .patient import (CURVE_RUN_GATE, IN_CATEGORIES, OUT_CATEGORIES, SuiteReport, apply_gate, load_questions,
                      spread, suite_report)
from .workdir import scrape_into, workdir_for

SUITE_DIR = "pdf-gastric"
TOC_PATH = "gb/index.html"


def suite_dir(bench_dir: Path | None = None) -> Path:
    path = Path(bench_dir) if bench_dir is not None else shared_bench_dir() / SUITE_DIR
    if not all((path / name).exists() for name in ("questions.jsonl", "gold.json", "site")):
        raise InputError(f"no PDF benchmark at {path} (questions.jsonl, gold.json and site/ expected): "
                         "give --pdf-dir, or put it at ../shared/bench/pdf-gastric")
    return path


@dataclass
class PdfSuiteReport:
    """The PDF edition's table, the HTML edition's beside it, and the PDF-only measures."""

    pdf: SuiteReport
    html: SuiteReport | None
    harvest: dict[str, Any]
    removed: dict[str, int]
    removed_shown: int
    rescrape: dict[str, int]
    citation: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"pdf": self.pdf.to_json(), "html": self.html.to_json() if self.html else None,
                "harvest": self.harvest, "removed": self.removed, "removed_lines_shown": self.removed_shown,
                "rescrape": self.rescrape, "page_citation": self.citation, "notes": list(self.notes)}

    def text(self) -> str:
        lines = [self.pdf.text(), ""]
        lines.append("PDF edition beside the HTML edition (same questions, extract, offline, the configured gate):")
        lines.append(f"{'':16}{'n':>5}{'answered':>18}{'page first':>18}{'gold shown':>18}{'refused':>18}")
        lines.append(f"{'':16}{'':>5}" + f"{'PDF / HTML':>18}" * 4)
        for name in [*IN_CATEGORIES, "in scope", *OUT_CATEGORIES, "out of scope"]:
            p = self.pdf.table.get(name)
            h = self.html.table.get(name) if self.html else None
            if p is None:
                continue

            def pair(a: float, b: float | None) -> str:
                return f"{a:.3f} / {b:.3f}" if b is not None else f"{a:.3f} / -"
            if name in (*IN_CATEGORIES, "in scope"):
                lines.append(f"{name:16}{p.n:>5}{pair(p.answered, h.answered if h else None):>18}"
                             f"{pair(p.page_first, h.page_first if h else None):>18}"
                             f"{pair(p.gold, h.gold if h else None):>18}")
            else:
                lines.append(f"{name:16}{p.n:>5}{'':>18}{'':>18}{'':>18}"
                             f"{pair(p.refused, h.refused if h else None):>18}")
        c = self.citation
        lines += [
            "",
            f"page citation: the passage holding the gold string cites its PDF page (pdf_page = gold_pdf_page) "
            f"for {c['cited_right']} of {c['gold_shown']} answers showing one: {c['rate']:.3f}"
            + (f" (within the passage's pdf_pages: {c['within_pages']:.3f})" if c["gold_shown"] else ""),
            f"harvest: precision {self.harvest['precision']:.3f}, recall {self.harvest['recall']:.3f} "
            f"({self.harvest['stored']} documents stored of {self.harvest['expected']}; "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.harvest["categories"].items())) + ")",
            "removed from the PDFs' text: " + (", ".join(f"{v} {k}" for k, v in sorted(self.removed.items()))
                                               or "nothing")
            + f"; running heads, feet or folios shown in an answer: {self.removed_shown}",
            "re-scrape of the unchanged site: " + ", ".join(f"{k} {v}" for k, v in self.rescrape.items()),
        ]
        lines += self.notes
        return "\n".join(lines)


def _gold_pages(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in (path / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            q = json.loads(line)
            if q.get("gold_pdf_page"):
                out[str(q["id"])] = int(q["gold_pdf_page"])
    return out


def page_citation(rows: Sequence[dict], gold_pages: dict[str, int], golds: dict[str, list[str]]) -> dict[str, Any]:
    """Of the rows showing a gold string, how many cite its PDF page from the passage
    holding it (the first passage that does)."""
    shown = right = within = 0
    misses: list[str] = []
    for row in rows:
        qid = str(row.get("id"))
        if not row.get("gold_hit") or qid not in gold_pages:
            continue
        passages = (row.get("json") or {}).get("passages") or []
        holding = next((p for p in passages if metrics.contains_any(p.get("text", ""), golds.get(qid, []))), None)
        if holding is None:  # the gold string runs over two passages: the first of them
            holding = next((p for p in passages if any(
                metrics.normalize(p.get("text", "")) and metrics.normalize(p.get("text", ""))[:12]
                in metrics.normalize(g) for g in golds.get(qid, []))), None)
        shown += 1
        page = holding.get("pdf_page") if holding else None
        if page == gold_pages[qid]:
            right += 1
        else:
            misses.append(f"{qid}: cited p.{page}, gold p.{gold_pages[qid]}")
        if holding and gold_pages[qid] in (holding.get("pdf_pages") or []):
            within += 1
    return {"gold_shown": shown, "cited_right": right, "rate": right / shown if shown else 0.0,
            "within_pages": within / shown if shown else 0.0, "misses": misses}


def run_pdf_suite(settings: Any, *, bench_dir: Path | None = None, html: SuiteReport | None = None,
                  workdir: Path | None = None, limit: int | None = None, log: Any = None) -> PdfSuiteReport:
    """Serve, scrape (twice), ask, score: see the module docstring. `html` is the HTML
    edition's report on the same questions (eval.patient), printed beside."""
    from guiderag import retrieval
    from guiderag.store import Store

    from .runner import run_questions

    log = log or (lambda msg: print(msg, file=sys.stderr))
    path = suite_dir(bench_dir)
    gold = json.loads((path / "gold.json").read_text(encoding="utf-8"))
    questions = spread(load_questions(path), limit)
    gold_pages = _gold_pages(path)
    with workdir_for(workdir, "guiderag-pdf-") as (work, keep):
        base, (first, again) = scrape_into(settings, work, "pdf", path / "site", TOC_PATH, times=2)
        with Store(base.storage.db, create=False) as store:
            stored = store.current_pages()
        got = {urlsplit(p.url).path.lstrip("/") for p in stored}
        want = set(gold["content_urls"])
        categories: dict[str, int] = {}
        for rec in first.links:
            if not rec.include:
                categories[rec.category] = categories.get(rec.category, 0) + 1
        harvest = {"precision": len(got & want) / len(got) if got else 0.0,
                   "recall": len(got & want) / len(want) if want else 0.0,
                   "stored": len(got), "expected": len(want), "categories": categories,
                   "extra": sorted(got - want), "missing": sorted(want - got)}
        removed: dict[str, int] = {}
        running: set[str] = set()  # heads, feet, folios: never a line of the text
        for page in stored:
            for _, text, why in (page.pdf.removed if page.pdf else ()):
                kind = why.split(" (")[0]
                removed[kind] = removed.get(kind, 0) + 1
                if "table of contents" not in why:  # its entries' titles head their sections too
                    running.add(metrics.normalize(text))
        counts = again.summary.counts()
        rescrape = {"versions changed": counts["added"] + counts["changed"] + counts["removed"],
                    "unchanged": counts["unchanged"], "failed": counts["failed"]}
        log(f"devbench pdf: {len(questions)} questions; the scraper stored {len(stored)} documents")
        run = base.replace(min_line_coverage=CURVE_RUN_GATE)
        outcome = run_questions(run, [p.question for p in questions],
                                work / "results-pdf.xlsx" if keep else None,
                                mode="extract", retriever=retrieval.load_retriever(run.retrieval, run.storage,
                                                                            progress=run.progress_reporter),
                                label="pdf")
        categories_of = {p.question.id: p.category for p in questions}
        rep = suite_report("pdf-gastric", outcome.rows, categories_of, settings.answer.min_line_coverage,
                           settings.retrieval.threshold, IN_CATEGORIES, OUT_CATEGORIES)
        gated = apply_gate(outcome.rows, settings.answer.min_line_coverage)
        golds = {p.question.id: p.question.golds for p in questions}
        citation = page_citation(gated, gold_pages, golds)
        shown_removed = 0
        for row in gated:
            if row.get("governed"):
                shown_removed += sum(1 for line in str(row.get("answer") or "").splitlines()
                                     if metrics.normalize(line) in running)
        report = PdfSuiteReport(pdf=rep, html=html, harvest=harvest, removed=removed, removed_shown=shown_removed,
                                rescrape=rescrape, citation=citation)
        report.pdf.notes.append(f"site: {path / 'site'}; {len(stored)} documents stored by the scraper")
        if keep:
            report.notes.append(f"site store and results workbook: {work}")
        if citation["misses"]:
            report.notes.append("page citation misses: " + "; ".join(citation["misses"][:10]))
        return report
