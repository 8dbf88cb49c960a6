"""Store-wide locks: one scrape at a time, one first-run build at a time.

Two scrapes of one store at once would each commit a whole run, the later one marking as
removed what the earlier one added from another table of contents, and both fetching the
site twice: the second one is refused before it fetches anything (`scrape_lock`). Two
first starts of the app (two browser tabs, or the app and the CLI) would both fill an
empty store with the sample: the second waits for the first (`bootstrap_lock`).

Each backend holds them its own way (store.backend.Backend.lock): an SQLite store with
flock on a file beside the database (store.filelock), a PostgreSQL store with an
advisory lock that any machine using it takes; either is released when its process ends,
however it ends, so a crash never leaves a stale lock.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from guiderag.errors import StoreBusyError

from .backend import LockHeld
from .connection import backend_for
from .filelock import file_lock, lock_path

__all__ = ["bootstrap_lock", "file_lock", "lock_path", "scrape_lock", "scrape_running"]


@contextlib.contextmanager
def scrape_lock(db: Path | str) -> Iterator[None]:
    """Hold the store's scrape lock, or raise StoreBusyError at once when another holds it
    (the message says who)."""
    backend = backend_for(db)
    try:
        with backend.lock("scrape", wait=False):
            yield
    except LockHeld as held:
        raise StoreBusyError(
            f"another scrape is writing to {backend.location} ({held.holder}); nothing was changed. Wait for "
            "it to finish, then scrape again"
        ) from None


def scrape_running(db: Path | str) -> bool:
    """Whether a live process holds the store's scrape lock now (without taking it or
    writing anything): a run recorded as running while this is False has lost its process."""
    return backend_for(db).held("scrape")


@contextlib.contextmanager
def bootstrap_lock(db: Path | str) -> Iterator[None]:
    """Wait for, then hold, the store's first-run lock."""
    with backend_for(db).lock("bootstrap", wait=True):
        yield
