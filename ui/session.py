"""One patient's question in the chat: answered on its own, with what the page needs to show it.

No Streamlit here. The guidelines' retrievers (a chatbot.Library) are loaded once per
process and store state (a new scrape gives a new run id, and so a new library), and
shared by every browser session of the process, as Streamlit's own resource cache would.
"""
from __future__ import annotations

import hashlib
import logging
import threading
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

# One answer at a time per process. Streamlit runs each browser session in its own thread;
# loading the index may rebuild it, which analyses text too.
ASK_LOCK = threading.Lock()
_LIBRARIES: OrderedDict[tuple[str, int | None], Library] = OrderedDict()


@dataclass
class Turn:
    """One question and what was shown for it (kept in the browser session only)."""

    question: str
    answer: Answer | None = None
    error_kind: str | None = None  # "model" | "question" | "app"
    error_detail: str = ""
    # the stored lines of each cited page version, by (url, version)
    pages: dict[tuple[str, int], tuple[str, ...]] = field(default_factory=dict)


def settings_key(settings: Settings) -> str:
    """A cache key for everything that shapes the retriever (a digest: no secret kept)."""
    return hashlib.sha256(repr(settings).encode("utf-8")).hexdigest()


def get_library(settings: Settings, status: StoreStatus) -> Library:
    """The guidelines of these settings and this store state, each guideline's retriever
    loaded once per process (call with ASK_LOCK held: a library is used under it only)."""
    key = (settings_key(settings), status.last_run_id)
    library = _LIBRARIES.get(key)
    if library is None:
        library = Library(settings)
        try:
            for gid in library.ids:
                library.retriever(gid)
        except BaseException:
            library.close()
            raise
        _LIBRARIES[key] = library
        while len(_LIBRARIES) > RETRIEVERS_KEPT:
            _LIBRARIES.popitem(last=False)[1].close()
    else:
        _LIBRARIES.move_to_end(key)
    return library


def retriever_loaded(settings: Settings, status: StoreStatus) -> bool:
    """False before the first question of a process (or after a new scrape): loading the
    index then takes a moment, worth a spinner even in extract mode."""
    return (settings_key(settings), status.last_run_id) in _LIBRARIES


def ask(question: str, mode: str, settings: Settings, status: StoreStatus, guideline: str | None = None) -> Turn:
    """Answer one question on its own (no history goes to the model) and record the turn;
    `guideline` restricts it to one guideline (None or "auto": the one that governs it)."""
    turn = Turn(question=question)
    try:
        with ASK_LOCK:
            # Inside the lock: loading may rebuild a stale index, which analyzes text too.
            library = get_library(settings, status)
            turn.answer = library.ask(question, mode, guideline)
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
    """The stored lines of the page versions an answer cites (for "read the whole page")."""
    wanted = {(p.url, p.version) for p in answer.passages}
    return {(p.url, p.version): tuple(p.lines) for p in pages if (p.url, p.version) in wanted}
