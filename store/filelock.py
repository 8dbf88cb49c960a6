"""flock on a file beside a store: released by the system when its process ends, however
it ends, so a crash never leaves a stale lock. flock binds the lock to one open file, so
two threads of one process exclude each other too. (The SQLite backend's store locks, the
index build's folder locks.)"""
from __future__ import annotations

import contextlib
import fcntl
from pathlib import Path
from typing import Iterator, TextIO

from guiderag.errors import StoreError


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
