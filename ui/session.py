"""One patient's question in the chat: answered on its own, with what the page needs to show it.

No Streamlit here. The guidelines' retrievers (a chatbot.Library) are loaded once per
process and store state (a new scrape gives a new run id, and so a new library), and
shared by every browser session of the process, as Streamlit's own resource cache would.

Answers run concurrently: Streamlit answers each browser session in its own thread, and a
patient waiting 20 s for a model must not hold up another whose answer takes milliseconds.
Only loading (or rebuilding) an index takes INDEX_LOCK. What the threads share is safe to
share: the retrievers are read-only once loaded (MeCab parses under retrieval.analyzer's
own lock; its token caches are plain dicts, whose single operations are atomic); each
answer asks through a Library of its own over those retrievers, with its own store
connection and audit log (SQLite in WAL mode, 30 s busy timeout); and model calls take one
of the process's model slots (chatbot.llm).
"""
from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Sequence

from guiderag.chatbot import Library
from guiderag.chatbot.answer import Answer
from guiderag.errors import GuideragError, ModelError, QuestionError
from guiderag.settings import Settings
from guiderag.store import PageVersion

from .bootstrap import StoreStatus
from .render import incident

_log = logging.getLogger("guiderag.app")
RETRIEVERS_KEPT = 4  # settings and store states whose retrievers stay loaded

# One index load or build at a time per process (loading may rebuild a stale index, and
# the first run builds the sample's); answering takes no lock.
INDEX_LOCK = threading.Lock()
_LIBRARIES: OrderedDict[tuple[str, int | None], Library] = OrderedDict()
_LIBRARIES_LOCK = threading.Lock()  # the cache dict itself, held for a lookup or an insert only


@dataclass
class Turn:
    """One question and what was shown for it (kept in the browser session only)."""

    question: str
    answer: Answer | None = None
    error_kind: str | None = None  # "model" | "question" | "app"
    error_detail: str = ""
    # the stored lines of each cited page version, by (passage link, version): of a PDF, its cited page's
    pages: dict[tuple[str, int], tuple[str, ...]] = field(default_factory=dict)


def settings_key(settings: Settings) -> str:
    """A cache key for everything that shapes the retriever (a digest: no secret kept)."""
    return hashlib.sha256(repr(settings).encode("utf-8")).hexdigest()


def _cached(key: tuple[str, int | None]) -> Library | None:
    with _LIBRARIES_LOCK:
        library = _LIBRARIES.get(key)
        if library is not None:
            _LIBRARIES.move_to_end(key)
        return library


def get_library(settings: Settings, status: StoreStatus) -> Library:
    """The guidelines of these settings and this store state, each guideline's retriever
    loaded once per process. A loaded library is returned at once; a load holds INDEX_LOCK
    (one load at a time). Answer through `answering_library(...)`, not through this one."""
    key = (settings_key(settings), status.last_run_id)
    library = _cached(key)
    if library is not None:
        return library
    with INDEX_LOCK:
        library = _cached(key)  # another session may have loaded it while we waited
        if library is None:
            library = Library(settings)
            try:
                for gid in library.ids:
                    library.retriever(gid)
            except BaseException:
                library.close()
                raise
            with _LIBRARIES_LOCK:
                _LIBRARIES[key] = library
                while len(_LIBRARIES) > RETRIEVERS_KEPT:
                    _LIBRARIES.popitem(last=False)[1].close()  # its store only: answers have their own
    return library


def answering_library(shared: Library) -> Library:
    """A Library for one answer: the shared, loaded retrievers, and a store connection of its
    own (the audit row is written on it), so that answers in other threads share nothing
    that writes. One thread uses it, so its Chatbot shares that connection (share_store)
    instead of opening a second one."""
    return Library(shared.settings, retrievers={gid: shared.retriever(gid) for gid in shared.ids},
                   share_store=True)


def retriever_loaded(settings: Settings, status: StoreStatus) -> bool:
    """False before the first question of a process (or after a new scrape): loading the
    index then takes a moment, worth a progress line even in extract mode."""
    with _LIBRARIES_LOCK:
        return (settings_key(settings), status.last_run_id) in _LIBRARIES


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


def ask(
    question: str, mode: str, settings: Settings, status: StoreStatus, guideline: str | None = None,
    activity: Activity | None = None,
) -> Turn:
    """Answer one question on its own (no history goes to the model) and record the turn;
    `guideline` restricts it to one guideline (None or "auto": the one that governs it);
    `activity` hears where the answer is (for the page's progress line)."""
    turn = Turn(question=question)
    try:
        shared = get_library(settings, status)
        if activity is not None:
            activity.update("searching")
        with answering_library(shared) as library:
            turn.answer = library.ask(question, mode, guideline,
                                      progress=activity.update if activity is not None else None)
        turn.pages = cited_pages(turn.answer, [p for r in shared.loaded() for p in r.pages])
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
