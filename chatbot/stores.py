"""The store connections answering works through: one per thread for an SQLite store.

Every ask writes its audit row, and a serving process reads the store's state before each
request (chatbot.library_cache). Opening an SQLite store costs a connection and the
schema checks of `Store(...)` each time, more than the row itself; so each thread keeps
one open connection per store file (`thread_store`), made on first use, and reuses it for
every later ask and state check in that thread. A thread's connection is its own (SQLite
connections are not shared between threads here), it is made again in a forked process
and when the file at the path was replaced (another inode: a store removed and created
anew), and `close_all` closes every one (chatbot.library_cache.clear). A PostgreSQL store
is not kept: its connections come from the process's pool (store.pg) and go back to it
after each use, so a thread holds none between requests.

SQLite runs in WAL mode with synchronous=NORMAL (store.sqlite): a commit is in the
write-ahead log, visible to every other connection and kept through any crash of the
process, before the insert returns, so an answer's audit row is committed before the
answer is returned; what NORMAL gives up against FULL is the fsync of each commit, i.e. a
power loss or an OS crash can lose the last commits before the next checkpoint (FULL
costs an fsync per answer, about 3.4 ms on this machine's disk against 0.06 ms).
"""
from __future__ import annotations

import contextlib
import os
import threading
import weakref
from typing import Iterator

from guiderag.resources import is_postgres_url
from guiderag.store import Store


class _Held(threading.local):
    """One thread's connection, and what it was opened for."""

    store: Store | None = None
    pid = 0
    identity: tuple[int, int] | None = None
    generation = -1


class ThreadStores:
    """The per-thread connections of one store location (see the module docstring)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._local = _Held()
        self._open: weakref.WeakSet[Store] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._generation = 0  # close_all starts a new one: every kept connection is closed

    def _identity(self) -> tuple[int, int] | None:
        """The file's (device, inode), None when there is none (Store then says why)."""
        try:
            st = os.stat(self.location)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    @contextlib.contextmanager
    def use(self) -> Iterator[Store]:
        """This thread's open Store (opened now when it has none yet, it was made in another
        process or the file was replaced); a PostgreSQL store is opened for the block only."""
        if is_postgres_url(self.location):
            with Store(self.location, create=False) as shared:
                yield shared
            return
        held = self._local
        identity = self._identity()
        kept = held.store
        pid = os.getpid()
        if (kept is None or held.pid != pid or held.identity != identity or identity is None
                or held.generation != self._generation):
            if kept is not None and held.pid == pid and held.generation == self._generation:
                kept.close()
            held.store = None
            kept = Store(self.location, create=False)  # StoreMissingError without a store
            with self._lock:
                self._open.add(kept)
                held.store, held.pid, held.identity, held.generation = kept, pid, self._identity(), self._generation
        yield kept

    def close_all(self) -> None:
        """Close every thread's connection (their threads open new ones when they ask again)."""
        with self._lock:
            stores = list(self._open)
            self._open.clear()
            self._generation += 1
        for store in stores:
            try:
                store.close()
            except Exception:  # pragma: no cover - a connection already gone
                pass


_STORES: dict[str, ThreadStores] = {}
_STORES_LOCK = threading.Lock()


def thread_stores(location: str) -> ThreadStores:
    """The process's ThreadStores of a store location (made on first use)."""
    with _STORES_LOCK:
        found = _STORES.get(location)
        if found is None:
            found = _STORES[location] = ThreadStores(location)
        return found


def close_all() -> None:
    """Close every kept connection of this process (tests; a process done with its stores)."""
    with _STORES_LOCK:
        every = list(_STORES.values())
        _STORES.clear()
    for stores in every:
        stores.close_all()
