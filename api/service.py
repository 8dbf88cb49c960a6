"""What one API process answers from: the retriever, loaded once per corpus version.

Every request opens its own store connection (SQLite in WAL mode lets readers run beside
the one writer; the audit row of each answer is committed before the answer is returned).
The retriever is shared by every request of the process. When another process scrapes the
store, the next request sees a new run id, one request loads the new index while the
others go on answering from the previous one, and the new one is swapped in with one
assignment: no request in flight fails or mixes two corpus versions.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from guiderag.chatbot import Chatbot
from guiderag.chatbot.answer import Answer
from guiderag.errors import EmptyCorpusError, GuideragError
from guiderag.retrieval import Retriever, load_retriever
from guiderag.settings import Settings
from guiderag.store import Store


@dataclass(frozen=True)
class Loaded:
    """A retriever and the store state (last good scrape) it was loaded for."""

    run_id: int | None
    retriever: Retriever


class Service:
    """Answers, pages and readiness for the API; thread-safe."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._loaded: Loaded | None = None
        self._loading = threading.Lock()

    # -- the store ------------------------------------------------------------------
    def open_store(self) -> Store:
        """A connection of this request's own (StoreMissingError when there is no store)."""
        return Store(self.settings.db, create=False)

    def last_run_id(self) -> int | None:
        with self.open_store() as store:
            run = store.last_run()
        return int(run["id"]) if run else None

    # -- the retriever ----------------------------------------------------------------
    def retriever(self) -> Retriever:
        """The retriever of the store's current corpus, (re)loaded when a scrape changed it.

        While one request loads a new version, the others keep answering from the previous
        one; only a process with nothing loaded yet waits."""
        run_id = self.last_run_id()
        loaded = self._loaded
        if loaded is not None and loaded.run_id == run_id:
            return loaded.retriever
        if loaded is not None and not self._loading.acquire(blocking=False):
            return loaded.retriever  # another request is loading the new version
        if loaded is None:
            self._loading.acquire()
        try:
            current = self._loaded
            if current is None or current.run_id != run_id:
                current = Loaded(run_id, load_retriever(self.settings))
                self._loaded = current
            return current.retriever
        finally:
            self._loading.release()

    @property
    def loaded_run_id(self) -> int | None:
        return self._loaded.run_id if self._loaded is not None else None

    # -- what the routes call -------------------------------------------------------
    def ask(self, question: str, mode: str | None) -> Answer:
        """One question, answered and audited exactly as `guiderag ask` does."""
        retriever = self.retriever()
        with Chatbot(self.settings, retriever=retriever) as bot:
            return bot.ask(question, mode)

    def pages(self) -> list[dict[str, Any]]:
        """What `guiderag pages --json` lists."""
        with self.open_store() as store:
            return [p.summary() for p in store.current_pages()]

    def readiness(self) -> tuple[bool, str]:
        """(ready, why): the store answers and the index of its corpus is loaded."""
        try:
            run_id = self.last_run_id()
        except GuideragError as exc:
            return False, f"store unavailable: {exc}"
        if self._loaded is None or self._loaded.run_id != run_id:
            try:
                self.retriever()
            except EmptyCorpusError as exc:
                return False, str(exc)
            except GuideragError as exc:
                return False, f"index unavailable: {exc}"
        return True, "ready"
