"""First run: fill an empty page store with the bundled sample guideline and index it.

The chat app asks `needs_bootstrap(settings)` and then calls `ensure_corpus(settings)`.
Only the *default* store is ever filled (an SQLite file at the default location, that is
`scripts/chat.sh` or `guiderag chat` without --db / GUIDERAG_DB) and only while it has never
held a page: a store someone configured (a file named with --db, a PostgreSQL database) is
never given demo content instead of their guideline; an empty one shows the chat's "no
guideline yet" notice (`guiderag scrape --sample --db ...` puts the sample there on
purpose). `ensure_corpus` serves the bundled sample site from a loopback server it starts
and stops itself, scrapes it into the store and builds the retrieval index, reporting
each stage to an optional progress callback. A store that already holds pages is left
alone, so a real guideline scraped with `guiderag scrape` is never mixed with the sample.

One bootstrap at a time per store: a lock file beside the db serialises processes (two
browser tabs opening the app at once, or the app and the CLI).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from guiderag.errors import ScrapeError
from guiderag.resources import SAMPLE_SITE_URL, default_db
from guiderag.settings import Settings
from guiderag.store import Store
from guiderag.store.lock import bootstrap_lock
from guiderag.store.pages import store_exists

# progress(fraction between 0 and 1, message in Japanese for the user)
ProgressCallback = Callable[[float, str], None]

@dataclass(frozen=True)
class GuidelineStatus:
    """One guideline of the store, for the sidebar: what it is and whether to trust it."""

    id: str
    title: str
    toc_url: str | None
    pages: int
    last_scraped: str | None
    # why the sidebar warns: "diverged", "too_old" or "failed" (the last `guiderag check`,
    # when newer than the last scrape), "stale" (older than settings.storage.max_age_hours); None: fine
    warning: str | None = None
    checked_at: str | None = None

    @property
    def label(self) -> str:
        return self.title or self.id


@dataclass(frozen=True)
class StoreStatus:
    """What the sidebar says about the loaded guidelines."""

    pages: int  # live content pages
    toc_url: str | None  # the table-of-contents page of the last good scrape
    last_scraped: str | None  # finished_at of that scrape (ISO-8601 UTC)
    last_run_id: int | None
    guidelines: tuple[GuidelineStatus, ...] = ()  # the ones with pages, in id order
    state: str | None = None  # Store.state() as read for this status (None: no store)

    @property
    def empty(self) -> bool:
        return self.pages == 0

    @property
    def warnings(self) -> list[GuidelineStatus]:
        return [g for g in self.guidelines if g.warning]


@dataclass(frozen=True)
class BootstrapResult:
    """What a first-run build did."""

    built: bool  # False when the store already had pages
    pages: int
    toc_url: str | None = None
    summary: str = ""


def store_status(settings: Settings) -> StoreStatus:
    """Page count and last good scrape of the store at settings.storage.db (none there: empty)."""
    if _no_store_yet(settings):  # do not leave an empty database behind just by looking
        return StoreStatus(pages=0, toc_url=None, last_scraped=None, last_run_id=None)
    with Store(settings.store, create=False) as store:
        pages = store.conn.execute(
            "SELECT COUNT(*) FROM pages WHERE removed_at IS NULL"
        ).fetchone()[0]
        run = store.last_run()
        state = store.state()
        counts = store.page_counts()
        guidelines = []
        for g in store.guidelines():
            if not counts.get(g.id):
                continue
            last = store.last_run(guideline=g.id)
            scraped = (last.get("finished_at") or last.get("started_at")) if last else None
            guidelines.append(_guideline_status(settings, g.id, g.title, g.toc_url, counts[g.id], scraped,
                                                int(last["id"]) if last else None))
    return StoreStatus(
        pages=int(pages),
        toc_url=run["toc_url"] if run else None,
        last_scraped=(run.get("finished_at") or run.get("started_at")) if run else None,
        last_run_id=int(run["id"]) if run else None,
        guidelines=tuple(guidelines),
        state=state,
    )


def _guideline_status(settings: Settings, gid: str, title: str, toc_url: str | None, pages: int,
                      scraped: str | None, run_id: int | None) -> GuidelineStatus:
    """A guideline's sidebar status, with the warning its last check or its age calls for."""
    from guiderag.scraper.check import DIVERGED, FAILED, TOO_OLD, age_hours, read_status

    check = read_status(settings.guideline_scope(gid))
    warning, checked_at = None, None
    if check is not None:
        checked_at = check.get("checked_at")
        # a check of an earlier scrape says nothing of the corpus a later scrape stored
        if check.get("status") in (DIVERGED, TOO_OLD, FAILED) and check.get("last_run_id") == run_id:
            warning = str(check["status"])
    age = age_hours(scraped)
    if warning is None and settings.storage.max_age_hours > 0 and age is not None and age > settings.storage.max_age_hours:
        warning = "stale"
    return GuidelineStatus(gid, title, toc_url, pages, scraped, warning, checked_at)


