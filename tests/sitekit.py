"""Fixture web sites served over real HTTP on 127.0.0.1, for scraper tests (reusable).

    site = Site()
    site.page("/guide/index.html", toc_html(...))
    site.page("/guide/q1.html", html_page("Q1", "<p>...</p>"), encoding="shift_jis")
    with site.serve() as base:          # "http://127.0.0.1:PORT"
        scrape(ScraperConfig(delay_s=0), StoreConfig(db=path), base + "/guide/index.html")

A page may be given for one query string too (`site.page("/q.html?print=1", ...)`); other
queries get the page of the path. Like `http.server`, pages go out as `text/html` with no charset unless asked, the trap a
real scraper must survive. A site can answer 404/500, redirect, send ETags and answer 304,
fail its first N requests for a path (with headers such as Retry-After), trickle a body one
byte at a time, answer every request with one status (an outage), or go down (drop
connections) after N requests. `times` holds when each path was requested (monotonic).
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Iterator
from urllib.parse import urlsplit

from guiderag.scraper.sample import serve_on_loopback


@dataclass
class Route:
    body: bytes = b""
    status: int = 200
    content_type: str = "text/html"
    headers: dict[str, str] = field(default_factory=dict)
    etag: bool = False  # send an ETag and answer If-None-Match with 304
    fail_first: int = 0  # answer fail_status to the first N requests
    fail_status: int = 500
    fail_headers: dict[str, str] = field(default_factory=dict)  # sent with those answers
    trickle_s: float = 0.0  # > 0: send the headers, then the body one byte every trickle_s


def html_page(title: str, body: str, *, head: str = "", lang: str = "ja", charset: str | None = None) -> str:
    """A whole HTML document; `charset` adds a <meta charset>."""
    meta = f'<meta charset="{charset}">' if charset else ""
    return (f'<!DOCTYPE html><html lang="{lang}"><head>{meta}<title>{title}</title>{head}</head>'
            f"<body>{body}</body></html>")


def toc_html(links: list[tuple[str, str]], *, title: str = "目次") -> str:
    """A table-of-contents page linking (href, text) pairs."""
    items = "".join(f'<li><a href="{href}">{text}</a></li>' for href, text in links)
    return html_page(title, f"<main><h1>{title}</h1><ul>{items}</ul></main>")


class Site:
    """An in-memory web site; every request is counted in `hits` (by path)."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.hits: Counter[str] = Counter()
        self.not_modified: Counter[str] = Counter()
        self.request_headers: dict[str, dict[str, str]] = {}  # path -> headers of its last request
        self.requests = 0
        self.down_after_requests: int | None = None
        self.outage_status: int | None = None  # every request answered with this status
        self.times: dict[str, list[float]] = {}
        self.lock = threading.Lock()

    # -- building ---------------------------------------------------------------------
    def page(self, path: str, html: str, *, encoding: str = "utf-8", content_type: str = "text/html",
             status: int = 200, etag: bool = False, headers: dict[str, str] | None = None) -> Route:
        route = Route(html.encode(encoding), status, content_type, dict(headers or {}), etag)
        self.routes[path] = route
        return route

    def raw(self, path: str, body: bytes, content_type: str, *, status: int = 200) -> Route:
        route = Route(body, status, content_type)
        self.routes[path] = route
        return route

    def redirect(self, path: str, location: str, *, status: int = 302) -> Route:
        route = Route(b"", status, "text/html", {"Location": location})
        self.routes[path] = route
        return route

    def status(self, path: str, status: int) -> Route:
        route = Route(f"<html><body><h1>HTTP {status}</h1></body></html>".encode(), status)
        self.routes[path] = route
        return route

    def remove(self, path: str) -> None:
        self.routes.pop(path, None)

    def go_down_after(self, requests: int | None) -> None:
        """From request number `requests` + 1 on, drop every connection without an answer."""
        self.down_after_requests = None if requests is None else self.requests + requests

    # -- serving ----------------------------------------------------------------------
    @contextmanager
    def serve(self) -> Iterator[str]:
        """Serve the site on a free loopback port; yields "http://127.0.0.1:PORT"."""
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (stdlib name)
                parts = urlsplit(self.path)
                path = parts.path
                with site.lock:
                    site.requests += 1
                    site.hits[path] += 1
                    site.request_headers[path] = dict(self.headers.items())
                    site.times.setdefault(path, []).append(time.monotonic())
                    down = site.down_after_requests is not None and site.requests > site.down_after_requests
                    count = site.hits[path]
                if down:
                    self.close_connection = True
                    self.connection.close()  # no status line at all: a connection error
                    return
                if site.outage_status is not None:
                    self._send(site.outage_status, b"<html><body>unavailable</body></html>", "text/html", {})
                    return
                # a route for the path with its query ("/q.html?print=1") first, then the path's
                route = site.routes.get(f"{path}?{parts.query}") if parts.query else None
                route = route or site.routes.get(path)
                if route is None:
                    self._send(404, b"<html><body><h1>Not Found</h1></body></html>", "text/html", {})
                    return
                if count <= route.fail_first:
                    self._send(route.fail_status, b"<html><body>server error</body></html>", "text/html",
                               route.fail_headers)
                    return
                if route.trickle_s > 0:
                    self._trickle(route)
                    return
                headers = dict(route.headers)
                if route.etag:
                    tag = '"' + hashlib.sha1(route.body).hexdigest()[:16] + '"'
                    headers["ETag"] = tag
                    if self.headers.get("If-None-Match") == tag:
                        with site.lock:
                            site.not_modified[path] += 1
                        self._send(304, b"", None, headers)
                        return
                self._send(route.status, route.body, route.content_type, headers)

            def _trickle(self, route: Route) -> None:
                self.send_response(200)
                self.send_header("Content-Type", route.content_type)
                self.send_header("Content-Length", str(len(route.body)))
                self.end_headers()
                try:
                    for i in range(len(route.body)):
                        self.wfile.write(route.body[i:i + 1])
                        self.wfile.flush()
                        time.sleep(route.trickle_s)
                except OSError:
                    pass  # the client gave up: what a deadline is for

            def _send(self, status: int, body: bytes, content_type: str | None, headers: dict[str, str]) -> None:
                self.send_response(status)
                if content_type and status != 304:
                    self.send_header("Content-Type", content_type)
                for key, value in headers.items():
                    self.send_header(key, value)
                if status != 304:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if status != 304:
                    self.wfile.write(body)

        with serve_on_loopback(Handler, "fixture-site") as base:
            yield base
