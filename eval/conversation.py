"""The conversation dev benchmark: multi-turn patient chats, each turn read with the ones before.

`guiderag devbench --suite conversation` runs ../shared/bench/conversation-gastric (45
conversations, 135 turns, on the patient-gastric guidebook: its README), serving
../patient-gastric/site on 127.0.0.1 and scraping it with our scraper into a fresh store,
then the conversation sets of our own on other demo guidebooks (eval/conversations:
written before any reader ran on them, to see how the reading transfers): the bundled
sample guideline, and issue 20's demo guidebooks (eval/sites: breast, colorectal).

Every turn is asked twice, each time in a fresh session through eval.runner: with its
conversation's earlier questions as its history (oldest first, out-of-scope turns
included, whatever was answered to them), and alone (the baseline: what the product did
before it read conversations). The table is by category, with history / alone: answered,
right page first (the first candidate page is the turn's gold page) and gold shown (one of
its answer strings in the shown answer) for the in-scope categories (opening, follow_up,
topic_switch); refused for the out-of-scope ones (follow_up_oos, switch_oos).
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from guiderag.errors import InputError
from guiderag.resources import conversation_set, shared_bench_dir

from .workbook import IN_SCOPE, OUT_OF_SCOPE, Question
from .workdir import scrape_into, workdir_for

SUITE_DIR = "conversation-gastric"
IN_CATEGORIES = ("opening", "follow_up", "topic_switch")
OUT_CATEGORIES = ("follow_up_oos", "switch_oos")


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation as an eval Question (its history set) and its category."""

    question: Question
    category: str


@dataclass(frozen=True)
class ConversationSet:
    """A conversations.jsonl and the guidebook site its gold pages are on."""

    name: str
    conversations: Path
    site: Path | None  # a static folder to serve, or None when `build` makes it
    toc: str  # the table of contents' path on the site
    build: Callable[[Path], str] | None = None  # writes the site into a folder, returns its TOC path


def suite_dir(bench_dir: Path | None = None) -> Path:
    path = Path(bench_dir) if bench_dir is not None else shared_bench_dir() / SUITE_DIR
    if not (path / "conversations.jsonl").is_file():
        raise InputError(f"no conversation benchmark at {path} (conversations.jsonl expected): give "
                         "--conversation-dir, or put it at ../shared/bench/conversation-gastric")
    return path


def gastric_set(bench_dir: Path | None = None, patient_dir: Path | None = None) -> ConversationSet:
    """The shared development set, on ../patient-gastric/site (its README)."""
    path = suite_dir(bench_dir)
    site = Path(patient_dir) / "site" if patient_dir is not None else path.parent / "patient-gastric" / "site"
    if not (site / "gb" / "index.html").is_file():
        raise InputError(f"the conversation benchmark's site {site} is missing (gb/index.html expected): "
                         "give --patient-dir, or put patient-gastric beside it")
    return ConversationSet("conversation-gastric", path / "conversations.jsonl", site, "gb/index.html")


def own_sets() -> list[ConversationSet]:
    """The conversation sets of our own (eval/conversations): on the bundled sample
    guideline, and on issue 20's demo guidebooks (eval/sites, built by eval.demo_sites)."""
    from guiderag.resources import SAMPLE_TOC_PATH, sample_site_dir

    from . import demo_sites

    def builder(name: str) -> Callable[[Path], str]:
        return lambda folder: demo_sites.build_site(demo_sites.load_guide(name), folder)

    return [ConversationSet("sample-lung", conversation_set("sample-lung.jsonl"), sample_site_dir(), SAMPLE_TOC_PATH),
            *(ConversationSet(f"demo-{name}", conversation_set(f"demo-{name}.jsonl"), None, "", builder(name))
              for name in ("breast", "colorectal"))]