def _no_store_yet(settings: Settings) -> bool:
    """No store at settings.store yet (no file, an empty one from `touch`, or a PostgreSQL
    database without guiderag's tables)."""
    return not store_exists(settings.store)


def _never_had_pages(settings: Settings) -> bool:
    if _no_store_yet(settings):
        return True
    with Store(settings.store, create=False) as store:
        return store.conn.execute("SELECT COUNT(*) FROM pages").fetchone()[0] == 0


def is_default_store(settings: Settings) -> bool:
    """True for the SQLite store at the default location (resources.default_db): no --db or
    GUIDERAG_DB named another one, and it is no PostgreSQL database."""
    if settings.storage.store_url:
        return False
    return Path(settings.storage.db).expanduser().absolute() == default_db().expanduser().absolute()


def needs_bootstrap(settings: Settings) -> bool:
    """True when the default store (is_default_store) has never held a page and the sample
    is not switched off (a store whose pages were all removed by a later scrape is a real,
    if empty, guideline and is not refilled; a configured store is never filled)."""
    return settings.chat.sample_on_empty and is_default_store(settings) and _never_had_pages(settings)


def ensure_corpus(settings: Settings, progress: ProgressCallback | None = None) -> BootstrapResult:
    """Scrape the bundled sample into a store that never held a page and build its index;
    else do nothing. Whether a store should get the sample is the caller's decision
    (needs_bootstrap: the chat fills only the default store).

    Raises ScrapeError when the sample could not be scraped (the store stays empty, so the
    next start tries again) and whatever `retrieval.build_index` raises.
    """
    report = progress or (lambda fraction, message: None)
    if not _never_had_pages(settings):
        return BootstrapResult(built=False, pages=store_status(settings).pages)
    with bootstrap_lock(settings.store):
        # Another thread or process may have finished the build while we waited.
        if not _never_had_pages(settings):
            return BootstrapResult(built=False, pages=store_status(settings).pages)
        # Imported here: the scraper and retrieval stages are heavy (MeCab, scikit-learn)
        # and the check above is all most starts need.
        from guiderag import retrieval
        from guiderag.scraper import scrape_site
        from guiderag.scraper.sample import serve_sample_site

        # Our own loopback server: no politeness delay needed, no progress bar on stderr.
        local = settings.replace(delay_s=0.0, progress=False)
        report(0.05, "同梱のサンプルガイドラインを用意しています…")
        with serve_sample_site() as served_toc:
            report(0.15, "ガイドラインのページを読み込んでいます…")
            # Stored under the sample's stable site URL, as `guiderag scrape --sample` does,
            # so a later `scrape --sample` compares like with like.
            scraped = scrape_site(local.scraper, local.storage, served_toc, public_site=SAMPLE_SITE_URL)
        summary = scraped.summary
        status = store_status(settings)
        if status.empty:
            raise ScrapeError(
                f"the bundled sample guideline gave no content page ({summary.describe()}); "
                "check data/sample_site and the scraper's classification"
            )
        report(0.7, f"{status.pages} ページを読み込みました。検索用の索引を作っています…")
        retrieval.build_index(local.retrieval, local.storage, progress=local.progress_reporter)
        report(1.0, "準備ができました。")
        return BootstrapResult(
            built=True, pages=status.pages, toc_url=scraped.toc_url, summary=summary.describe()
        )


__all__ = [
    "BootstrapResult",
    "GuidelineStatus",
    "ProgressCallback",
    "StoreStatus",
    "ensure_corpus",
    "is_default_store",
    "needs_bootstrap",
    "store_status",
]
