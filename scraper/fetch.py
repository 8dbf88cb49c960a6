"""Fetch pages politely and robustly.

One `requests.Session` with a clear User-Agent; a timeout per socket read and a deadline
for a whole response, from connecting to its last byte, status line and headers included
(`Deadline`: a server trickling bytes, even inside its headers, cannot hold a scrape); retries with
exponential backoff on 5xx, 429 and connection errors, waiting as long as a Retry-After
asks (up to a cap: beyond it the site is left alone); a delay between requests
(robots.txt Crawl-delay when longer); robots.txt obeyed (missing = allow all, 401/403 =
disallow all, 5xx or 429 = the site is unavailable, nothing is fetched, as RFC 9309 says);
a size limit enforced while streaming; redirects followed by hand, within the site only;
conditional GET; non-HTML refused by Content-Type before the body is read, except a PDF
(application/pdf, or a generic binary type or none whose body starts with %PDF-), whose
bytes come back as they are (`FetchResult.pdf`, read by scraper.pdf) within
settings.pdf_max_bytes; charset decoded by scraper.charset, never requests' guess, and
text that is not plausibly text (binary bytes sent as text/html) refused.
"""
from __future__ import annotations

import re
import time
import urllib.robotparser
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Mapping, TypedDict
from urllib.parse import urljoin

import requests
import urllib3.exceptions

from guiderag.settings import Settings
from guiderag.clock import utc_now

from . import charset, urls
from .deadline import Deadline, DeadlineAdapter

# Outcome kinds.
OK = "ok"
NOT_MODIFIED = "not_modified"
GONE = "gone"  # 404 / 410: the page no longer exists
NOT_HTML = "not_html"
FAILED = "failed"

HTML_MEDIA_TYPES = frozenset({"text/html", "application/xhtml+xml"})
PDF_MEDIA_TYPES = frozenset({"application/pdf", "application/x-pdf", "application/acrobat"})
# Types servers send for any file: a PDF among them is told by its signature.
GENERIC_MEDIA_TYPES = frozenset({"application/octet-stream", "binary/octet-stream", "application/download",
                                 "application/x-download", "application/force-download"})
PDF_SIGNATURE = b"%PDF-"
GONE_STATUSES = frozenset({404, 410})
RETRY_STATUSES = frozenset({429})  # besides every 5xx
# Answers that say the site (not one page) is unavailable: with connection errors, they
# count towards settings.abort_after_failures. A 500 is one broken page.
DOWN_STATUSES = frozenset({429, 502, 503, 504})
# Answers whose Retry-After header says how long to wait before asking again.
RETRY_AFTER_STATUSES = frozenset({429, 503})
# robots.txt answering these means the site is unavailable (RFC 9309 2.3.1.4; 429 as Google does).
ROBOTS_UNAVAILABLE = frozenset({429})  # besides every 5xx
ACCEPT = "text/html,application/xhtml+xml;q=0.9,application/pdf;q=0.8,*/*;q=0.1"
CHUNK_BYTES = 65536
# A header's number: ASCII digits only (str.isdigit also says yes to "²", which int() refuses).
DIGITS = re.compile(r"[0-9]+")
# Redirects followed per page (within the site only; an off-site one is a failure): a
# guideline page is reached in one or two; a longer chain is a loop or a misconfigured
# site, not something to tune (requests follows 30; never set, not by a test).
MAX_REDIRECTS = 5


class _Common(TypedDict):
    """What every answer of one response shares, whatever its kind."""

    final_url: str
    status: int
    etag: str | None
    last_modified: str | None
    fetched_at: str


@dataclass(frozen=True)
class FetchResult:
    """What one fetch gave: a decoded HTML page, or why not."""

    url: str  # as requested
    kind: str
    final_url: str = ""
    status: int | None = None
    html: str = ""
    codec: str = ""
    content_type: str = ""
    etag: str | None = None
    last_modified: str | None = None
    reason: str = ""
    # True for connection errors and 502/503/504 after all retries: the mark of a site going down.
    server_trouble: bool = False
    fetched_at: str = ""
    # The site asked (Retry-After) to be left alone longer than settings.retry_after_max_s:
    # no further request of this scrape should be sent.
    stay_away: bool = False
    pdf: bytes | None = None  # a PDF document: its bytes (html is then "")

    @property
    def ok(self) -> bool:
        return self.kind == OK


