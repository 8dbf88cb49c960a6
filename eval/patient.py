"""The patient-worded dev benchmark (../shared/bench/patient-gastric) and the refusal curve.

The suite serves the benchmark's site on 127.0.0.1, scrapes it with our scraper into a
fresh store, asks every question of questions.jsonl (each in a fresh session, through
eval.runner) and scores, per category: answered, right page first and gold string in the
shown answer for in-scope questions (lay, mixed, formal), refused for out-of-scope ones
(other_disease, not_covered, off_domain).

The refusal curve: questions are answered with the decision wide open (open_run: the
coverage model's operating point 0, recording each answer's P(governed); under the rules
the evidence gate at CURVE_RUN_GATE, recording each answer's line coverage); since the
decision only chooses whether the answer already computed is shown, the outcome at any
cut g is exact: answered when it has an answer and its measure is >= g. `curve(...)`
gives answered / gold / refused per category at each g of a sweep; the row at the
decision's own cut (the model's operating point, or min_line_coverage) is the table.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from guiderag.errors import InputError
from guiderag.resources import shared_bench_dir

from .workbook import IN_SCOPE, OUT_OF_SCOPE, Question
from .workdir import scrape_into, workdir_for

SUITE_DIR = "patient-gastric"
IN_CATEGORIES = ("lay", "mixed", "formal")
OUT_CATEGORIES = ("other_disease", "not_covered", "off_domain")
# The gate the curve's run answers with: low enough to record every answer's coverage.
CURVE_RUN_GATE = 1e-6
# The gate values of the printed curve (min_line_coverage), and the coverage model's cuts.
CURVE_GATES = (0.0, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)
MODEL_CUTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass(frozen=True)
class PatientQuestion:
    question: Question
    category: str


def suite_dir(bench_dir: Path | None = None) -> Path:
    path = Path(bench_dir) if bench_dir is not None else shared_bench_dir() / SUITE_DIR
    if not (path / "questions.jsonl").is_file() or not (path / "site").is_dir():
        raise InputError(f"no patient benchmark at {path} (questions.jsonl and site/ expected): "
                         "give --patient-dir, or put it at ../shared/bench/patient-gastric")
    return path


def load_questions(path: Path) -> list[PatientQuestion]:
    """The suite's questions.jsonl as eval Questions with their categories."""
    out: list[PatientQuestion] = []
    for number, line in enumerate((path / "questions.jsonl").read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
            kind = IN_SCOPE if q["kind"] == "in_scope" else OUT_OF_SCOPE
            out.append(PatientQuestion(
                Question(str(q["id"]), q["question"], kind, gold_url=q.get("gold_page") or None,
                         gold_answers=list(q.get("answers") or [])),
                str(q.get("category") or kind),
            ))
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{path / 'questions.jsonl'} line {number}: not a question object ({exc})") from exc
    return out


@dataclass(frozen=True)
class Outcome:
    """One question's result as the curve needs it."""

    category: str
    in_scope: bool
    retrieved: bool  # retrieval found passages (the threshold's decision)
    coverage: float | None  # the evidence gate's measure (None: not computed)
    page_first: bool
    gold: bool
    verbatim: bool | None


def model_decided(rows: Sequence[dict]) -> bool:
    """Whether the coverage model decided these answers (their JSON records its P)."""
    return any(((r.get("json") or {}).get("retrieval") or {}).get("coverage_model") for r in rows)


def open_run(settings: Any) -> Any:
    """The settings of the curve's run: everything the decision could answer is answered
    (the coverage model's operating point 0, or the evidence gate at CURVE_RUN_GATE), its
    measure recorded, so that the outcome at any cut is exact."""
    from guiderag.settings import COVERAGE_MODEL, OURS

    if settings.answer.coverage_decision == COVERAGE_MODEL and settings.retrieval.pipeline == OURS:
        return settings.replace(coverage_operating_point=0.0)
    return settings.replace(min_line_coverage=CURVE_RUN_GATE) if settings.answer.min_line_coverage > 0 else settings


def operating_point(rows: Sequence[dict], settings: Any) -> float:
    """Where the decision cuts: the coverage model's own operating point (recorded in the
    answers of the open run), or settings.answer.min_line_coverage under the rules."""
    for r in rows:
        block = ((r.get("json") or {}).get("retrieval") or {}).get("coverage_model")
        if block:
            return float(block.get("model_operating_point", block.get("operating_point", 0.0)))
    return float(settings.answer.min_line_coverage)


def _measure(row: dict) -> float | None:
    """What the curve sweeps for one answer: P(governed), else the line coverage."""
    data = row.get("json") or {}
    block = (data.get("retrieval") or {}).get("coverage_model")
    if block:  # the exact P the decision compared (the answer's field is rounded)
        p = block.get("probability", data.get("coverage_probability"))
        return None if p is None else float(p)
    cov = (data.get("retrieval") or {}).get("line_coverage")
    return None if cov is None else float(cov)


def outcomes(rows: Sequence[dict], categories: dict[str, str]) -> list[Outcome]:
    """Curve inputs from results rows of a run answered with open_run's settings."""
    out = []
    model = model_decided(rows)
    for row in rows:
        retrieval = (row.get("json") or {}).get("retrieval") or {}
        cov = _measure(row)
        # refused by the gate's other test (no figure where one is asked): at every gate value
        retrieved = bool(row.get("governed")) or (not model and cov is not None
                                                  and not retrieval.get("asked_figure_missing"))
        out.append(Outcome(
            category=categories.get(str(row.get("id")), str(row.get("kind"))),
            in_scope=row.get("kind") == IN_SCOPE,
            retrieved=retrieved,
            coverage=cov,
            page_first=bool(row.get("page_first")),
            gold=bool(row.get("gold_hit")),
            verbatim=row.get("verbatim"),
        ))
    return out


def apply_gate(rows: Sequence[dict], gate: float) -> list[dict]:
    """Rows of an open run (open_run) as the configured decision would have left them: an
    answer whose P(governed) (or, under the rules, line coverage) is below `gate` becomes a
    refusal (a miss)."""
    out = []
    for row in rows:
        cov = _measure(row)
        if row.get("governed") and cov is not None and float(cov) < gate - 1e-12:
            row = dict(row, governed=False, refused=True, verbatim=None, answer_chars=None)
            if "gold_hit" in row:
                row["gold_hit"] = False
            for key in ("rouge_l_p", "rouge_l_r", "rouge_l_f1", "token_p", "token_r", "token_f1"):
                if key in row:
                    row[key] = 0.0
        out.append(row)
    return out


def answered(o: Outcome, gate: float) -> bool:
    if not o.retrieved:
        return False
    return o.coverage is None or o.coverage >= gate - 1e-12


@dataclass
class CategoryScore:
    n: int = 0
    answered: float = 0.0
    page_first: float = 0.0
    gold: float = 0.0
    refused: float = 0.0
    verbatim_ok: int = 0
    verbatim_n: int = 0


def score_at(items: Iterable[Outcome], gate: float, order: Sequence[str] = ()) -> dict[str, CategoryScore]:
    """Per category (and 'in scope', 'out of scope'), the shares at one gate value."""
    groups: dict[str, list[Outcome]] = {}
    for o in items:
        whole = "in scope" if o.in_scope else "out of scope"
        if o.category != whole:
            groups.setdefault(o.category, []).append(o)
        groups.setdefault(whole, []).append(o)
    table: dict[str, CategoryScore] = {}
    names = [*order, *[k for k in groups if k not in order]]
    for name in names:
        group = groups.get(name)
        if not group:
            continue
        c = CategoryScore(n=len(group))
        ans = [answered(o, gate) for o in group]
        c.answered = sum(ans) / len(group)
        c.refused = 1.0 - c.answered
        c.page_first = sum(a and o.page_first for a, o in zip(ans, group)) / len(group)
        c.gold = sum(a and o.gold for a, o in zip(ans, group)) / len(group)
        verb = [o.verbatim for a, o in zip(ans, group) if a and o.verbatim is not None]
        c.verbatim_n, c.verbatim_ok = len(verb), sum(bool(v) for v in verb)
        table[name] = c
    return table


def curve(items: Sequence[Outcome], gates: Sequence[float], order: Sequence[str]) -> list[tuple[float, dict[str, CategoryScore]]]:
    return [(g, score_at(items, g, order)) for g in gates]


@dataclass
class SuiteReport:
    """A suite's table (at the configured gate) and its refusal curve."""

    name: str
    gate: float
    threshold: float
    in_categories: Sequence[str]
    out_categories: Sequence[str]
    table: dict[str, CategoryScore]
    points: list[tuple[float, dict[str, CategoryScore]]]
    notes: list[str] = field(default_factory=list)
    model: bool = False  # the coverage model decided (gate: its operating point), else the rules

    def to_json(self) -> dict[str, Any]:
        def cat(c: CategoryScore) -> dict[str, Any]:
            return {"n": c.n, "answered": round(c.answered, 4), "right_page_first": round(c.page_first, 4),
                    "gold_in_answer": round(c.gold, 4), "refused": round(c.refused, 4),
                    "verbatim": round(c.verbatim_ok / c.verbatim_n, 4) if c.verbatim_n else None}
        return {
            "suite": self.name, "decision": "model" if self.model else "rules",
            ("operating_point" if self.model else "min_line_coverage"): self.gate, "threshold": self.threshold,
            "table": {k: cat(v) for k, v in self.table.items()},
            "curve": [{("operating_point" if self.model else "min_line_coverage"): g, **{k: cat(v) for k, v in t.items()}}
                      for g, t in self.points],
            "notes": list(self.notes),
        }

    def text(self) -> str:
        ins = [*self.in_categories, "in scope"]
        outs = [*self.out_categories, "out of scope"]
        decided = (f"coverage model, operating point {self.gate:.3f}" if self.model else
                   f"threshold {self.threshold}, min_line_coverage {self.gate}")
        lines = [f"{self.name}: extract, {decided}", ""]
        lines.append(f"{'':16}{'n':>5}{'answered':>10}{'page first':>12}{'gold shown':>12}{'refused':>9}{'verbatim':>10}")
        for name in [*ins, *outs]:
            c = self.table.get(name)
            if c is None:
                continue
            verb = f"{c.verbatim_ok / c.verbatim_n:.3f}" if c.verbatim_n else "-"
            if name in ins:
                lines.append(f"{name:16}{c.n:>5}{c.answered:>10.3f}{c.page_first:>12.3f}{c.gold:>12.3f}{'':>9}{verb:>10}")
            else:
                lines.append(f"{name:16}{c.n:>5}{'':>10}{'':>12}{'':>12}{c.refused:>9.3f}{verb:>10}")
        swept = ("the coverage model's operating point swept (refused below P(governed))" if self.model else
                 "min_line_coverage swept; threshold fixed")
        lines += ["", f"refusal curve ({swept}): in scope answered / gold shown, out of scope refused"]
        head = f"{'cut' if self.model else 'gate':>6}" + "".join(f"{n[:12]:>14}" for n in ins) + "".join(f"{n[:12]:>14}" for n in outs)
        lines.append(head)
        for g, t in self.points:
            cells = [f"{g:>6.2f}"]
            for n in ins:
                c = t.get(n)
                cells.append(f"{'-':>14}" if c is None else f"{c.answered:>7.3f}/{c.gold:.3f}"[:14].rjust(14))
            for n in outs:
                c = t.get(n)
                cells.append(f"{'-':>14}" if c is None else f"{c.refused:>14.3f}")
            lines.append("".join(cells))
        lines += self.notes
        return "\n".join(lines)


def suite_report(name: str, rows: Sequence[dict], categories: dict[str, str], gate: float, threshold: float,
                 in_categories: Sequence[str], out_categories: Sequence[str],
                 gates: Sequence[float] | None = None) -> SuiteReport:
    """`gate`: where the decision cuts (the coverage model's operating point, or
    min_line_coverage under the rules); the curve sweeps the same measure."""
    items = outcomes(rows, categories)
    order = [*in_categories, "in scope", *out_categories, "out of scope"]
    model = model_decided(rows)
    sweep = sorted({*(gates if gates is not None else MODEL_CUTS if model else CURVE_GATES), gate})
    return SuiteReport(name, gate, threshold, in_categories, out_categories,
                       score_at(items, gate, order), curve(items, sweep, order), model=model)


def spread(questions: Sequence[PatientQuestion], limit: int | None) -> list[PatientQuestion]:
    """At most `limit` questions, spread evenly over the file (every category is kept)."""
    if not limit or limit >= len(questions):
        return list(questions)
    if limit <= 0:
        raise InputError(f"--limit must be a positive number of questions, not {limit}")
    step = len(questions) / limit
    return [questions[int(i * step)] for i in range(limit)]


def run_patient_suite(settings: Any, *, bench_dir: Path | None = None, workdir: Path | None = None,
                      limit: int | None = None, log: Any = None) -> SuiteReport:
    """Serve, scrape, ask, score: the patient suite's report (see the module docstring)."""
    import sys

    from guiderag import retrieval

    from .runner import run_questions

    log = log or (lambda msg: print(msg, file=sys.stderr))
    path = suite_dir(bench_dir)
    questions = spread(load_questions(path), limit)
    with workdir_for(workdir, "guiderag-patient-") as (work, keep):
        base, (report,) = scrape_into(settings, work, "patient", path / "site", "gb/index.html")
        stored = len(report.summary.added)
        log(f"devbench patient: {len(questions)} questions; the scraper stored {stored} pages")
        run = open_run(base)
        outcome = run_questions(run, [p.question for p in questions],
                                work / "results-patient.xlsx" if keep else None,
                                mode="extract", retriever=retrieval.load_retriever(run.retrieval, run.storage,
                                                                            progress=run.progress_reporter),
                                label="patient")
        categories = {p.question.id: p.category for p in questions}
        rep = suite_report("patient-gastric", outcome.rows, categories, operating_point(outcome.rows, settings),
                           settings.retrieval.threshold, IN_CATEGORIES, OUT_CATEGORIES)
        rep.notes.append(f"site: {path / 'site'}; {stored} pages stored by the scraper")
        if keep:
            rep.notes.append(f"site store and results workbook: {work}")
        return rep
