"""One patient's question in the chat: answered on its own, with what the page needs to show it.

No Streamlit here. The retriever is loaded once per process and store state (a new scrape
gives a new run id, and so a new retriever), and shared by every browser session of the
process, as Streamlit's own resource cache would.
"""
from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Sequence

from guiderag.chatbot import Chatbot
from guiderag.chatbot.answer import Answer
from guiderag.errors import GuideragError, ModelError, QuestionError
from guiderag.retrieval import Retriever, load_retriever
from guiderag.settings import Settings
from guiderag.store import PageVersion

from .bootstrap import StoreStatus
from .render import incident

_log = logging.getLogger("guiderag.app")
RETRIEVERS_KEPT = 4  # settings and store states whose retriever stays loaded

# One answer at a time per process. Streamlit runs each browser session in its own thread;
# loading the index may rebuild it, which analyses text too.
ASK_LOCK = threading.Lock()
_RETRIEVERS: OrderedDict[tuple[str, int | None], Retriever] = OrderedDict()


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


def get_retriever(settings: Settings, status: StoreStatus) -> Retriever:
    """The retriever of these settings and this store state, loaded once per process."""
    key = (settings_key(settings), status.last_run_id)
    retriever = _RETRIEVERS.get(key)
    if retriever is None:
        retriever = load_retriever(settings)
        _RETRIEVERS[key] = retriever
        while len(_RETRIEVERS) > RETRIEVERS_KEPT:
            _RETRIEVERS.popitem(last=False)
    else:
        _RETRIEVERS.move_to_end(key)
    return retriever


def retriever_loaded(settings: Settings, status: StoreStatus) -> bool:
    """False before the first question of a process (or after a new scrape): loading the
    index then takes a moment, worth a spinner even in extract mode."""
    return (settings_key(settings), status.last_run_id) in _RETRIEVERS


def ask(question: str, mode: str, settings: Settings, status: StoreStatus) -> Turn:
    """Answer one question on its own (no history goes to the model) and record the turn."""
    turn = Turn(question=question)
    try:
        with ASK_LOCK:
            # Inside the lock: loading may rebuild a stale index, which analyzes text too.
            retriever = get_retriever(settings, status)
            with Chatbot(settings, retriever=retriever) as bot:
                turn.answer = bot.ask(question, mode)
            turn.pages = cited_pages(turn.answer, retriever.pages)
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
