"""The work folder of a dev benchmark and the fresh store inside it."""
from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

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


def scrape_into(settings: Settings, work: Path, name: str, site: Path, toc: str, *,
                times: int = 1) -> tuple[Settings, list[Any]]:
    """A dev benchmark's site in a fresh store of the work folder: work/<name>.db with its
    own URL workbook (an earlier run's would be read as hand edits), the site served on
    loopback and scraped `times` times (a second scrape of an unchanged site is a check
    of its own), then indexed. Returns the store's settings and each scrape's report."""
    from guiderag import retrieval, scraper
    from guiderag.scraper.sample import serve_directory

    book = work / f"{name}-urls.xlsx"
    base = settings.replace(db=work / f"{name}.db", delay_s=0.0, urls_xlsx=book, progress=False)
    fresh_store(base)
    if book.exists():
        book.unlink()
    with serve_directory(site) as root:
        reports = [scraper.scrape_site(base.scraper, base.storage, root + toc) for _ in range(times)]
    retrieval.build_index(base.retrieval, base.storage, progress=base.progress_reporter)
    return base, reports
