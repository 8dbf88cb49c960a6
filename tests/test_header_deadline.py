"""A server that trickles its status line and headers cannot hold `scrape` or `check`: the
fetch deadline runs from connecting to the last byte, headers included.

The hostile server here answers `HTTP/1.0 200 OK\\r\\nX-Slow: ` and then one byte every
TRICKLE_S for as long as the client listens: every socket read returns within the read
timeout, so only a deadline on the whole response ends it (issue #24: 300 s of scrape,
the body deadline never started).
"""
from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest

from guiderag.cli import main
from guiderag.scraper import fetch
from sitekit import html_page, toc_html

pytestmark = pytest.mark.slow  # each test waits out a fetch deadline

TRICKLE_S = 0.3
DEADLINE_S = 2.0
TOC = "/guide/index.html"
PAGES = {
    TOC: toc_html([("q1.html", "Q1"), ("q2.html", "Q2")]),
    "/guide/q1.html": html_page("Q1 治療", "<main><h1>Q1 治療</h1><p>治療は手術が中心です。</p></main>"),
    "/guide/q2.html": html_page("Q2 検査", "<main><h1>Q2 検査</h1><p>検査にはCTを使います。</p></main>"),
}


@contextlib.contextmanager
def hostile_site(trickled: set[str]) -> Iterator[tuple[str, dict[str, int]]]:
    """A loopback site serving PAGES, whose paths in `trickled` send their headers a byte at
    a time for ever; yields (base URL, hits by path)."""
    hits: dict[str, int] = {}
    stop = threading.Event()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = self.request.recv(4096)
                if not chunk:
                    return
                data += chunk
            path = data.split(b" ", 2)[1].decode()
            hits[path] = hits.get(path, 0) + 1
            try:
                if path in trickled:
                    self.request.sendall(b"HTTP/1.0 200 OK\r\nX-Slow: ")
                    while not stop.is_set():
                        self.request.sendall(b"a")
                        time.sleep(TRICKLE_S)
                    return
                body = PAGES.get(path, "").encode()
                status = b"200 OK" if path in PAGES else b"404 Not Found"
                self.request.sendall(b"HTTP/1.0 " + status + b"\r\nContent-Type: text/html; charset=utf-8\r\n"
                                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            except OSError:
                return  # the client gave up: what the deadline is for

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def deadline_env(fast_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GUIDERAG_FETCH_DEADLINE_S", str(DEADLINE_S))
    monkeypatch.setenv("GUIDERAG_TIMEOUT_S", "5")  # every trickled byte comes well within it
    return fast_env


def test_a_fetch_whose_headers_trickle_fails_at_the_deadline(fast_scraper) -> None:
    config = replace(fast_scraper, fetch_deadline_s=DEADLINE_S, timeout_s=5.0)
    with hostile_site({"/slow.html"}) as (base, hits), fetch.Fetcher(config, base) as fetcher:
        started = time.monotonic()
        result = fetcher.fetch(base + "/slow.html")
        elapsed = time.monotonic() - started
        quick = fetcher.fetch(base + "/guide/q1.html")  # the same fetcher goes on working
    assert result.kind == fetch.FAILED and result.server_trouble
    assert f"the response took longer than the deadline of {DEADLINE_S:g} s" in result.reason
    assert "headers had not all arrived" in result.reason
    assert DEADLINE_S <= elapsed < DEADLINE_S + 1.5, elapsed
    assert hits["/slow.html"] == 1  # a deadline is not retried
    assert quick.ok and "治療は手術が中心です。" in quick.html


def _timed(argv: list[str]) -> tuple[int, float]:
    """(exit code, seconds) of one command."""
    started = time.monotonic()
    code = main(argv)
    return code, time.monotonic() - started


def test_scrape_of_a_toc_whose_headers_trickle_ends_within_the_deadline(deadline_env: Path, capsys) -> None:
    with hostile_site({TOC}) as (base, hits):
        code, elapsed = _timed(["scrape", base + TOC])
    err = capsys.readouterr().err
    assert code == 1 and elapsed < DEADLINE_S + 3, (code, elapsed, err)
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert f"deadline of {DEADLINE_S:g} s" in err and "nothing was changed" in err.lower()
    assert hits[TOC] == 1
    assert not deadline_env.exists()  # nothing was stored


def test_a_page_whose_headers_trickle_fails_and_the_scrape_goes_on(deadline_env: Path, capsys) -> None:
    with hostile_site({"/guide/q1.html"}) as (base, hits):
        code, elapsed = _timed(["scrape", base + TOC, "--no-index"])
    captured = capsys.readouterr()
    assert code == 0 and elapsed < DEADLINE_S + 4, (code, elapsed, captured.err)
    assert "added 1" in captured.out and "failed 1" in captured.out
    assert f"failed: {base}/guide/q1.html: the response took longer than the deadline of {DEADLINE_S:g} s" \
        in captured.err
    assert hits["/guide/q1.html"] == 1


def test_check_against_headers_that_trickle_ends_within_the_deadline(deadline_env: Path, capsys) -> None:
    with hostile_site(set()) as (base, _):
        assert main(["scrape", base + TOC, "--no-index"]) == 0
    capsys.readouterr()
    with hostile_site({"/guide/q2.html"}) as (again, hits):
        code, elapsed = _timed(["check", again + TOC, "--json"])
    captured = capsys.readouterr()
    assert code == 3 and elapsed < DEADLINE_S + 4, (code, elapsed, captured.err)
    assert hits["/guide/q2.html"] == 1
    assert f"deadline of {DEADLINE_S:g} s" in captured.out  # q2 unreachable, with the reason
