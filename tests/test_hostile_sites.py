"""Sites that misbehave (loopback servers): a scrape fails the page or the run with one
line, bounded in time, and the last good corpus, index and audit log stay as they were.

Trickling bytes, binary bytes served as text/html, Retry-After (honoured up to a cap),
an outage (not a robots ban), a table of contents over the page cap.
"""
from __future__ import annotations

import random
import time
from dataclasses import replace
from email.utils import formatdate
from pathlib import Path

import pytest

from guiderag.cli import main
from guiderag.scraper import fetch
from sitekit import Site, html_page, toc_html
from storekit import runs_of, state_of

Q1 = "/guide/q1.html"
Q2 = "/guide/q2.html"
TOC = "/guide/index.html"


def _site() -> Site:
    site = Site()
    site.page(TOC, toc_html([("q1.html", "Q1"), ("q2.html", "Q2")]))
    site.page(Q1, html_page("Q1 胸腺腫の治療", "<main><h1>Q1 胸腺腫の治療</h1><p>胸腺腫の治療は手術が中心です。</p></main>"))
    site.page(Q2, html_page("Q2 検査", "<main><h1>Q2 検査</h1><p>検査にはCTを使います。</p></main>"))
    return site


def _scrape(base: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["scrape", base + TOC, *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line_error(err: str) -> str:
    """The stderr of a failed command: exactly one line, no traceback."""
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("guiderag: error: "), err
    return err


def _good_store(site: Site, base: str, capsys: pytest.CaptureFixture[str], db: Path) -> dict:
    code, out, _ = _scrape(base, capsys)
    assert code == 0 and "added 2" in out
    state = state_of(db)
    assert state["index"] and len(state["corpus"]) == 2
    return state


def test_a_trickling_page_fails_at_the_deadline_and_the_run_goes_on(fast_env: Path, capsys, monkeypatch) -> None:
    site = _site()
    with site.serve() as base:
        before = _good_store(site, base, capsys, fast_env)
        body = html_page("Q1 改訂", "<main><p>" + "新しい本文です。" * 100 + "</p></main>").encode()
        site.routes[Q1].body, site.routes[Q1].trickle_s = body, 0.2  # headers, then a byte every 0.2 s
        site.page(Q2, html_page("Q2 検査", "<main><h1>Q2 検査</h1><p>検査にはMRIも使います。</p></main>"))
        monkeypatch.setenv("GUIDERAG_FETCH_DEADLINE_S", "1.5")
        started = time.monotonic()
        code, out, err = _scrape(base, capsys)
        elapsed = time.monotonic() - started
    assert code == 0  # one page failed; the run went on and stored the other
    assert "changed 1" in out and "failed 1" in out
    assert f"failed: {base}{Q1}: the response took longer than the deadline of 1.5 s" in err
    assert elapsed < 8, elapsed  # not len(body) * 0.2 s
    after = state_of(fast_env)
    q1_before = [row for row in before["corpus"] if row[0].endswith(Q1)]
    assert [row for row in after["corpus"] if row[0].endswith(Q1)] == q1_before  # previous version kept
    assert site.hits[Q1] == 2  # one request per scrape: a deadline is not retried


def test_fetch_deadline_counts_the_whole_response(fast_scraper) -> None:
    site = Site()
    route = site.page("/slow.html", html_page("遅い", "<p>" + "あ" * 200 + "</p>"))
    route.trickle_s = 0.05
    config = replace(fast_scraper, fetch_deadline_s=0.5, timeout_s=5.0)
    with site.serve() as base, fetch.Fetcher(config, base) as fetcher:
        started = time.monotonic()
        result = fetcher.fetch(base + "/slow.html")
        elapsed = time.monotonic() - started
    assert result.kind == fetch.FAILED and "deadline of 0.5 s" in result.reason
    assert 0.5 <= elapsed < 3.0
    assert result.server_trouble  # counts towards "the site stopped answering"


def test_binary_bytes_served_as_html_are_refused_and_the_previous_version_stays(fast_env: Path, capsys) -> None:
    site = _site()
    with site.serve() as base:
        before = _good_store(site, base, capsys, fast_env)
        site.raw(Q1, random.Random(12).randbytes(100_000), "text/html")
        code, out, err = _scrape(base, capsys)
    assert code == 0
    assert "failed 1" in out and "no page changed" in out
    assert f"failed: {base}{Q1}: not text: " in err and "control or replacement characters" in err
    assert state_of(fast_env) == before  # corpus, index and audit log as they were


def test_a_page_of_digits_and_symbols_only_is_no_page(fast_env: Path, capsys) -> None:
    site = _site()
    with site.serve() as base:
        before = _good_store(site, base, capsys, fast_env)
        site.page(Q1, html_page("123", "<p>0123 4567 !!! ---</p><p>89 %%</p>"))
        code, _, err = _scrape(base, capsys)
    assert code == 0 and "no letters in the page's text" in err
    assert state_of(fast_env) == before


def test_a_binary_table_of_contents_is_bad_input(fast_env: Path, capsys) -> None:
    site = Site()
    site.raw(TOC, random.Random(3).randbytes(20_000), "text/html")
    with site.serve() as base:
        code, _, err = _scrape(base, capsys)
    assert code == 2
    assert "not text" in _one_line_error(err)
    assert not fast_env.exists()


def test_plausible_text_passes_and_junk_does_not() -> None:
    from guiderag.scraper.charset import implausible_text

    page = "<html><body><p>胸腺腫の治療は手術が中心です。</p>" * 50 + "\ufffd</body></html>"
    assert implausible_text(page) is None  # one bad byte in a real page is still a page
    assert implausible_text("<p>" + "\x00\x01\ufffd" * 30 + "</p>") is not None
    assert implausible_text(random.Random(5).randbytes(5000).decode("utf-8", "replace")) is not None


def test_retry_after_is_honoured(fast_env: Path, capsys) -> None:
    site = _site()
    with site.serve() as base:
        _good_store(site, base, capsys, fast_env)
        q1 = site.routes[Q1]
        q1.fail_first, q1.fail_status, q1.fail_headers = site.hits[Q1] + 1, 429, {"Retry-After": "1"}
        q2 = site.routes[Q2]
        q2.fail_first, q2.fail_status = site.hits[Q2] + 1, 503
        not_before = int(time.time()) + 3
        q2.fail_headers = {"Retry-After": formatdate(not_before, usegmt=True)}  # an HTTP date
        wall = time.time() - time.monotonic()  # site.times are monotonic
        code, out, _ = _scrape(base, capsys)
    assert code == 0 and "failed 0" in out
    q1_gap = site.times[Q1][-1] - site.times[Q1][-2]
    assert q1_gap >= 0.95, q1_gap  # the backoff alone is 0.01 s
    assert site.times[Q2][-1] + wall >= not_before - 0.05  # not asked again before that date


def test_retry_after_beyond_the_cap_leaves_the_site_alone(fast_env: Path, capsys, monkeypatch) -> None:
    site = _site()
    with site.serve() as base:
        before = _good_store(site, base, capsys, fast_env)
        hits_q2 = site.hits[Q2]
        q1 = site.routes[Q1]
        q1.fail_first, q1.fail_status, q1.fail_headers = 10**6, 429, {"Retry-After": "20"}
        monkeypatch.setenv("GUIDERAG_RETRY_AFTER_MAX_S", "2")
        started = time.monotonic()
        code, _, err = _scrape(base, capsys)
        elapsed = time.monotonic() - started
    line = _one_line_error(err)
    assert code == 1
    assert "asking to wait 20 s" in line and "Retry-After" in line and "GUIDERAG_RETRY_AFTER_MAX_S" in line
    assert "previous corpus kept" in line
    assert elapsed < 5, elapsed
    assert site.hits[Q1] == 2 and site.hits[Q2] == hits_q2  # asked once, then nothing more was sent
    assert state_of(fast_env) == before
    assert runs_of(fast_env)[-1][1] == "failed"


def test_retry_after_values() -> None:
    assert fetch.retry_after("20") == 20.0
    assert fetch.retry_after(None) is None and fetch.retry_after("soon") is None
    assert fetch.retry_after(formatdate(time.time() - 60, usegmt=True)) == 0.0  # in the past: no wait
    assert 25 < (fetch.retry_after(formatdate(time.time() + 30, usegmt=True)) or 0) <= 30


def test_an_outage_is_not_a_robots_ban(fast_env: Path, capsys) -> None:
    site = _site()
    with site.serve() as base:
        before = _good_store(site, base, capsys, fast_env)
        site.outage_status = 503  # robots.txt and every page
        code, _, err = _scrape(base, capsys)
    line = _one_line_error(err)
    assert code == 1  # not bad input: the site is down
    assert "is unavailable" in line and "HTTP 503" in line
    assert "disallow" not in line
    assert state_of(fast_env) == before


def test_a_table_of_contents_answering_503_is_an_outage(fast_env: Path, capsys) -> None:
    site = _site()
    with site.serve() as base:
        before = _good_store(site, base, capsys, fast_env)
        site.status(TOC, 503)
        code, _, err = _scrape(base, capsys)
    line = _one_line_error(err)
    assert code == 1 and "is unavailable" in line and "HTTP 503" in line
    assert state_of(fast_env) == before


def test_a_table_of_contents_over_the_page_cap_is_refused_before_fetching(fast_env: Path, capsys,
                                                                          monkeypatch) -> None:
    site = Site()
    site.page(TOC, toc_html([(f"q{i}.html", f"Q{i}") for i in range(1, 6)]))
    for i in range(1, 6):
        site.page(f"/guide/q{i}.html", html_page(f"Q{i}", f"<p>答え{i}です。</p>"))
    monkeypatch.setenv("GUIDERAG_MAX_PAGES", "3")
    with site.serve() as base:
        code, _, err = _scrape(base, capsys)
    line = _one_line_error(err)
    assert code == 2
    assert "lists 5 guide pages, more than the 3" in line and "GUIDERAG_MAX_PAGES" in line
    assert not any(site.hits[f"/guide/q{i}.html"] for i in range(1, 6))  # nothing fetched
    assert not fast_env.exists()  # the store was not even created
    assert fast_env.with_name("cli.urls.xlsx").exists()  # the links are there for review
    monkeypatch.setenv("GUIDERAG_MAX_PAGES", "0")  # 0: no limit
    with site.serve() as base:
        code, out, _ = _scrape(base, capsys, "--no-index")
    assert code == 0 and "added 5" in out


@pytest.mark.parametrize("bad", ["GUIDERAG_FETCH_DEADLINE_S=0", "GUIDERAG_MAX_PAGES=-1"])
def test_bad_limits_are_bad_input(fast_env: Path, capsys, monkeypatch, bad: str) -> None:
    key, value = bad.split("=")
    monkeypatch.setenv(key, value)
    assert main(["pages"]) == 2
    _one_line_error(capsys.readouterr().err)