class Robots:
    """robots.txt of one site, read once."""

    def __init__(self, parser: urllib.robotparser.RobotFileParser | None, user_agent: str, note: str,
                 *, disallow_all: bool = False, unreachable: bool = False, unavailable: bool = False,
                 stay_away: bool = False) -> None:
        self.parser = parser
        self.user_agent = user_agent
        self.note = note
        self.disallow_all = disallow_all
        self.unreachable = unreachable  # the site did not answer at all
        self.unavailable = unavailable  # it answered 5xx / 429: down or overloaded, not a ban
        self.stay_away = stay_away  # it asked (Retry-After) to be left alone beyond the cap

    def allowed(self, url: str) -> bool:
        if self.disallow_all:
            return False
        return True if self.parser is None else self.parser.can_fetch(self.user_agent, url)

    def crawl_delay(self) -> float:
        if self.parser is None:
            return 0.0
        delay = self.parser.crawl_delay(self.user_agent)
        return float(delay) if delay else 0.0


class Fetcher:
    """Fetches pages of one site. Use as a context manager."""

    def __init__(self, settings: Settings, site_url: str, *, session: requests.Session | None = None) -> None:
        self.settings = settings
        self.site = urls.site_of(urls.normalize_url(site_url))
        self.session = session or requests.Session()
        for prefix in ("http://", "https://"):
            self.session.mount(prefix, DeadlineAdapter())
        self.session.headers.update({"User-Agent": settings.user_agent, "Accept": ACCEPT})
        self.robots = Robots(None, settings.user_agent, "robots.txt not read yet")
        self._last_request = 0.0

    def __enter__(self) -> "Fetcher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.session.close()

    # -- robots.txt -----------------------------------------------------------------
    def move_to(self, url: str) -> None:
        """The site answered from another origin (e.g. an https upgrade): read its robots.txt."""
        site = urls.site_of(urls.normalize_url(url))
        if site != self.site:
            self.site = site
            self.load_robots()

    def load_robots(self) -> Robots:
        """Read the site's robots.txt; a missing one allows everything."""
        url = self.site + "/robots.txt"
        result = self._get(url, {}, check_robots=False, want_html=False)
        ua = self.settings.user_agent
        if result.kind == OK:
            parser = urllib.robotparser.RobotFileParser(url)
            parser.parse(result.html.splitlines())
            self.robots = Robots(parser, ua, f"robots.txt read from {url}")
        elif result.status in (401, 403):
            self.robots = Robots(None, ua, f"robots.txt answered HTTP {result.status}: nothing allowed",
                                 disallow_all=True)
        elif result.status is not None and (result.status >= 500 or result.status in ROBOTS_UNAVAILABLE):
            self.robots = Robots(None, ua, f"{url} answered {result.reason}: the site is unavailable, "
                                 "nothing may be fetched until it recovers (RFC 9309)", disallow_all=True,
                                 unavailable=True, stay_away=result.stay_away)
        elif result.status is None and result.server_trouble:
            self.robots = Robots(None, ua, f"cannot reach {self.site}: {result.reason}", unreachable=True)
        else:
            why = f"HTTP {result.status}" if result.status else result.reason
            self.robots = Robots(None, ua, f"no robots.txt at {url} ({why}): all allowed")
        return self.robots

    # -- pages ----------------------------------------------------------------------
    def fetch(self, url: str, headers: Mapping[str, str] | None = None) -> FetchResult:
        """GET one HTML page (conditional when `headers` carry validators)."""
        return self._get(url, dict(headers or {}), check_robots=True, want_html=True)

    def _get(self, url: str, headers: dict[str, str], *, check_robots: bool, want_html: bool) -> FetchResult:
        current = url
        for _hop in range(MAX_REDIRECTS + 1):
            if not urls.is_same_site(current, self.site):
                what = f"redirected off-site to {current}" if _hop else f"off-site URL {current}"
                return FetchResult(url, FAILED, final_url=current, reason=f"{what} (not followed)")
            if check_robots and not self.robots.allowed(current):
                return FetchResult(url, FAILED, final_url=current, reason=f"disallowed by robots.txt: {current}")
            result, location = self._request(url, current, headers, want_html)
            if location is None:
                return result
            try:
                current = urls.normalize_url(urljoin(current, location))
            except ValueError:
                return FetchResult(url, FAILED, final_url=current, reason=f"malformed redirect to {location!r}")
            headers = {}  # validators belong to the first URL only
        return FetchResult(url, FAILED, final_url=current,
                           reason=f"more than {MAX_REDIRECTS} redirects")

    def _pause(self) -> None:
        """Wait until `delay` has passed since the previous response ended."""
        delay = max(self.settings.delay_s, self.robots.crawl_delay())
        wait = self._last_request + delay - time.monotonic()
        if self._last_request and wait > 0:
            time.sleep(wait)

    def _request(self, url: str, current: str, headers: dict[str, str], want_html: bool) -> tuple[FetchResult, str | None]:
        """One GET with retries: (result, redirect location or None)."""
        s = self.settings
        attempts = s.retries + 1
        last_reason = ""
        last_status: int | None = None
        wait = 0.0  # before the next attempt: the backoff, or what Retry-After asked
        for attempt in range(attempts):
            if attempt:
                time.sleep(max(wait, s.backoff_s * (2 ** (attempt - 1))))
            wait = 0.0
            self._pause()
            with Deadline(s.fetch_deadline_s) as deadline:
                outcome = self._attempt(url, current, headers, want_html, deadline)
            if isinstance(outcome, tuple):
                return outcome
            last_reason, last_status, wait, retry = outcome.reason, outcome.status, outcome.wait, outcome.retry
            if not retry:
                return FetchResult(url, FAILED, final_url=current, status=last_status,
                                   reason=last_reason), None
        tries = f"after {attempts} attempt{'s' if attempts > 1 else ''}"
        return FetchResult(url, FAILED, final_url=current, status=last_status,
                           reason=f"{last_reason} {tries}",
                           server_trouble=last_status is None or last_status in DOWN_STATUSES), None

    def _attempt(self, url: str, current: str, headers: dict[str, str], want_html: bool,
                 deadline: Deadline) -> "tuple[FetchResult, str | None] | _Retry":
        """One GET within `deadline`: the result, or why (and whether) to try again."""
        s = self.settings
        started = time.monotonic()
        try:
            resp = self.session.get(current, headers=headers, timeout=s.timeout_s,
                                    allow_redirects=False, stream=True)
        except requests.RequestException as exc:
            if deadline.expired:
                return self._too_slow(url, current, "its status line and headers had not all arrived")
            if isinstance(exc, requests.Timeout):
                return _Retry(f"timed out after {s.timeout_s:g}s")
            if isinstance(exc, requests.ConnectionError):
                return _Retry(f"connection failed: {_short(exc)}")
            return _Retry(f"request failed ({_short(exc)})", retry=False)
        finally:
            self._last_request = time.monotonic()
        if deadline.expired:  # the headers "ended" because the deadline shut the socket
            resp.close()
            return self._too_slow(url, current, "its status line and headers had not all arrived")
        with resp:
            status = resp.status_code
            if status >= 500 or status in RETRY_STATUSES:
                reason = f"HTTP {status} {resp.reason or ''}".strip()
                asked = retry_after(resp.headers.get("Retry-After")) if status in RETRY_AFTER_STATUSES else None
                if asked is not None and asked > s.retry_after_max_s:
                    return FetchResult(
                        url, FAILED, final_url=current, status=status, server_trouble=True, stay_away=True,
                        reason=f"{reason}, asking to wait {asked:.0f} s before the next request "
                               f"(Retry-After), longer than the cap of {s.retry_after_max_s:g} s "
                               "(GUIDERAG_RETRY_AFTER_MAX_S)"), None
                return _Retry(reason, status, asked or 0.0)
            try:
                return self._read(url, current, resp, want_html, started + s.fetch_deadline_s, deadline)
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
                    urllib3.exceptions.ProtocolError, urllib3.exceptions.ReadTimeoutError, OSError) as exc:
                if deadline.expired:
                    return self._too_slow(url, current, "its body had not all arrived", status=status)
                return _Retry(f"connection lost while reading ({_short(exc)})")
            except urllib3.exceptions.DecodeError as exc:
                return FetchResult(url, FAILED, final_url=current, status=status,
                                   reason=f"the body could not be decompressed ({_short(exc)})"), None
            finally:
                self._last_request = time.monotonic()  # the response has ended

    def _too_slow(self, url: str, current: str, what: str, *, status: int | None = None,
                  received: int | None = None) -> tuple[FetchResult, None]:
        """The page failed: its response took longer than settings.fetch_deadline_s (not retried)."""
        got = f"{received} bytes received" if received is not None else what
        return FetchResult(url, FAILED, final_url=current, status=status, server_trouble=True, reason=(
            f"the response took longer than the deadline of {self.settings.fetch_deadline_s:g} s "
            f"({got}; GUIDERAG_FETCH_DEADLINE_S)")), None

    def _read(self, url: str, current: str, resp: requests.Response, want_html: bool,
              deadline_at: float, deadline: Deadline) -> tuple[FetchResult, str | None]:
        status = resp.status_code
        now = utc_now()
        if status in (301, 302, 303, 307, 308):
            location = resp.headers.get("Location")
            if not location:
                return FetchResult(url, FAILED, final_url=current, status=status,
                                   reason=f"HTTP {status} redirect without a Location"), None
            return FetchResult(url, FAILED, final_url=current, status=status), location
        common = _Common(final_url=current, status=status, etag=resp.headers.get("ETag"),
                         last_modified=resp.headers.get("Last-Modified"), fetched_at=now)
        if status == 304:
            return FetchResult(url, NOT_MODIFIED, reason="not modified (HTTP 304)", **common), None
        if status in GONE_STATUSES:
            return FetchResult(url, GONE, reason=f"HTTP {status}: the page no longer exists", **common), None
        if status != 200:
            return FetchResult(url, FAILED, reason=f"HTTP {status} {resp.reason or ''}".strip(), **common), None
        content_type = resp.headers.get("Content-Type", "")
        media = content_type.split(";", 1)[0].strip().lower()
        maybe_pdf = want_html and (media in PDF_MEDIA_TYPES or media in GENERIC_MEDIA_TYPES or not media)
        if want_html and media and media not in HTML_MEDIA_TYPES and not maybe_pdf:
            return FetchResult(url, NOT_HTML, content_type=content_type,
                               reason=f"not HTML (Content-Type {media})", **common), None
        # A PDF may be larger than a page; without a telling type the body says which it is.
        limit = max(self.settings.max_page_bytes, self.settings.pdf_max_bytes) if maybe_pdf \
            else self.settings.max_page_bytes
        declared = resp.headers.get("Content-Length", "")
        if DIGITS.fullmatch(declared) and int(declared) > limit:
            return FetchResult(url, FAILED, reason=f"larger than the size limit ({declared} > {limit} bytes)",
                               **common), None
        body = bytearray()
        while True:
            if time.monotonic() > deadline_at or deadline.expired:
                return self._too_slow(url, current, "", status=status, received=len(body))
            # read1: whatever has arrived (at most one socket read), so that the deadline is
            # checked however slowly the bytes come; decoded (gzip) in bounded pieces.
            chunk = resp.raw.read1(CHUNK_BYTES, decode_content=True)
            if not chunk:
                if deadline.expired:  # the end of the bytes was the deadline shutting the socket
                    return self._too_slow(url, current, "", status=status, received=len(body))
                break
            body.extend(chunk)
            if len(body) > limit:
                return FetchResult(url, FAILED, reason=f"larger than the size limit ({limit} bytes)",
                                   **common), None
        data = bytes(body)
        if maybe_pdf and PDF_SIGNATURE in data[:1024]:
            return FetchResult(url, OK, content_type=content_type, pdf=data, **common), None
        if maybe_pdf and media in PDF_MEDIA_TYPES:
            return FetchResult(url, FAILED, content_type=content_type, **common,
                               reason=f"sent as {media} but not a PDF (no %PDF- signature)"), None
        if maybe_pdf and media:
            return FetchResult(url, NOT_HTML, content_type=content_type,
                               reason=f"not HTML (Content-Type {media}, and not a PDF)", **common), None
        if len(data) > self.settings.max_page_bytes:
            return FetchResult(url, FAILED, reason=f"larger than the size limit ({self.settings.max_page_bytes} "
                                                   "bytes)", **common), None
        if want_html and not media and not _looks_like_html(data):
            return FetchResult(url, NOT_HTML, reason="not HTML (no Content-Type, and the body is not HTML)",
                               **common), None
        text, codec = charset.decode_html(data, content_type)
        if want_html:
            why = charset.implausible_text(text)
            if why:
                return FetchResult(url, FAILED, codec=codec, content_type=content_type, **common,
                                   reason=f"not text: {why} (binary data sent as {media or 'HTML'}?)"), None
        return FetchResult(url, OK, html=text, codec=codec, content_type=content_type, **common), None


