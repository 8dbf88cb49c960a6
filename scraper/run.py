"""One scrape, start to finish: TOC -> links -> workbook edits -> fetch -> one store transaction.

Order matters for "bad input changes nothing": the workbook is read and the TOC fetched and
classified before the store is even opened; every page is fetched before anything is
written; the whole run is then applied by `Store.commit_run` in one transaction. A site
that goes down part-way, Ctrl-C, or a full disk leave the last good corpus as it was (the
run is recorded as failed or aborted).

A scrape stores one guideline (its GuidelineScope, else the default one): the TOC's pages
become that guideline's, and no other guideline's page is read or written. Pages another
live guideline holds are refused before anything is fetched. After fetching, a page that
is only a list of links to guide pages is an `index`, and spellings of one document
(`?from=toc`, a canonical link) are `duplicate`s of one page (scraper.postfetch).

`plan_site` (the TOC and its classified links) and `fetch_round` (fetching and the
verdicts learnt by fetching) are shared with `guiderag check`, which compares their
outcome with the store instead of writing it.
"""
from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, TextIO
from urllib.parse import urlsplit

from guiderag.errors import GuideragError, InputError, InvalidURLError, ScrapeError, WorkbookError
from guiderag.files import BesideFile, remove_dead_temporaries
from guiderag.progress import Progress
from guiderag.settings import DEFAULT_GUIDELINE, GuidelineScope, Settings
from guiderag.store.lock import scrape_lock
from guiderag.store.pages import FetchedPage, RunSummary, Store, content_hash

from . import fetch, postfetch, textlines, urls, workbook
from .harvest import LinkRecord, apply_robots, classify_links
from .pdfpage import PdfReader


# What a run still recorded as running says once its process is known dead (no scrape
# lock held): marked so by the next scrape, and so shown by `guiderag guidelines` before.
DEAD_RUN_MESSAGE = ("the scrape's process ended before it finished (killed, or the machine stopped); "
                    "the corpus was left as it was")


@dataclass
class ScrapeReport:
    """A finished scrape: the store's summary, plus what the CLI shows around it."""

    summary: RunSummary
    toc_url: str
    links: list[LinkRecord]
    workbook_path: Path
    notes: list[str] = field(default_factory=list)
    guideline: str = DEFAULT_GUIDELINE

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


def scrape(settings: Settings, toc_url: str, *, urls_xlsx: Path | None = None,
           guideline: GuidelineScope | None = None) -> RunSummary:
    """Scrape the guideline whose table of contents is at `toc_url` into settings.db."""
    return scrape_site(settings, toc_url, urls_xlsx=urls_xlsx, guideline=guideline).summary


@dataclass
class SitePlan:
    """The table of contents, fetched and classified, hand edits applied: what to fetch."""

    toc: str  # the TOC as fetched (after redirects), normalised
    toc_title: str
    links: list[LinkRecord]
    targets: list[LinkRecord]
    rebase: "_Rebase"
    notes: list[str]


@dataclass
class FetchRound:
    """Every target fetched, and what was learnt by fetching: what a scrape would store."""

    fetched: list[FetchedPage]
    failed: dict[str, str]  # public URL -> reason
    gone: list[str]  # public URLs the server says no longer exist
    info: dict[str, workbook.FetchInfo]  # public URL -> the workbook's fetch columns
    links: list[LinkRecord]  # the plan's links with the verdicts learnt by fetching
    content_urls: list[str]  # public URLs of the guide's pages this round


def read_workbook_edits(settings: Settings, urls_xlsx: Path | None,
                        guideline: GuidelineScope) -> tuple[Path | None, Path, dict[str, workbook.Edit]]:
    """(workbook read, workbook to write, its hand edits by page key): `urls_xlsx`, else
    settings.urls_xlsx, else the guideline's own workbook."""
    workbook_in = Path(urls_xlsx) if urls_xlsx else settings.urls_xlsx
    out_path = Path(workbook_in) if workbook_in else guideline.workbook_path
    if out_path.suffix.lower() != ".xlsx":
        raise WorkbookError(f"the URL workbook must be an .xlsx file, not {out_path}")
    edits = workbook.read_edits(workbook_in) if workbook_in and Path(workbook_in).exists() else {}
    return workbook_in, out_path, edits


