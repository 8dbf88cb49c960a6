"""One scrape, start to finish: TOC -> links -> workbook edits -> fetch -> one store transaction.

Order matters for "bad input changes nothing": the workbook is read and the TOC fetched and
classified before the store is even opened; every page is fetched before anything is
written; the whole run is then applied by `Store.commit_run` in one transaction. A site
that goes down part-way, Ctrl-C, or a full disk leave the last good corpus as it was (the
run is recorded as failed or aborted).
"""
from __future__ import annotations

import sqlite3
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

from guiderag.errors import GuideragError, InvalidURLError, ScrapeError, WorkbookError
from guiderag.progress import Progress
from guiderag.settings import Settings
from guiderag.store.lock import scrape_lock
from guiderag.store.pages import FetchedPage, RunSummary, Store, content_hash

from . import fetch, textlines, urls, workbook
from .harvest import LinkRecord, apply_robots, classify_links


@dataclass
class ScrapeReport:
    """A finished scrape: the store's summary, plus what the CLI shows around it."""

    summary: RunSummary
    toc_url: str
    links: list[LinkRecord]
    workbook_path: Path
    notes: list[str] = field(default_factory=list)

    @property
    def content_count(self) -> int:
        return sum(1 for r in self.links if r.include and r.category != urls.DUPLICATE)


class _Rebase:
    """Maps URLs fetched from `served` to the stable `public` site URL they are stored under."""

    def __init__(self, served: str, public: str | None) -> None:
        self.served = urls.site_of(urls.normalize_url(served))
        self.public_site = urls.site_of(urls.normalize_url(public)) if public else self.served

    def public(self, url: str) -> str:
        if self.public_site != self.served and url.startswith(self.served + "/"):
            return self.public_site + url[len(self.served):]
        return url

    def private(self, url: str) -> str:
        if self.public_site != self.served and url.startswith(self.public_site + "/"):
            return self.served + url[len(self.public_site):]
        return url


def check_toc_url(toc_url: str) -> str:
    """The normalised TOC URL, or InvalidURLError when it cannot be a web page."""
    raw = (toc_url or "").strip()
    try:
        parts = urlsplit(raw)
        valid = parts.scheme.lower() in urls.DEFAULT_PORTS and bool(parts.hostname)
        normal = urls.normalize_url(raw) if valid else ""
    except ValueError:
        valid = False
    if not valid:
        raise InvalidURLError(
            f"not an http(s) URL: {toc_url!r}; give the full address of the table-of-contents "
            "page, e.g. https://example.org/guide/index.html"
        )
    return normal


def scrape(settings: Settings, toc_url: str, *, urls_xlsx: Path | None = None) -> RunSummary:
    """Scrape the guideline whose table of contents is at `toc_url` into settings.db."""
    return scrape_site(settings, toc_url, urls_xlsx=urls_xlsx).summary


def scrape_site(settings: Settings, toc_url: str, *, urls_xlsx: Path | None = None,
                public_site: str | None = None, stderr: TextIO | None = None) -> ScrapeReport:
    """The whole scrape; `public_site` stores pages under another site URL (the sample's)."""
    err = stderr or sys.stderr
    toc = check_toc_url(toc_url)
    workbook_in = Path(urls_xlsx) if urls_xlsx else settings.urls_xlsx
    out_path = Path(workbook_in) if workbook_in else settings.workbook_path
    if out_path.suffix.lower() != ".xlsx":
        raise WorkbookError(f"the URL workbook must be an .xlsx file, not {out_path}")
    edits = workbook.read_edits(workbook_in) if workbook_in and Path(workbook_in).exists() else {}
    notes: list[str] = []
    if edits:
        notes.append(f"hand edits read from {workbook_in} ({len(edits)} rows)")

    with scrape_lock(settings.db), fetch.Fetcher(settings, toc) as fetcher:
        robots = fetcher.load_robots()
        if robots.unreachable:
            raise InvalidURLError(f"cannot fetch the table-of-contents page {toc}: {robots.note}. Check the "
                                  "URL and that the site is up; nothing was changed")
        if robots.unavailable:
            raise ScrapeError(f"the site {urls.site_of(toc)} is unavailable: {robots.note}. Nothing was fetched "
                              "and the store was not changed; scrape again when the site is back")
        notes.append(robots.note)
        toc_page = _fetch_toc(fetcher, toc)
        toc = urls.normalize_url(toc_page.final_url or toc)
        fetcher.move_to(toc)
        rebase = _Rebase(toc, public_site)
        if rebase.public_site != rebase.served:
            notes.append(f"served from {rebase.served}; pages stored under {rebase.public_site}")
        links = classify_links(toc_page.html, toc)
        if not links:
            raise InvalidURLError(f"the table-of-contents page {toc_url} has no links (<a href>): "
                                  "is this the right page?")
        links = apply_robots(links, robots.allowed)
        links = workbook.apply_edits(links, edits, public=rebase.public, private=rebase.private, toc_url=toc)
        targets = [r for r in links if r.include and r.category != urls.DUPLICATE]
        if not targets:
            # Nothing to store; the classification is still written out for review, since
            # the way forward is to mark pages include=TRUE in it.
            workbook.write(out_path, links, {}, public=rebase.public)
            counts = Counter(r.category for r in links)
            raise InvalidURLError(
                f"none of the {len(links)} links of {toc_url} is a guide page "
                f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}); the store was not "
                f"changed. Review the links in {out_path}, set include=TRUE for the guide's pages "
                f"and scrape again with --urls-xlsx {out_path}"
            )
        if 0 < settings.max_pages < len(targets):
            workbook.write(out_path, links, {}, public=rebase.public)
            raise InvalidURLError(
                f"the table-of-contents page {toc_url} lists {len(targets)} guide pages, more than the "
                f"{settings.max_pages} one scrape may fetch (GUIDERAG_MAX_PAGES); nothing was fetched and the "
                f"store was not changed. Review the links in {out_path} (set include=FALSE for what is not "
                f"the guide, then scrape with --urls-xlsx {out_path}), or raise GUIDERAG_MAX_PAGES"
            )
        store = Store(settings.db)
        try:
            store.check_integrity()  # before fetching a whole site into a store that cannot take it
            aborted = store.abort_unfinished_runs(
                "the scrape's process ended before it finished (killed, or the machine stopped); "
                "the corpus was left as it was")
            if aborted:
                notes.append(f"marked {len(aborted)} unfinished earlier run(s) aborted "
                             f"(run {', '.join(map(str, aborted))}): their process had died")
            report = _run(settings, store, fetcher, toc, links, targets, rebase, out_path, notes, err)
        finally:
            store.close()
    if not workbook_in:
        report.notes.append(f"to review the links, edit include/category in {out_path} and scrape again "
                            f"with --urls-xlsx {out_path}")
    return report


