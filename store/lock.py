"""One scrape at a time per store: an exclusive lock on a file beside the database.

Two scrapes of one store at once would each commit a whole run, the later one marking as
removed what the earlier one added from another table of contents, and both fetching the
site twice. The second one is refused before it fetches anything. The lock is `flock` on
`<db>.scrape.lock`: the system releases it when its process ends, however it ends, so a
crashed scrape never leaves a stale lock. The file says who holds it, for the message.
"""
from __future__ import annotations

import contextlib
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from guiderag.errors import StoreBusyError, StoreError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock, as before
    fcntl = None  # type: ignore[assignment]


def lock_path(db: Path) -> Path:
    return Path(db).with_name(Path(db).name + ".scrape.lock")


@contextlib.contextmanager
def scrape_lock(db: Path) -> Iterator[None]:
    """Hold the store's scrape lock, or raise StoreBusyError at once when another holds it."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    path = lock_path(db)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+", encoding="utf-8")
    except OSError as exc:
        raise StoreError(
            f"cannot create the scrape lock {path} beside the store ({exc.strerror or exc}); "
            "check that the folder exists and is writable. Nothing was changed"
        ) from exc
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise StoreBusyError(
                f"another scrape is writing to {db} ({holder}); nothing was changed. Wait for it "
                "to finish, then scrape again"
            ) from None
        try:
            handle.seek(0)
            handle.truncate()
            started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            handle.write(f"pid {os.getpid()}, started {started}")
            handle.flush()
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
