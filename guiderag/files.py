"""Files written so that a reader sees the old file or the new one, never half of one."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any


def save_workbook_beside(wb: Any, path: Path) -> Path:
    """Save an openpyxl workbook to a new temporary file beside `path` and return it.

    The temporary file lies in the same folder, so `os.replace` onto `path` is atomic.
    On failure nothing is left behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        wb.save(tmp)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def save_workbook_atomic(wb: Any, path: Path) -> None:
    """Save an openpyxl workbook to `path` atomically (temporary file, then os.replace)."""
    tmp = save_workbook_beside(wb, path)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
