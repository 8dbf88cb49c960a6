"""One answer's cost in-process: `Library.ask` CPU per question, and MeCab parses per ask.

Part of `guiderag loadbench` (the in-process row beside the served ones): a Library over
the bench's store answers questions it has not seen before (the retriever keeps the parse
and the query of recent questions, so a repeated question would cost less than a new
one), extract mode, each ask writing its audit row as always. Two fresh libraries: one
timed (CPU seconds of this process, time.process_time, per ask), one under cProfile for
the calls per ask (`retrieval.analyzer.tokenize`, MeCab's parse: only the question's
should remain) and the functions that cost most.
"""
from __future__ import annotations

import cProfile
import pstats
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from guiderag.resources import question_set
from guiderag.settings import EXTRACT, Settings

if TYPE_CHECKING:
    from guiderag.chatbot.config import BotConfig
    from guiderag.chatbot.library import Library

# Asked first by each library (its index loaded, its resources read), not measured.
WARM_UP = ("胸腺腫瘍にはどのような治療法がありますか？", "抗がん剤の副作用が心配です", "骨折したときのギプスの巻き方を教えてください")
# The measured questions: the bundled patient-worded set (in and out of scope), asked once each.
QUESTION_SET = "sample_patient.xlsx"
# Functions listed in the profile, by own time.
PROFILE_TOP = 12


def sample_questions(path: Path | None = None) -> list[str]:
    """The question texts of the bundled patient-worded set (column `question`)."""
    import openpyxl

    wb = openpyxl.load_workbook(path or question_set(QUESTION_SET), read_only=True)
    try:
        rows = list(wb[wb.sheetnames[0]].iter_rows(values_only=True))
    finally:
        wb.close()
    col = [str(h).strip().lower() if h is not None else "" for h in rows[0]].index("question")
    return [str(r[col]) for r in rows[1:] if r[col]]


def _library(settings: Settings, db: str) -> Library:
    from guiderag.chatbot.config import BotConfig
    from guiderag.chatbot.library import Library

    library = Library(BotConfig.of(settings.replace(db=db, mode=EXTRACT)))
    for q in WARM_UP:
        library.ask(q)
    return library


def in_process(settings: Settings, db: str, questions: Sequence[str] | None = None) -> dict:
    """CPU ms per Library.ask on `db` (extract), tokenize calls per ask, the profile's top."""
    questions = list(questions if questions is not None else sample_questions())
    with _library(settings, db) as library:
        cpu, wall = time.process_time(), time.perf_counter()
        for q in questions:
            library.ask(q)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    with _library(settings, db) as library:
        profile = cProfile.Profile()
        profile.enable()
        for q in questions:
            library.ask(q)
        profile.disable()
    stats = pstats.Stats(profile)
    calls = {name: 0 for name in ("tokenize", "Analyzer.tokens")}
    top = []
    rows = stats.stats  # type: ignore[attr-defined]  # {(file, line, name): (cc, nc, tt, ct, callers)}
    for (file, _line, name), (_cc, nc, tt, ct, _callers) in rows.items():
        if file.endswith("retrieval/analyzer.py") and name == "tokenize":
            calls["tokenize"] += nc
        elif file.endswith("retrieval/analyzer.py") and name == "tokens":
            calls["Analyzer.tokens"] += nc
        top.append((tt, ct, nc, f"{Path(file).parent.name}/{Path(file).name}:{name}" if file != "~" else name))
    top.sort(reverse=True)
    n = max(1, len(questions))
    return {
        "questions": len(questions),
        "cpu_ms_per_ask": round(1000 * cpu / n, 2),
        "wall_ms_per_ask": round(1000 * wall / n, 2),
        "tokenize_calls": calls["tokenize"],
        "tokenize_per_ask": round(calls["tokenize"] / n, 2),
        "profile_top": [{"function": f, "calls": nc, "own_ms_per_ask": round(1000 * tt / n, 3),
                         "cumulative_ms_per_ask": round(1000 * ct / n, 3)} for tt, ct, nc, f in top[:PROFILE_TOP]],
    }
