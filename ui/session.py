"""One patient's question in the chat, read with their earlier questions, and what the page needs to show it.

No Streamlit here. The guidelines' retrievers (a chatbot.Library) are the process's shared
library for these settings (chatbot.library_cache, as the API's): loaded once per store
state, so a new scrape or a removed guideline, by this process or another, is seen at
the next question; and shared by every browser session of the process, as Streamlit's
own resource cache would.

Answers run concurrently: Streamlit answers each browser session in its own thread, and a
patient waiting 20 s for a model must not hold up another whose answer takes milliseconds.
Only loading (or rebuilding) an index takes INDEX_LOCK. What the threads share is safe to
share: the retrievers are read-only once loaded (MeCab parses under retrieval.analyzer's
own lock; its token caches are plain dicts, whose single operations are atomic), and so
are the evidence gates (their analysis caches are thread-safe); each answer opens its own
store connection and audit log (SQLite in WAL mode, 30 s busy timeout); and model calls
take one of the process's model slots (chatbot.llm).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Sequence

from guiderag.chatbot import Library
from guiderag.chatbot.answer import Answer
from guiderag.chatbot.config import BotConfig
from guiderag.chatbot.library_cache import LOAD_LOCK, cache_for, shared_library
from guiderag.errors import GuideragError, ModelError, QuestionError
from guiderag.settings import Settings
from guiderag.store import PageVersion

from .bootstrap import StoreStatus
from .render import incident

_log = logging.getLogger("guiderag.app")

# One index load or build at a time per process (loading may rebuild a stale index, and
# the first run builds the sample's); answering takes no lock.
INDEX_LOCK = LOAD_LOCK


@dataclass
class Turn:
    """One question and what was shown for it (kept in the browser session only)."""

    question: str
    answer: Answer | None = None
    error_kind: str | None = None  # "model" | "question" | "app"
    error_detail: str = ""
    # the stored lines of each cited page version, by (passage link, version): of a PDF, its cited page's
    pages: dict[tuple[str, int], tuple[str, ...]] = field(default_factory=dict)


def get_library(settings: Settings) -> Library:
    """The guidelines of these settings' store in its current state, each guideline's
    retriever loaded once per process and state. A loaded library is returned at once; a
    load holds INDEX_LOCK (one load at a time)."""
    return shared_library(BotConfig.of(settings))


def retriever_loaded(settings: Settings, status: StoreStatus) -> bool:
    """False before the first question of a process (or after a new scrape or a removal,
    as `status` read the store): loading the index then takes a moment, worth a progress
    line even in extract mode."""
    return status.state is not None and cache_for(BotConfig.of(settings)).loaded_state == status.state


@dataclass
class Activity:
    """Where an answer is, for the page's progress line: written by the answering thread,
    read by the page's (each field is one assignment: no lock needed)."""

    stage: str = "searching"  # loading | searching | keywords | queued | answering
    chars: int = 0  # characters of the model's reply received so far
    started: float = field(default_factory=time.monotonic)

    def update(self, stage: str, chars: int = 0) -> None:
        self.stage, self.chars = stage, chars

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started


def earlier_questions(turns: Sequence[Turn], settings: Settings) -> list[str]:
    """What a new question of this browser session is read with: the questions of its
    earlier turns that were answered or refused (not the ones that could not be read or
    failed), oldest first, the last settings.answer.history_max_turns. Only this session's
    turns: the page keeps them in its own session state."""
    asked = [t.question for t in turns if t.answer is not None]
    return asked[-settings.answer.history_max_turns:]


def ask(
    question: str, mode: str, settings: Settings, *, guideline: str | None = None,
    activity: Activity | None = None, history: Sequence[str] = (),
) -> Turn:
    """Answer one question, read with this patient's earlier questions (`history`, oldest
    first: earlier_questions), and record the turn; the earlier questions reach no answer
    model (chatbot.conversation). `guideline` restricts it to one guideline (None or
    "auto": the one that governs it); `activity` hears where the answer is (for the page's
    progress line). The library is the store's as it is now (a removed guideline is no
    longer asked)."""
    turn = Turn(question=question)
    try:
        library = get_library(settings)
        if activity is not None:
            activity.update("searching")
        # the shared library; the answer opens its own store connection for its audit row
        turn.answer = library.ask(question, mode, guideline,
                                  progress=activity.update if activity is not None else None,
                                  history=list(history) or None)
        turn.pages = cited_pages(turn.answer, [p for r in library.loaded() for p in r.pages])
    except QuestionError:
        turn.error_kind = "question"
    except ModelError as exc:  # includes ModelNotConfiguredError
        turn.error_kind = "model"
        turn.error_detail = incident(settings)
        _log.warning("model error answering %r: %s", question, exc)
    except GuideragError as exc:
        turn.error_kind = "app"
        turn.error_detail = incident(settings)
        _log.error("error answering %r: %s", question, exc)
    except Exception:  # a bug must not crash the patient's page; log it for us
        turn.error_kind = "app"
        turn.error_detail = incident(settings)
        _log.exception("answering %r failed", question)
    return turn


def cited_pages(answer: Answer, pages: Sequence[PageVersion]) -> dict[tuple[str, int], tuple[str, ...]]:
    """The stored lines of the page versions an answer cites (for "read the whole page"),
    by (passage link, version): of a PDF, the lines of the cited PDF page (the others
    blank, so that every line keeps its number). `pages` are the retrievers' units: a
    PDF's sections are put back together."""
    cited = {(p.url, p.version) for p in answer.passages}
    whole: dict[tuple[str, int], list[str]] = {}
    layouts = {}
    for page in pages:
        key = (page.url, page.version)
        if key not in cited:
            continue
        lines = whole.setdefault(key, [""] * len(page.lines))
        lines.extend([""] * (len(page.lines) - len(lines)))
        for i, line in enumerate(page.lines):
            lines[i] = lines[i] or line
        if page.pdf is not None:
            layouts[key] = page.pdf
    out: dict[tuple[str, int], tuple[str, ...]] = {}
    for p in answer.passages:
        doc = whole.get((p.url, p.version))
        if doc is None:
            continue
        layout = layouts.get((p.url, p.version))
        if layout is not None and p.pdf_page is not None:
            on = layout.lines_on([p.pdf_page])
            out[(p.link, p.version)] = tuple(line if n in on else "" for n, line in enumerate(doc, start=1))
        else:
            out[(p.link, p.version)] = tuple(doc)
    return out
