"""`guiderag check`: is the live guideline still what the store holds? Nothing is written.

For one guideline: the table of contents is fetched and classified as a scrape would
(robots.txt, hand edits of its URL workbook, the page cap and the byte and time limits of
every fetch), every guide page fetched with a conditional
GET against the stored validators, and what a scrape would store compared with the store,
by content hash: pages changed, added (newly linked), removed (no longer linked, or gone),
unreachable (failing now), and the age of the last good scrape. The store is opened
read-only: its corpus, runs and the index are never written.

The outcome goes to stdout and the exit code (0 in sync, 3 diverged or older than
max_age_hours, 1 when the check itself failed), and to a small status file beside the
store (GuidelineScope.check_status_path, replaced atomically), where the app's sidebar and
`guiderag guidelines` read the last check.
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from guiderag.clock import utc_now
from guiderag.errors import GuideragError, InputError, InvalidURLError
from guiderag.files import BesideFile
from guiderag.settings import GuidelineScope, Settings
from guiderag.store.pages import Store, content_hash

from . import fetch
from .run import check_toc_url, fetch_round, over_page_cap, plan_site, read_workbook_edits

IN_SYNC, DIVERGED, TOO_OLD, FAILED = "in_sync", "diverged", "too_old", "failed"
EXIT_CODES = {IN_SYNC: 0, DIVERGED: 3, TOO_OLD: 3, FAILED: 1}


@dataclass
class CheckResult:
    """One guideline's check."""

    guideline: str
    toc_url: str | None
    status: str = IN_SYNC
    checked_at: str = field(default_factory=utc_now)
    changed: list[dict[str, Any]] = field(default_factory=list)  # url, title, stored/live hash
    added: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    unreachable: list[dict[str, Any]] = field(default_factory=list)  # url, reason
    unchanged: int = 0
    stored_pages: int = 0
    last_scrape: str | None = None
    last_run_id: int | None = None  # the scrape run compared with: a later one makes this check stale
    age_hours: float | None = None
    max_age_hours: float = 0.0
    error: str | None = None

    @property
    def diverged(self) -> bool:
        return bool(self.changed or self.added or self.removed or self.unreachable)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def age_hours(since: str | None, now: datetime | None = None) -> float | None:
    """Hours from an ISO-8601 UTC time to now (None when unknown or unparsable)."""
    if not since:
        return None
    try:
        moment = datetime.fromisoformat(since.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return max(0.0, ((now or datetime.now(timezone.utc)) - moment).total_seconds() / 3600.0)


def check_guideline(settings: Settings, guideline: GuidelineScope, toc_url: str | None = None) -> CheckResult:
    """Compare the live site of a guideline with the store; never writes the store.
    Failures (the site unreachable, a bad URL) come back as a FAILED result."""
    result = CheckResult(guideline=guideline.id, toc_url=toc_url, max_age_hours=settings.max_age_hours)
    try:
        _compare(settings, guideline, toc_url, result)
    except GuideragError as exc:
        if isinstance(exc, InputError) and not isinstance(exc, InvalidURLError):
            raise  # bad usage (no such guideline, no store): exit 2, not a failed check
        result.status, result.error = FAILED, str(exc)
        return result
    too_old = settings.max_age_hours > 0 and (result.age_hours is None or result.age_hours > settings.max_age_hours)
    result.status = DIVERGED if result.diverged else TOO_OLD if too_old else IN_SYNC
    return result


def _compare(settings: Settings, guideline: GuidelineScope, toc_url: str | None, result: CheckResult) -> None:
    with Store(settings.store, readonly=True) as store:
        known = store.get_guideline(guideline.id)
        if known is None or known.removed:
            raise InputError(f"the store {settings.store_name} holds no guideline {guideline.id!r} to check; "
                             "`guiderag guidelines` lists them")
        stored = {p.url: p for p in store.current_pages(guideline=known.id)}
        last = store.last_run(guideline=known.id)
        result.stored_pages = len(stored)
        result.last_scrape = (last.get("finished_at") or last.get("started_at")) if last else None
        result.last_run_id = int(last["id"]) if last else None
        result.age_hours = age_hours(result.last_scrape)
        toc = toc_url or known.toc_url
        if not toc:
            raise InputError(f"guideline {known.id!r} was never scraped from a table of contents: give TOC_URL")
        result.toc_url = check_toc_url(toc)
        _, _, edits = read_workbook_edits(settings, None, guideline)
        with fetch.Fetcher(settings, result.toc_url) as fetcher:
            plan = plan_site(fetcher, result.toc_url, toc, edits, None)
            too_many = over_page_cap(settings, plan)
            if too_many:  # the same cap as a scrape: a TOC of 20,000 links is not 20,000 requests
                raise InvalidURLError(f"{too_many}; no guide page was fetched. Raise GUIDERAG_MAX_PAGES, "
                                      "or review the table of contents with `guiderag scrape`")
            done = fetch_round(settings, store, fetcher, plan, io.StringIO())
    content = set(done.content_urls)
    for page in done.fetched:
        before = stored.get(page.url)
        if page.not_modified and before is not None:
            result.unchanged += 1
            continue
        now_hash = (before.content_hash if page.not_modified and before
                    else content_hash(page.title, page.lines, page.pdf))
        if before is None:
            result.added.append({"url": page.url, "title": page.title, "content_hash": now_hash})
        elif before.content_hash != now_hash:
            result.changed.append({"url": page.url, "title": page.title, "version": before.version,
                                   "stored_hash": before.content_hash, "live_hash": now_hash})
        else:
            result.unchanged += 1
    for url, reason in sorted(done.failed.items()):
        result.unreachable.append({"url": url, "reason": reason})
    gone = set(done.gone)
    for url in sorted(gone):
        if url not in stored:
            result.unreachable.append({"url": url, "reason": "linked from the table of contents, but gone (HTTP 404/410)"})
    for url, kept in sorted(stored.items()):
        if url in gone or (url not in content and url not in done.failed):
            why = "gone (HTTP 404/410)" if url in gone else "no longer linked from the table of contents as a guide page"
            result.removed.append({"url": url, "title": kept.title, "version": kept.version, "reason": why})


def write_status(guideline: GuidelineScope, result: CheckResult) -> Path:
    """Record the result in the guideline's status file (atomically); returns its path."""
    path = guideline.check_status_path
    tmp = BesideFile(path)  # removes the temporary files of checks that were killed, too
    try:
        with open(tmp.path, "w", encoding="utf-8") as fh:
            json.dump(result.to_json(), fh, ensure_ascii=False, indent=1)
        tmp.install()
    except BaseException:
        tmp.discard()
        raise
    return path


def read_status(guideline: GuidelineScope) -> dict[str, Any] | None:
    """The last check recorded for a guideline, or None (never checked, unreadable)."""
    try:
        data = json.loads(guideline.check_status_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "status" in data else None
