"""Fetch pages politely and robustly.

One `requests.Session` with a clear User-Agent; a timeout; retries with exponential
backoff on 5xx, 429 and connection errors; a delay between requests (robots.txt
Crawl-delay when longer); robots.txt obeyed (missing = allow all, 401/403 = disallow all,
5xx = disallow all as RFC 9309 says); a size limit enforced while streaming; redirects
followed by hand, within the site only; conditional GET; non-HTML refused by Content-Type
before the body is read; charset decoded by scraper.charset, never requests' guess.
"""
from __future__ import annotations

import time
import urllib.robotparser
from dataclasses import dataclass
from typing import Mapping, TypedDict
from urllib.parse import urljoin

import requests

from guiderag.settings import Settings
from guiderag.clock import utc_now

from . import charset, urls

# Outcome kinds.
OK = "ok"
NOT_MODIFIED = "not_modified"
GONE = "gone"  # 404 / 410: the page no longer exists
NOT_HTML = "not_html"
FAILED = "failed"

HTML_MEDIA_TYPES = frozenset({"text/html", "application/xhtml+xml"})
GONE_STATUSES = frozenset({404, 410})
RETRY_STATUSES = frozenset({429})  # besides every 5xx
# Answers that say the site (not one page) is unavailable: with connection errors, they
# count towards settings.abort_after_failures. A 500 is one broken page.
DOWN_STATUSES = frozenset({429, 502, 503, 504})
ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"
CHUNK_BYTES = 65536


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

    @property
    def ok(self) -> bool:
        return self.kind == OK


class Robots:
    """robots.txt of one site, read once."""

    def __init__(self, parser: urllib.robotparser.RobotFileParser | None, user_agent: str, note: str,
                 *, disallow_all: bool = False, unreachable: bool = False) -> None:
        self.parser = parser
        self.user_agent = user_agent
        self.note = note
        self.disallow_all = disallow_all
        self.unreachable = unreachable  # the site did not answer at all

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
        elif result.status is not None and result.status >= 500:
            self.robots = Robots(None, ua, f"robots.txt answered HTTP {result.status}: nothing allowed "
                                 "until the server recovers (RFC 9309)", disallow_all=True)
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
        for _hop in range(self.settings.max_redirects + 1):
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
                           reason=f"more than {self.settings.max_redirects} redirects")

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
        for attempt in range(attempts):
            if attempt:
                time.sleep(s.backoff_s * (2 ** (attempt - 1)))
            self._pause()
            try:
                resp = self.session.get(current, headers=headers, timeout=s.timeout_s,
                                        allow_redirects=False, stream=True)
            except requests.Timeout:
                last_reason, last_status = f"timed out after {s.timeout_s:g}s", None
                continue
            except requests.ConnectionError as exc:
                last_reason, last_status = f"connection failed: {_short(exc)}", None
                continue
            except requests.RequestException as exc:
                return FetchResult(url, FAILED, final_url=current, reason=f"request failed ({_short(exc)})"), None
            finally:
                self._last_request = time.monotonic()
            with resp:
                status = resp.status_code
                if status >= 500 or status in RETRY_STATUSES:
                    last_reason, last_status = f"HTTP {status} {resp.reason or ''}".strip(), status
                    continue
                try:
                    return self._read(url, current, resp, want_html)
                except (requests.ConnectionError, requests.Timeout,
                        requests.exceptions.ChunkedEncodingError) as exc:
                    last_reason, last_status = f"connection lost while reading ({_short(exc)})", None
                    continue
                finally:
                    self._last_request = time.monotonic()  # the response has ended
        tries = f"after {attempts} attempt{'s' if attempts > 1 else ''}"
        return FetchResult(url, FAILED, final_url=current, status=last_status,
                           reason=f"{last_reason} {tries}",
                           server_trouble=last_status is None or last_status in DOWN_STATUSES), None

    def _read(self, url: str, current: str, resp: requests.Response, want_html: bool) -> tuple[FetchResult, str | None]:
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
        if want_html and media and media not in HTML_MEDIA_TYPES:
            return FetchResult(url, NOT_HTML, content_type=content_type,
                               reason=f"not HTML (Content-Type {media})", **common), None
        limit = self.settings.max_page_bytes
        declared = resp.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > limit:
            return FetchResult(url, FAILED, reason=f"larger than the size limit ({declared} > {limit} bytes)",
                               **common), None
        body = bytearray()
        for chunk in resp.iter_content(CHUNK_BYTES):
            body.extend(chunk)
            if len(body) > limit:
                return FetchResult(url, FAILED, reason=f"larger than the size limit ({limit} bytes)",
                                   **common), None
        data = bytes(body)
        if want_html and not media and not _looks_like_html(data):
            return FetchResult(url, NOT_HTML, reason="not HTML (no Content-Type, and the body is not HTML)",
                               **common), None
        text, codec = charset.decode_html(data, content_type)
        return FetchResult(url, OK, html=text, codec=codec, content_type=content_type, **common), None


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
