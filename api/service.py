"""What one API process answers from: the store's guidelines (a chatbot.Library), loaded
once per store state.

Every request opens its own store connection (SQLite in WAL mode lets readers run beside
the one writer; PostgreSQL serves many); the audit row of each answer is committed before
the answer is returned. The library (every guideline's retriever) is shared by every
request of the process. When another process scrapes the store, the next request sees a
new run id: one request loads the new library while the others go on answering from the
previous one, and the new one is swapped in with one assignment: no request in flight
fails or mixes two corpus versions.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from guiderag.chatbot import Library
from guiderag.chatbot.answer import Answer
from guiderag.errors import EmptyCorpusError, GuideragError
from guiderag.settings import Settings
from guiderag.store import Store
from guiderag.store.connection import configure as configure_store


@dataclass(frozen=True)
class Loaded:
    """A library and the store state (its last scrape run) it was loaded for."""

    run_id: str  # Store.state() when it was loaded
    library: Library


class Service:
    """Answers, pages, guidelines and readiness for the API; thread-safe."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        configure_store(settings)  # a PostgreSQL store's pool size and bounded waits
        self._loaded: Loaded | None = None
        self._retired: Library | None = None  # the one before: closed at the next reload
        self._loading = threading.Lock()

    # -- the store ------------------------------------------------------------------
    def open_store(self) -> Store:
        """A connection of this request's own (StoreMissingError when there is no store)."""
        return Store(self.settings.store, create=False)

    def last_run_id(self) -> str:
        """What changes whenever the corpora may have: Store.state()."""
        with self.open_store() as store:
            return store.state()

    # -- the library ------------------------------------------------------------------
    def library(self) -> Library:
        """The library of the store's current corpora, (re)loaded when a scrape ran.

        While one request loads a new one, the others keep answering from the previous
        one; only a process with nothing loaded yet waits."""
        run_id = self.last_run_id()
        loaded = self._loaded
        if loaded is not None and loaded.run_id == run_id:
            return loaded.library
        if loaded is not None and not self._loading.acquire(blocking=False):
            return loaded.library  # another request is loading the new one
        if loaded is None:
            self._loading.acquire()
        try:
            current = self._loaded
            if current is None or current.run_id != run_id:
                fresh = Loaded(run_id, self._load())
                if self._retired is not None:
                    self._retired.close()
                self._retired = current.library if current is not None else None
                # the previous library stays usable by requests in flight until the next reload
                self._loaded = current = fresh
            return current.library
        finally:
            self._loading.release()

    def _load(self) -> Library:
        library = Library(self.settings)
        try:
            if not library.ids:
                raise EmptyCorpusError(
                    f"the page store {self.settings.store_name} holds no content page: run "
                    "`guiderag scrape TOC_URL` (or `guiderag scrape --sample`) first")
            for gid in library.ids:
                library.retriever(gid)  # a stale index is rebuilt here, once
        except BaseException:
            library.close()
            raise
        return library

    @property
    def loaded_run_id(self) -> str | None:
        return self._loaded.run_id if self._loaded is not None else None

    # -- what the routes call -------------------------------------------------------
    def ask(self, question: str, mode: str | None, guideline: str | None = None) -> Answer:
        """One question, routed and answered and audited exactly as `guiderag ask` does."""
        return self.library().ask(question, mode, guideline)

    def pages(self, guideline: str | None = None) -> list[dict[str, Any]]:
        """What `guiderag pages --json` lists (of one guideline, or of all)."""
        with self.open_store() as store:
            gid = store.resolve_guideline(guideline) if guideline else None
            return [p.summary() for p in store.current_pages(guideline=gid)]

    def guidelines(self) -> list[dict[str, Any]]:
        """What `guiderag guidelines --json` lists."""
        from guiderag.commands import guideline_rows

        return guideline_rows(self.settings)

    def readiness(self) -> tuple[bool, str]:
        """(ready, why): the store answers and the indexes of its corpora are loaded."""
        try:
            run_id = self.last_run_id()
        except GuideragError as exc:
            return False, f"store unavailable: {exc}"
        if self._loaded is None or self._loaded.run_id != run_id:
            try:
                self.library()
            except EmptyCorpusError as exc:
                return False, str(exc)
            except GuideragError as exc:
                return False, f"index unavailable: {exc}"
        return True, "ready"