def _fetch_toc(fetcher: fetch.Fetcher, toc: str) -> fetch.FetchResult:
    if not fetcher.robots.allowed(toc):
        raise InvalidURLError(f"robots.txt of {urls.site_of(toc)} disallows the table-of-contents page {toc} "
                              f"({fetcher.robots.note}); guiderag obeys robots.txt")
    result = fetcher.fetch(toc)
    if result.kind == fetch.NOT_HTML:
        raise InvalidURLError(f"the table-of-contents URL {toc} is not an HTML page ({result.reason})")
    if not result.ok and (result.server_trouble or (result.status or 0) >= 500):
        raise ScrapeError(f"the site {urls.site_of(toc)} is unavailable: the table-of-contents page {toc} "
                          f"answered {result.reason}. Nothing was changed; scrape again when the site is back")
    if not result.ok:
        reason = result.reason or f"HTTP {result.status}"
        raise InvalidURLError(f"cannot fetch the table-of-contents page {toc}: {reason}. Check the URL "
                              "and that the site is up; nothing was changed")
    return result


def _run(settings: Settings, store: Store, fetcher: fetch.Fetcher, toc: str, links: list[LinkRecord],
         targets: list[LinkRecord], rebase: _Rebase, out_path: Path, notes: list[str],
         err: TextIO) -> ScrapeReport:
    run_id = store.begin_run(rebase.public(toc))
    fetched: list[FetchedPage] = []
    failed: dict[str, str] = {}
    gone: list[str] = []
    info: dict[str, workbook.FetchInfo] = {}
    verdicts: dict[str, tuple[str, str]] = {}  # url -> (category, reason) learnt by fetching
    tmp: Path | None = None
    try:
        trouble = 0
        keys = {urls.page_key(r.url) for r in targets}
        with Progress(len(targets), "fetch", enabled=settings.progress, stream=err) as bar:
            for rec in targets:
                public = rebase.public(rec.url)
                result = fetcher.fetch(rec.url, store.conditional_headers(public) if settings.conditional_get else {})
                bar.update(1, note=urlsplit(rec.url).path)
                trouble = trouble + 1 if result.server_trouble else 0
                if result.stay_away:
                    raise ScrapeError(
                        f"the site asked to be left alone: {rec.url}: {result.reason}. The scrape was "
                        "abandoned and the previous corpus kept; scrape again later, or raise the cap"
                    )
                if trouble >= settings.abort_after_failures > 0:
                    raise ScrapeError(
                        f"the site stopped answering: {trouble} pages in a row failed (last: {rec.url}: "
                        f"{result.reason}); the scrape was abandoned and the previous corpus kept. "
                        "Try again when the site is back"
                    )
                if result.ok and _redirected_to_listed(result, rec, keys):
                    verdicts[rec.url] = (urls.DUPLICATE, f"redirects to {result.final_url}, listed already")
                    continue
                if result.ok and result.final_url:
                    keys.add(urls.page_key(result.final_url))  # a later link redirecting here is a duplicate
                _record(result, public, store, fetched, failed, gone, info, verdicts, settings)
        if targets and not fetched and len(failed) == len(targets):
            raise ScrapeError(
                f"every one of the {len(targets)} pages failed (e.g. {next(iter(failed.items()))}); "
                "the previous corpus was kept"
            )
        final_links = [_with_fetch_verdict(r, verdicts) for r in links]
        content_urls = [rebase.public(r.url) for r in final_links
                        if r.include and r.auto_category != urls.DUPLICATE and rebase.public(r.url) not in gone]
        try:
            tmp = workbook.prepare(out_path, final_links, {rebase.private(k): v for k, v in info.items()},
                                   public=rebase.public)
        except OSError as exc:
            raise ScrapeError(f"could not write the URL workbook {out_path} ({exc}); the previous corpus "
                              "was kept. Free disk space or fix permissions, then scrape again") from exc
        summary = store.commit_run(run_id, fetched, content_urls=content_urls, failed=failed, gone=gone)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, KeyboardInterrupt):
            _mark_failed(store, run_id, f"interrupted ({exc or 'Ctrl-C'}); the previous corpus was kept",
                         "aborted")
        elif _run_status(store, run_id) == "running":  # commit_run records its own failures
            _mark_failed(store, run_id, str(exc) if isinstance(exc, GuideragError)
                         else f"{exc.__class__.__name__}: {exc}", "failed")
        raise
    try:
        workbook.install(tmp, out_path)  # the corpus is committed: only the workbook is at stake
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ScrapeError(f"the scrape was stored (run {run_id}), but the URL workbook {out_path} could "
                          f"not be replaced ({exc}); scrape again to rewrite it") from exc
    notes.append(f"URL workbook written to {out_path}")
    return ScrapeReport(summary=summary, toc_url=rebase.public(toc), links=final_links,
                        workbook_path=out_path, notes=notes)