def scrape_site(settings: Settings, toc_url: str, *, guideline: GuidelineScope | None = None,
                urls_xlsx: Path | None = None, public_site: str | None = None, stderr: TextIO | None = None,
                title: str | None = None) -> ScrapeReport:
    """The whole scrape of one guideline (`guideline`, else the default one);
    `public_site` stores pages under another site URL (the sample's); `title` names the
    guideline (default: the title it has, else the TOC page's)."""
    err = stderr or sys.stderr
    scope = guideline or settings.guideline_scope(DEFAULT_GUIDELINE)
    gid = scope.id
    toc = check_toc_url(toc_url)
    workbook_in, out_path, edits = read_workbook_edits(settings, urls_xlsx, scope)
    notes: list[str] = []
    if edits:
        notes.append(f"hand edits read from {workbook_in} ({len(edits)} rows)")

    with scrape_lock(settings.store), fetch.Fetcher(settings, toc) as fetcher:
        dead = remove_dead_temporaries(out_path)  # left by a scrape killed before it installed its workbook
        if dead:
            notes.append(f"removed {len(dead)} temporary URL workbook(s) of scrapes that did not finish: "
                         f"{', '.join(dead)}")
        plan = plan_site(fetcher, toc, toc_url, edits, public_site)
        notes.extend(plan.notes)
        links, targets, rebase = plan.links, plan.targets, plan.rebase
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
        if over_page_cap(settings, plan):
            workbook.write(out_path, links, {}, public=rebase.public)
            raise InvalidURLError(
                f"{over_page_cap(settings, plan)}; nothing was fetched and the store was not changed. Review the "
                f"links in {out_path} (set include=FALSE for what is not the guide, then scrape with "
                f"--urls-xlsx {out_path}), or raise GUIDERAG_MAX_PAGES"
            )
        store = Store(settings.store)
        try:
            store.check_integrity()  # before fetching a whole site into a store that cannot take it
            aborted = store.abort_unfinished_runs(DEAD_RUN_MESSAGE)
            if aborted:
                notes.append(f"marked {len(aborted)} unfinished earlier run(s) aborted "
                             f"(run {', '.join(map(str, aborted))}): their process had died")
            _refuse_other_guidelines_pages(store, gid, plan)
            if title is None:
                known = store.get_guideline(gid)
                title = None if known is not None and known.title else plan.toc_title
            report = _run(settings, store, fetcher, plan, out_path, notes, err, gid, title)
        finally:
            store.close()
    if not workbook_in:
        report.notes.append(f"to review the links, edit include/category in {out_path} and scrape again "
                            f"with --urls-xlsx {out_path}")
    return report


def plan_site(fetcher: fetch.Fetcher, toc: str, toc_url: str, edits: dict[str, workbook.Edit],
              public_site: str | None) -> SitePlan:
    """Read robots.txt, fetch and classify the TOC, apply robots.txt and the hand edits.
    InvalidURLError when the TOC cannot be fetched or links nothing."""
    notes: list[str] = []
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
    links = apply_robots(links, fetcher.robots.allowed)
    links = workbook.apply_edits(links, edits, public=rebase.public, private=rebase.private, toc_url=toc)
    targets = [r for r in links if r.include and r.category != urls.DUPLICATE]
    toc_title = textlines.extract(toc_page.html)[0]
    return SitePlan(toc=toc, toc_title=toc_title, links=links, targets=targets, rebase=rebase, notes=notes)


def over_page_cap(settings: Settings, plan: SitePlan) -> str:
    """Why the plan lists more guide pages than one scrape (or check) may fetch
    (settings.max_pages, 0: no limit), or "" when it does not."""
    if 0 < settings.max_pages < len(plan.targets):
        return (f"the table-of-contents page {plan.toc} lists {len(plan.targets)} guide pages, more than the "
                f"{settings.max_pages} one scrape may fetch (GUIDERAG_MAX_PAGES)")
    return ""


def _refuse_other_guidelines_pages(store: Store, gid: str, plan: SitePlan) -> None:
    """InputError, before anything is fetched, when live pages of another guideline are
    among the targets: a page belongs to one guideline."""
    owners = store.owners(plan.rebase.public(r.url) for r in plan.targets)
    theirs = {url: owner for url, owner in owners.items() if owner != gid}
    if not theirs:
        return
    other = sorted(set(theirs.values()))
    example = next(iter(sorted(theirs)))
    raise InputError(
        f"{len(theirs)} of the pages this table of contents links are pages of guideline "
        f"{', '.join(repr(o) for o in other)} (e.g. {example}), and a page belongs to one guideline; "
        f"nothing was changed. Scrape it as that guideline (--guideline {other[0]}), or remove that "
        "guideline first (`guiderag guidelines --remove ID`)"
    )


