"""A process's loaded libraries: the store's guidelines, every retriever loaded, kept per
config (chatbot.config.BotConfig) and reloaded when the store's state changes.

The API (api.service), the chat (ui.session) and an evaluation run (eval.runner) take
their Library from here (`shared_library(config)`), and so share one per config.
`Store.state()` changes when a scrape committed or a guideline was removed, by this
process or another, so a removed guideline or a new scrape is seen at the next request:
the request that finds a new state loads the library anew.

While a library loads (its indexes may be rebuilt: seconds), requests are not held up:
- one load (or index build) at a time per process: LOAD_LOCK (the chat's INDEX_LOCK);
- while a load runs, the other requests keep answering from the library they had; only
  a cache with nothing loaded yet waits for it;
- the new library replaces the previous one in one assignment, so no request in flight
  fails or mixes two corpus versions; the previous one is closed at the next reload (its
  own store connection is all that closing touches: each ask has its own).
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from guiderag.errors import EmptyCorpusError

from .config import BotConfig
from .library import Library
from .llm import LLMClient
from .stores import close_all as close_stores
from .stores import thread_stores

if TYPE_CHECKING:
    from guiderag.retrieval import Retriever

# One index load or build at a time per process (loading may rebuild a stale index; the
# chat's first run builds the sample's under it too).
LOAD_LOCK = threading.Lock()
# Settings whose libraries stay loaded in one process (a server has one; tests and tools
# that open several stores keep the most recent few); the least recently used is closed.
SETTINGS_KEPT = 4


def load_library(
    config: BotConfig, retrievers: dict[str, Retriever] | None = None, llm: LLMClient | None = None
) -> Library:
    """A Library over the store's guidelines with every guideline's retriever loaded (a
    stale index is rebuilt here, once, before any question) and warmed (Retriever.warm: a
    server's preload then reads the query's tables before its workers fork); `retrievers`
    are ones already loaded, by guideline id. EmptyCorpusError when no guideline holds a page."""
    library = Library(config, retrievers=retrievers, llm=llm)
    try:
        if not library.ids:
            raise EmptyCorpusError(
                f"the page store {config.store.store_name} holds no content page: run "
                "`guiderag scrape TOC_URL` (or `guiderag scrape --sample`) first")
        for gid in library.ids:
            library.retriever(gid).warm()
    except BaseException:
        library.close()
        raise
    return library


@dataclass(frozen=True)
class Loaded:
    """A library and the store state it was loaded for."""

    state: str  # Store.state() when it was loaded
    library: Library


class LibraryCache:
    """The library of one config's store, reloaded whenever Store.state() changed."""

    def __init__(self, config: BotConfig) -> None:
        self.config = config
        self._loaded: Loaded | None = None
        self._retired: Library | None = None  # the one before: closed at the next reload

    def state(self) -> str:
        """The store's state now, one query through the calling thread's connection
        (chatbot.stores; StoreMissingError without a store)."""
        with thread_stores(str(self.config.store.store)).use() as store:
            return store.state()

    @property
    def loaded_state(self) -> str | None:
        """The state the current library was loaded for (None before the first load)."""
        loaded = self._loaded
        return loaded.state if loaded is not None else None

    def library(self, state: str | None = None) -> Library:
        """The library of the store's current state (`state`: as just read by the caller,
        else read here), loaded when the state changed; see the module docstring."""
        state = self.state() if state is None else state
        loaded = self._loaded
        if loaded is not None and loaded.state == state:
            return loaded.library
        if loaded is not None and not LOAD_LOCK.acquire(blocking=False):
            return loaded.library  # a load is under way: answer from the previous one meanwhile
        if loaded is None:
            LOAD_LOCK.acquire()
        try:
            current = self._loaded
            if current is None or current.state != state:
                fresh = Loaded(state, load_library(self.config))
                if self._retired is not None:
                    self._retired.close()
                self._retired = current.library if current is not None else None
                # the previous library stays usable by requests in flight until the next reload
                self._loaded = current = fresh
            return current.library
        finally:
            LOAD_LOCK.release()

    def release(self) -> None:
        """Close the libraries' own store connections, to be opened again when next needed
        (before a fork: a worker process opens its own)."""
        for library in (self._retired, self._loaded.library if self._loaded is not None else None):
            if library is not None:
                library.release()

    def close(self) -> None:
        """Close the libraries' own store connections (asks in flight have their own)."""
        for library in (self._retired, self._loaded.library if self._loaded is not None else None):
            if library is not None:
                library.close()
        self._loaded = self._retired = None


def settings_key(config: BotConfig) -> str:
    """The cache key of everything that shapes a library (a digest: no secret kept)."""
    return hashlib.sha256(repr(config).encode("utf-8")).hexdigest()


_CACHES: OrderedDict[str, LibraryCache] = OrderedDict()
_CACHES_LOCK = threading.Lock()  # the dict itself, held for a lookup or an insert only


def cache_for(config: BotConfig) -> LibraryCache:
    """This process's library cache for `config` (made on first use)."""
    key = settings_key(config)
    with _CACHES_LOCK:
        cache = _CACHES.get(key)
        if cache is None:
            cache = _CACHES[key] = LibraryCache(config)
            while len(_CACHES) > SETTINGS_KEPT:
                _CACHES.popitem(last=False)[1].close()
        else:
            _CACHES.move_to_end(key)
        return cache


def shared_library(config: BotConfig, state: str | None = None) -> Library:
    """The library of `config`'s store as it is now, shared by every caller in the process
    (`state`: Store.state() as the caller just read it, else read here)."""
    return cache_for(config).library(state)


def release_connections() -> None:
    """Close every store connection this process holds, its libraries' own and every
    thread's (chatbot.stores), each opened again when next needed: called before forking
    workers (api.workers), which must not share a connection with this process."""
    with _CACHES_LOCK:
        caches = list(_CACHES.values())
    for cache in caches:
        cache.release()
    close_stores()


def clear() -> None:
    """Close and forget every cached library and every kept store connection (a process
    done with its stores; tests)."""
    with _CACHES_LOCK:
        caches = list(_CACHES.values())
        _CACHES.clear()
    for cache in caches:
        cache.close()
    close_stores()