def _redirected_to_listed(result: fetch.FetchResult, rec: LinkRecord, keys: set[str]) -> bool:
    """True when an in-site redirect lands on another page of the list (one entry per page)."""
    final = urls.page_key(result.final_url or rec.url)
    return final != urls.page_key(rec.url) and final in keys


def _mark_failed(store: Store, run_id: int, message: str, status: str) -> None:
    """Record why a run failed; a store too broken to say so must not hide the first error."""
    try:
        store.fail_run(run_id, message, status=status)
    except sqlite3.DatabaseError:
        pass


def _run_status(store: Store, run_id: int) -> str | None:
    try:
        row = store.conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
    except sqlite3.DatabaseError:
        return None
    return row[0] if row else None


def _with_fetch_verdict(rec: LinkRecord, verdicts: dict[str, tuple[str, str]]) -> LinkRecord:
    if rec.category == urls.DUPLICATE or rec.url not in verdicts:
        return rec
    category, reason = verdicts[rec.url]
    include = rec.include and category not in (urls.NOT_HTML, urls.DUPLICATE)
    return rec.with_verdict(category, reason, include=include)


def _record(result: fetch.FetchResult, public: str, store: Store, fetched: list[FetchedPage],
            failed: dict[str, str], gone: list[str], info: dict[str, workbook.FetchInfo],
            verdicts: dict[str, tuple[str, str]], settings: Settings) -> None:
    """File one fetch result under fetched / failed / gone, and note it for the workbook."""
    url = result.url
    if result.kind == fetch.OK:
        title, lines = textlines.extract(result.html, split_over_chars=settings.split_lines_over_chars)
        empty = ("empty page (no text lines)" if not textlines.nonempty(lines)
                 else "no letters in the page's text (only digits and symbols): not a page"
                 if not textlines.has_letters([title, *lines]) else "")
        if empty:
            failed[public] = empty
            verdicts[url] = (urls.CONTENT, f"fetch failed: {empty}")
            info[public] = workbook.FetchInfo(http_status=result.status)
            return
        page = FetchedPage(url=public, title=title, lines=tuple(lines), fetched_at=result.fetched_at,
                           etag=result.etag, last_modified=result.last_modified,
                           http_status=result.status or 200)
        fetched.append(page)
        info[public] = workbook.FetchInfo(result.status, title, result.fetched_at, content_hash(title, lines))
        if result.final_url and urls.normalize_url(result.final_url) != urls.normalize_url(url):
            verdicts[url] = (urls.CONTENT, f"guide page (redirected to {result.final_url})")
    elif result.kind == fetch.NOT_MODIFIED:
        fetched.append(FetchedPage(url=public, fetched_at=result.fetched_at, etag=result.etag,
                                   last_modified=result.last_modified, http_status=304, not_modified=True))
        stored = store.get_page(public)
        info[public] = workbook.FetchInfo(304, stored.title if stored else "",
                                          result.fetched_at, stored.content_hash if stored else "")
    elif result.kind == fetch.GONE:
        gone.append(public)
        verdicts[url] = (urls.CONTENT, result.reason)
        info[public] = workbook.FetchInfo(http_status=result.status, fetched_at=result.fetched_at)
    elif result.kind == fetch.NOT_HTML:
        verdicts[url] = (urls.NOT_HTML, result.reason)
        info[public] = workbook.FetchInfo(http_status=result.status, fetched_at=result.fetched_at)
    else:
        failed[public] = result.reason
        verdicts[url] = (urls.CONTENT, f"fetch failed: {result.reason}")
        info[public] = workbook.FetchInfo(http_status=result.status, fetched_at=result.fetched_at)
