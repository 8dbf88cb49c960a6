"""The work folder of a dev benchmark and the fresh store inside it."""
from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from guiderag.settings import DEFAULT_GUIDELINE, Settings


@contextlib.contextmanager
def workdir_for(path: Path | None, prefix: str = "guiderag-devbench-") -> Iterator[tuple[Path, bool]]:
    """The given folder (kept), else a temporary one (removed): (folder, kept)."""
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path, True
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp), False


def fresh_store(settings: Settings) -> None:
    """Remove the store (and its index) an earlier devbench left in the work folder."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = settings.storage.db.with_name(settings.storage.db.name + suffix)
        if p.exists():
            p.unlink()
    index_dir = settings.guideline_scope(DEFAULT_GUIDELINE).index_dir
    if index_dir.is_dir():
        shutil.rmtree(index_dir)