@dataclass(frozen=True)
class _Retry:
    """An attempt that failed in a way worth trying again (unless `retry` is False)."""

    reason: str
    status: int | None = None
    wait: float = 0.0  # what Retry-After asked
    retry: bool = True


def retry_after(value: str | None) -> float | None:
    """Seconds a Retry-After header asks to wait (delta-seconds or an HTTP date), or None."""
    value = (value or "").strip()
    if not value:
        return None
    if DIGITS.fullmatch(value):
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _looks_like_html(data: bytes) -> bool:
    head = data[:1024].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html", b"<?xml", b"<head", b"<body", b"<!--", b"<meta", b"<"))


CONNECTION_TROUBLE = (
    ("refused", "connection refused"),
    ("name or service not known", "host name not found"),
    ("nodename nor servname", "host name not found"),
    ("temporary failure in name resolution", "host name not found"),
    ("remotedisconnected", "the server closed the connection without answering"),
    ("connection aborted", "the server closed the connection without answering"),
    ("reset by peer", "the connection was reset"),
    ("timed out", "timed out"),
)


def _short(exc: BaseException) -> str:
    """A one-line reason a maintainer can read (requests' messages nest three deep)."""
    text = str(exc)
    low = text.lower()
    for needle, reason in CONNECTION_TROUBLE:
        if needle in low:
            return reason
    return (exc.__class__.__name__ + (": " + text if text else ""))[:160]