def _fetch_toc(fetcher: fetch.Fetcher, toc: str) -> fetch.FetchResult:
    if not fetcher.robots.allowed(toc):
        raise InvalidURLError(f"robots.txt of {urls.site_of(toc)} disallows the table-of-contents page {toc} "
                              f"({fetcher.robots.note}); guiderag obeys robots.txt")
    result = fetcher.fetch(toc)
    if result.kind == fetch.NOT_HTML or result.pdf is not None:
        why = result.reason or "a PDF document; give the HTML page that links the guide's documents"
        raise InvalidURLError(f"the table-of-contents URL {toc} is not an HTML page ({why})")
    if not result.ok and (result.server_trouble or (result.status or 0) >= 500):
        raise ScrapeError(f"the site {urls.site_of(toc)} is unavailable: the table-of-contents page {toc} "
                          f"answered {result.reason}. Nothing was changed; scrape again when the site is back")
    if not result.ok:
        reason = result.reason or f"HTTP {result.status}"
        raise InvalidURLError(f"cannot fetch the table-of-contents page {toc}: {reason}. Check the URL "
                              "and that the site is up; nothing was changed")
    return result


def fetch_round(settings: Settings, store: Store, fetcher: fetch.Fetcher, plan: SitePlan,
                err: TextIO) -> FetchRound:
    """Fetch every target (conditional GET against the store), then settle the verdicts
    learnt by fetching (redirects, not HTML, gone, index pages, duplicate spellings).
    ScrapeError when the site stopped answering or every page failed."""
    rebase, targets = plan.rebase, plan.targets
    fetched: list[FetchedPage] = []
    failed: dict[str, str] = {}
    gone: list[str] = []
    info: dict[str, workbook.FetchInfo] = {}
    verdicts: dict[str, tuple[str, str]] = {}  # url -> (category, reason) learnt by fetching
    canonical: dict[str, str] = {}  # public url -> its rel=canonical, public
    trouble = 0
    keys = {urls.page_key(r.url) for r in targets}
    guide = _guide_page_test(plan.toc, keys)
    pdfs = PdfReader(settings)
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
            _record(result, rec, public, store, fetched, failed, gone, info, verdicts, canonical, settings, guide,
                    rebase, pdfs)
    if targets and not fetched and len(failed) == len(targets):
        raise ScrapeError(
            f"every one of the {len(targets)} pages failed (e.g. {next(iter(failed.items()))}); "
            "the previous corpus was kept"
        )
    fetched = _drop_duplicates(fetched, info, canonical, verdicts, rebase)
    final_links = [_with_fetch_verdict(r, verdicts) for r in plan.links]
    content_urls = [rebase.public(r.url) for r in final_links
                    if r.include and r.auto_category != urls.DUPLICATE and rebase.public(r.url) not in gone]
    return FetchRound(fetched=fetched, failed=failed, gone=gone, info=info, links=final_links,
                      content_urls=content_urls)


def _run(settings: Settings, store: Store, fetcher: fetch.Fetcher, plan: SitePlan, out_path: Path,
         notes: list[str], err: TextIO, gid: str, title: str | None) -> ScrapeReport:
    rebase = plan.rebase
    run_id = store.begin_run(rebase.public(plan.toc), guideline=gid)
    tmp: BesideFile | None = None
    try:
        done = fetch_round(settings, store, fetcher, plan, err)
        try:
            tmp = workbook.prepare(out_path, done.links, {rebase.private(k): v for k, v in done.info.items()},
                                   public=rebase.public)
        except OSError as exc:
            raise ScrapeError(f"could not write the URL workbook {out_path} ({exc}); the previous corpus "
                              "was kept. Free disk space or fix permissions, then scrape again") from exc
        summary = store.commit_run(run_id, done.fetched, content_urls=done.content_urls, failed=done.failed,
                                   gone=done.gone, title=title)
    except BaseException as exc:
        if tmp is not None:
            tmp.discard()
        if isinstance(exc, KeyboardInterrupt):
            _mark_failed(store, run_id, f"interrupted ({exc or 'Ctrl-C'}); the previous corpus was kept",
                         "aborted")
        elif _run_status(store, run_id) == "running":  # commit_run records its own failures
            _mark_failed(store, run_id, str(exc) if isinstance(exc, GuideragError)
                         else f"{exc.__class__.__name__}: {exc}", "failed")
        raise
    assert tmp is not None  # prepared before the commit
    try:
        tmp.install()  # the corpus is committed: only the workbook is at stake
    except OSError as exc:
        tmp.discard()
        raise ScrapeError(f"the scrape was stored (run {run_id}), but the URL workbook {out_path} could "
                          f"not be replaced ({exc}); scrape again to rewrite it") from exc
    notes.append(f"URL workbook written to {out_path}")
    return ScrapeReport(summary=summary, toc_url=rebase.public(plan.toc), links=done.links,
                        workbook_path=out_path, notes=notes, guideline=gid)