def load_turns(path: Path) -> list[Turn]:
    """The turns of a conversations.jsonl (see ../shared/bench/conversation-gastric/README.md),
    each with the questions of its conversation's earlier turns as history."""
    out: list[Turn] = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            conversation = json.loads(line)
            cid = str(conversation["id"])
            earlier: list[str] = []
            for t in sorted(conversation["turns"], key=lambda t: int(t["turn"])):
                kind = IN_SCOPE if t["kind"] == "in_scope" else OUT_OF_SCOPE
                q = Question(str(t["id"]), t["question"], kind, gold_url=t.get("gold_page") or None,
                             gold_answers=list(t.get("answers") or []), conversation=cid,
                             turn=int(t["turn"]), history=tuple(earlier))
                out.append(Turn(q, str(t.get("category") or kind)))
                earlier.append(t["question"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{path} line {number}: not a conversation object ({exc})") from exc
    return out


@dataclass
class Rates:
    n: int = 0
    answered: float = 0.0
    page_first: float = 0.0
    gold: float = 0.0
    refused: float = 0.0
    read_with_history: float = 0.0  # share of the turns answered or refused with a context

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def rates(rows: Sequence[dict]) -> Rates:
    n = len(rows)
    if not n:
        return Rates()
    ok = [bool(r.get("governed")) for r in rows]
    return Rates(
        n=n,
        answered=sum(ok) / n,
        page_first=sum(a and bool(r.get("page_first")) for a, r in zip(ok, rows)) / n,
        gold=sum(a and bool(r.get("gold_hit")) for a, r in zip(ok, rows)) / n,
        refused=sum(not r.get("governed") and not r.get("failed") for r in rows) / n,
        read_with_history=sum(bool(r.get("context")) for r in rows) / n,
    )


@dataclass
class SetReport:
    """One conversation set's table: per category, with history and alone."""

    name: str
    turns: int
    conversations: int
    with_history: dict[str, Rates]
    alone: dict[str, Rates]
    verbatim: float | None = None  # answered turns (with history) whose every line is stored
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"set": self.name, "turns": self.turns, "conversations": self.conversations,
                "with_history": {k: v.to_json() for k, v in self.with_history.items()},
                "alone": {k: v.to_json() for k, v in self.alone.items()},
                "verbatim": self.verbatim, "notes": list(self.notes)}

    def text(self) -> str:
        lines = [f"{self.name}: {self.conversations} conversations, {self.turns} turns; extract, offline; "
                 "each turn with its conversation's earlier questions (history) / alone (baseline)", ""]
        lines.append(f"{'category':15}{'n':>4}  {'answered':>15}  {'right page first':>17}  {'gold shown':>15}"
                     f"  {'refused':>15}  {'read with history':>17}")
        for name in (*IN_CATEGORIES, *OUT_CATEGORIES):
            h, a = self.with_history.get(name), self.alone.get(name)
            if h is None or a is None or not h.n:
                continue
            pair = lambda x, y: f"{x:.3f} / {y:.3f}"  # noqa: E731
            ctx = f"{h.read_with_history:.3f}"
            if name in IN_CATEGORIES:
                lines.append(f"{name:15}{h.n:>4}  {pair(h.answered, a.answered):>15}  "
                             f"{pair(h.page_first, a.page_first):>17}  {pair(h.gold, a.gold):>15}  {'':>15}  {ctx:>17}")
            else:
                lines.append(f"{name:15}{h.n:>4}  {'':>15}  {'':>17}  {'':>15}  {pair(h.refused, a.refused):>15}"
                             f"  {ctx:>17}")
        if self.verbatim is not None:
            lines.append(f"verbatim (answered with history): {self.verbatim:.3f}")
        lines += self.notes
        return "\n".join(lines)


def by_category(rows: Sequence[dict], categories: dict[str, str]) -> dict[str, Rates]:
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(categories.get(str(r.get("id")), str(r.get("kind"))), []).append(r)
    return {name: rates(group) for name, group in groups.items()}


def run_set(settings: Any, cset: ConversationSet, *, workdir: Path | None = None, limit: int | None = None,
            log: Callable[[str], None] | None = None) -> SetReport:
    """Serve the set's site, scrape it into a fresh store, ask every turn with its history and
    alone, and score both by category."""
    import dataclasses

    from guiderag import retrieval

    from .runner import run_questions

    log = log or (lambda msg: print(msg, file=sys.stderr))
    turns = load_turns(cset.conversations)
    if limit:
        keep = sorted({t.question.conversation or "" for t in turns})[: max(1, limit)]
        turns = [t for t in turns if t.question.conversation in keep]
    with workdir_for(workdir, "guiderag-conversation-") as (work, keep_files):
        site, toc = cset.site, cset.toc
        if cset.build is not None:
            site = work / f"{cset.name}-site"
            toc = cset.build(site)
        assert site is not None
        base, (report,) = scrape_into(settings, work, cset.name, site, toc)
        stored = len(report.summary.added)
        log(f"devbench conversation {cset.name}: {len(turns)} turns; the scraper stored {stored} pages")
        retriever = retrieval.load_retriever(base.retrieval, base.storage, progress=base.progress_reporter)
        questions = [t.question for t in turns]
        runs = {}
        for label, qs in (("history", questions),
                          ("alone", [dataclasses.replace(q, history=()) for q in questions])):
            out = work / f"results-{cset.name}-{label}.xlsx" if keep_files else None
            runs[label] = run_questions(base, qs, out, mode="extract", retriever=retriever,
                                        label=f"{cset.name} {label}").rows
        categories = {t.question.id: t.category for t in turns}
        answered = [r for r in runs["history"] if r.get("governed") and r.get("verbatim") is not None]
        rep = SetReport(cset.name, len(turns), len({t.question.conversation for t in turns}),
                        by_category(runs["history"], categories), by_category(runs["alone"], categories),
                        sum(bool(r["verbatim"]) for r in answered) / len(answered) if answered else None)
        rep.notes.append(f"site: {site}; {stored} pages stored by the scraper")
        if keep_files:
            rep.notes.append(f"store and results workbooks: {work}")
        return rep


@dataclass
class ConversationReport:
    sets: list[SetReport]

    def to_json(self) -> dict[str, Any]:
        return {"sets": [s.to_json() for s in self.sets]}

    def text(self) -> str:
        return "\n\n".join(s.text() for s in self.sets)


def run_conversation_suite(settings: Any, *, bench_dir: Path | None = None, patient_dir: Path | None = None,
                           workdir: Path | None = None, limit: int | None = None,
                           log: Callable[[str], None] | None = None) -> ConversationReport:
    """The shared gastric set, then each set of our own (see the module docstring)."""
    sets = [gastric_set(bench_dir, patient_dir), *own_sets()]
    return ConversationReport([
        run_set(settings, s, workdir=workdir / s.name if workdir is not None else None, limit=limit, log=log)
        for s in sets])
