"""Files written so that a reader sees the old file or the new one, never half of one.

A new version is written to a temporary file beside its target (`.<name>.<random>.tmp`,
same folder, so `os.replace` onto the target is atomic) and moved in place. A process
killed in between (kill -9, a power cut) leaves its temporary file behind; so each one is
locked (flock) for as long as its process may still install it, and the next write of the
same target removes the ones whose lock is free: their process died
(`remove_dead_temporaries`), as the index's `tmp-v-*` folders are removed.
"""
from __future__ import annotations

import fcntl
import glob
import os
import tempfile
from pathlib import Path
from typing import Any


class BesideFile:
    """A locked temporary file beside `target`: `install()` moves it in place, `discard()`
    removes it; either releases the lock."""

    def __init__(self, target: Path) -> None:
        self.target = Path(target)
        self.target.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_temporaries(self.target)
        fd, name = tempfile.mkstemp(prefix=temporary_prefix(self.target), suffix=".tmp", dir=self.target.parent)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self.path = Path(name)
        self._fd: int | None = fd

    def install(self) -> None:
        """Atomically replace the target with this file."""
        try:
            os.replace(self.path, self.target)
        finally:
            self._release()

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)
        self._release()

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the lock
            self._fd = None

    def __fspath__(self) -> str:
        return str(self.path)


def temporary_prefix(target: Path) -> str:
    return "." + Path(target).name + "."


def remove_dead_temporaries(target: Path) -> list[str]:
    """Remove the temporary files of `target` whose writer died (their lock is free) and
    return their names; a live writer's (this process's or another's) is left alone."""
    target = Path(target)
    removed: list[str] = []
    pattern = glob.escape(str(target.parent / temporary_prefix(target))) + "*.tmp"
    for name in glob.glob(pattern):
        try:
            fd = os.open(name, os.O_RDONLY)
        except OSError:
            continue  # gone already, or not ours to read
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # its writer is alive
        try:
            os.unlink(name)
            removed.append(Path(name).name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def save_workbook_beside(wb: Any, path: Path) -> BesideFile:
    """Save an openpyxl workbook to a new locked temporary file beside `path` and return it
    (`install()` it, or `discard()` it). On failure nothing is left behind."""
    tmp = BesideFile(Path(path))
    try:
        wb.save(tmp.path)
    except BaseException:
        tmp.discard()
        raise
    return tmp


def save_workbook_atomic(wb: Any, path: Path) -> None:
    """Save an openpyxl workbook to `path` atomically (temporary file, then os.replace)."""
    tmp = save_workbook_beside(wb, path)
    try:
        tmp.install()
    except BaseException:
        tmp.discard()
        raise
