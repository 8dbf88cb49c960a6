"""What one API process answers from: the store's guidelines (a chatbot.Library), loaded
once per store state.

Every request opens its own store connection (SQLite in WAL mode lets readers run beside
the one writer; PostgreSQL serves many); the audit row of each answer is committed before
the answer is returned. The library (every guideline's retriever) is the process's shared
one for these settings (chatbot.library_cache), keyed on Store.state(): when another
process scrapes the store or removes a guideline, the next request sees a new state; one
request loads the new library while the others go on answering from the previous one,
and the new one is swapped in with one assignment: no request in flight fails or mixes
two corpus versions.
"""
from __future__ import annotations

from typing import Any, Callable

from guiderag.chatbot import Library
from guiderag.chatbot.answer import Answer
from guiderag.chatbot.config import BotConfig
from guiderag.chatbot.library_cache import LibraryCache, cache_for
from guiderag.errors import EmptyCorpusError, GuideragError
from guiderag.settings import Settings
from guiderag.store import Store
from guiderag.store.connection import configure as configure_store


class Service:
    """Answers, pages, guidelines and readiness for the API; thread-safe."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        configure_store(settings.storage)  # a PostgreSQL store's pool size and bounded waits

    @property
    def _cache(self) -> LibraryCache:
        """The process's library cache for these settings (the chat's too, for the same)."""
        return cache_for(BotConfig.of(self.settings))

    # -- the store ------------------------------------------------------------------
    def open_store(self) -> Store:
        """A connection of this request's own (StoreMissingError when there is no store)."""
        return Store(self.settings.store, create=False)

    # -- the library ------------------------------------------------------------------
    def library(self) -> Library:
        """The library of the store's current corpora, (re)loaded when the store's state
        changed. While one request loads a new one, the others keep answering from the
        previous one; only a process with nothing loaded yet waits."""
        return self._cache.library()

    @property
    def loaded_run_id(self) -> str | None:
        """Store.state() of the library loaded (what /readyz reports as corpus_state)."""
        return self._cache.loaded_state

    # -- what the routes call -------------------------------------------------------
    def ask(self, question: str, mode: str | None, guideline: str | None = None,
            history: list[str] | None = None) -> Answer:
        """One question (read with its conversation's earlier questions, when given), routed
        and answered and audited exactly as `guiderag ask` does."""
        return self.library().ask(question, mode, guideline, history=history)

    def pages(self, guideline: str | None = None) -> list[dict[str, Any]]:
        """What `guiderag pages --json` lists (of one guideline, or of all)."""
        with self.open_store() as store:
            gid = store.resolve_guideline(guideline) if guideline else None
            return [p.summary() for p in store.current_pages(guideline=gid)]

    def guidelines(self) -> list[dict[str, Any]]:
        """What `guiderag guidelines --json` lists."""
        from guiderag.commands import guideline_rows

        return guideline_rows(self.settings)

    def readiness(self, at: Callable[[str], None] = lambda stage: None) -> tuple[bool, str]:
        """(ready, why): the store answers and the indexes of its corpora are loaded; `at`
        hears what is asked next ("store", "index"), for api.health's deadline."""
        at("store")
        try:
            state = self._cache.state()
        except GuideragError as exc:
            return False, f"store unavailable: {exc}"
        if self._cache.loaded_state != state:
            at("index")
            try:
                self._cache.library(state)
            except EmptyCorpusError as exc:
                return False, str(exc)
            except GuideragError as exc:
                return False, f"index unavailable: {exc}"
        return True, "ready"
