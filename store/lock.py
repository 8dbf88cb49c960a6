"""File locks beside the store: one scrape at a time, one first-run build at a time.

Two scrapes of one store at once would each commit a whole run, the later one marking as
removed what the earlier one added from another table of contents, and both fetching the
site twice: the second one is refused before it fetches anything (`scrape_lock`). Two
first starts of the app (two browser tabs, or the app and the CLI) would both fill an
empty store with the sample: the second waits for the first (`bootstrap_lock`).

Both are `flock` on a file beside the database (`file_lock`): the system releases it when
its process ends, however it ends, so a crash never leaves a stale lock. flock binds the
lock to one open file, so two threads of one process exclude each other too.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, TextIO

from guiderag.errors import StoreBusyError, StoreError
from guiderag.resources import is_postgres_url


def lock_path(db: Path | str, purpose: str = "scrape") -> Path:
    """<db>.<purpose>.lock, beside the store."""
    return Path(db).with_name(f"{Path(db).name}.{purpose}.lock")


@contextlib.contextmanager
def file_lock(path: Path, *, wait: bool, what: str = "the lock file") -> Iterator[TextIO]:
    """Hold an exclusive flock on `path` (created if need be) and yield the open file.

    wait=False raises BlockingIOError at once when another holds it. A lock file that
    cannot be created is a StoreError naming `what` and where."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+", encoding="utf-8")
    except OSError as exc:
        raise StoreError(
            f"cannot create {what} {path} beside the store ({exc.strerror or exc}); "
            "check that the folder exists and is writable. Nothing was changed"
        ) from exc
    with handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        try:
            yield handle
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def scrape_lock(db: Path | str) -> Iterator[None]:
    """Hold the store's scrape lock, or raise StoreBusyError at once when another holds it.
    The lock file says who holds it, for the message. A PostgreSQL store is locked with an
    advisory lock instead (any machine scraping it takes the same one)."""
    if is_postgres_url(db):
        with _advisory_lock(str(db), SCRAPE_LOCK_KEY, wait=False):
            yield
        return
    path = lock_path(db, "scrape")
    with contextlib.ExitStack() as stack:
        try:
            handle = stack.enter_context(file_lock(path, wait=False, what="the scrape lock"))
        except BlockingIOError:
            holder = path.read_text(encoding="utf-8", errors="replace").strip() or "another process"
            raise StoreBusyError(
                f"another scrape is writing to {db} ({holder}); nothing was changed. Wait for it "
                "to finish, then scrape again"
            ) from None
        handle.seek(0)
        handle.truncate()
        started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        handle.write(f"pid {os.getpid()}, started {started}")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()


def scrape_running(db: Path | str) -> bool:
    """Whether a live process holds the store's scrape lock now (without taking it or
    writing anything): a run recorded as running while this is False has lost its process."""
    if is_postgres_url(db):
        from .pg import PgConnection

        conn = PgConnection(str(db), readonly=True)
        try:
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND classid = ? AND objid = ? AND objsubid = 1)",
                ((SCRAPE_LOCK_KEY >> 32) & 0xFFFFFFFF, SCRAPE_LOCK_KEY & 0xFFFFFFFF)).fetchone()
            return bool(row[0])
        finally:
            conn.close()
    try:
        fd = os.open(lock_path(db, "scrape"), os.O_RDONLY)
    except FileNotFoundError:
        return False  # never scraped here, or by a guiderag before the lock file
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases the shared lock, if it was taken
    return False


@contextlib.contextmanager
def bootstrap_lock(db: Path | str) -> Iterator[None]:
    """Wait for, then hold, the store's first-run lock."""
    if is_postgres_url(db):
        with _advisory_lock(str(db), BOOTSTRAP_LOCK_KEY, wait=True):
            yield
        return
    with file_lock(lock_path(db, "bootstrap"), wait=True, what="the first-run lock"):
        yield


# PostgreSQL advisory lock keys (one database holds one store).
SCRAPE_LOCK_KEY = 0x67726173  # "gras"
BOOTSTRAP_LOCK_KEY = 0x67726174


@contextlib.contextmanager
def _advisory_lock(url: str, key: int, *, wait: bool) -> Iterator[None]:
    """A session-level advisory lock on a connection of its own, held for the block: the
    server releases it when that connection ends, however its process ends."""
    from .pg import PgConnection, display

    conn = PgConnection(url, pooled=False)  # the lock lives and dies with this connection
    try:
        if wait:
            conn.advisory_lock(key)
        elif not conn.try_advisory_lock(key):
            holder = conn.advisory_holder(key)
            raise StoreBusyError(
                f"another scrape is writing to {display(url)} ({holder}); nothing was changed. Wait for "
                "it to finish, then scrape again"
            )
        try:
            yield
        finally:
            conn.advisory_unlock(key)
    finally:
        conn.close()