def _guide_page_test(toc: str, keys: set[str]) -> Callable[[str], bool]:
    """Is a URL a page of the guide: one of the TOC's targets, or classified as content."""
    return lambda url: urls.page_key(url) in keys or urls.classify(url, toc).is_content


def _drop_duplicates(fetched: list[FetchedPage], info: dict[str, workbook.FetchInfo], canonical: dict[str, str],
                     verdicts: dict[str, tuple[str, str]], rebase: "_Rebase") -> list[FetchedPage]:
    """The fetched pages less the spellings of a page already among them (postfetch)."""
    spellings = [postfetch.Spelling(p.url, info[p.url].content_hash if p.url in info else "", canonical.get(p.url))
                 for p in fetched]
    dup = postfetch.duplicates([s for s in spellings if s.content_hash or s.canonical])
    for url, (_, why) in dup.items():
        verdicts[rebase.private(url)] = (urls.DUPLICATE, why)
        info.pop(url, None)
    return [p for p in fetched if p.url not in dup]


def _redirected_to_listed(result: fetch.FetchResult, rec: LinkRecord, keys: set[str]) -> bool:
    """True when an in-site redirect lands on another page of the list (one entry per page)."""
    final = urls.page_key(result.final_url or rec.url)
    return final != urls.page_key(rec.url) and final in keys


def _mark_failed(store: Store, run_id: int, message: str, status: str) -> None:
    """Record why a run failed; a store too broken to say so must not hide the first error."""
    try:
        store.fail_run(run_id, message, status=status)
    except store.conn.errors:
        pass


def _run_status(store: Store, run_id: int) -> str | None:
    try:
        run = store.get_run(run_id)
    except store.conn.errors:
        return None
    return run["status"] if run else None


def _with_fetch_verdict(rec: LinkRecord, verdicts: dict[str, tuple[str, str]]) -> LinkRecord:
    if rec.category == urls.DUPLICATE or rec.url not in verdicts:
        return rec
    category, reason = verdicts[rec.url]
    include = rec.include and category not in (urls.NOT_HTML, urls.DUPLICATE, urls.INDEX, urls.PRINTABLE)
    out = rec.with_verdict(category, reason, include=include)
    if category in (urls.INDEX, urls.DUPLICATE, urls.PRINTABLE):
        # the classifier's own verdict, learnt by fetching: read back from the workbook, it
        # is not mistaken for a hand edit, and include=TRUE there overrides it
        out = replace(out, auto_category=category)
    return out


def _record(result: fetch.FetchResult, rec: LinkRecord, public: str, store: Store, fetched: list[FetchedPage],
            failed: dict[str, str], gone: list[str], info: dict[str, workbook.FetchInfo],
            verdicts: dict[str, tuple[str, str]], canonical: dict[str, str], settings: Settings,
            is_guide_page: Callable[[str], bool], rebase: "_Rebase", pdfs: PdfReader) -> None:
    """File one fetch result under fetched / failed / gone (or as an index page), and note
    it for the workbook."""
    url = result.url
    if result.kind == fetch.OK and result.pdf is not None:
        read = pdfs.read(result, rec, public)
        if read.refused:
            failed[public] = read.refused
            verdicts[url] = (urls.CONTENT, f"fetch failed: {read.refused}")
            info[public] = workbook.FetchInfo(http_status=result.status, fetched_at=result.fetched_at)
            return
        assert read.page is not None
        chash = content_hash(read.page.title, read.page.lines, read.page.pdf)
        removed = read.page.pdf.removed if read.page.pdf is not None else ()
        info[public] = workbook.FetchInfo(result.status, read.page.title, result.fetched_at, chash, removed)
        if read.printable and not rec.hand:
            verdicts[url] = (urls.PRINTABLE, read.printable)
            return
        fetched.append(read.page)
        return
    if result.kind == fetch.OK:
        text = textlines.read_page(result.html)
        title, lines = text.title, text.lines
        page_url = result.final_url or url
        why_index = None if rec.hand else postfetch.index_reason(text.profile, page_url, is_guide_page)
        if why_index is not None:
            verdicts[url] = (urls.INDEX, why_index)
            info[public] = workbook.FetchInfo(result.status, title, result.fetched_at, content_hash(title, lines))
            return
        if text.canonical:
            try:
                target = urls.normalize_url(text.canonical, page_url)
            except ValueError:
                target = ""
            if target and urls.is_web_url(target) and urls.is_same_site(target, page_url):
                canonical[public] = rebase.public(target)
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
                                          result.fetched_at, stored.content_hash if stored else "",
                                          stored.pdf.removed if stored and stored.pdf else ())
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
