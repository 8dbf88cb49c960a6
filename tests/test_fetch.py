"""The fetcher against real loopback servers: retries, robots.txt, redirects, limits, 304."""
from __future__ import annotations

from dataclasses import replace

from guiderag.scraper import fetch
from sitekit import Site, html_page

PAGE = html_page("Q1", "<main><h1>Q1</h1><p>本文です。</p></main>")


def test_user_agent_and_ok_page(fast_scraper) -> None:
    site = Site()
    site.page("/guide/q1.html", PAGE, headers={"Last-Modified": "Sun, 01 Nov 2026 00:00:00 GMT"})
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        result = fetcher.fetch(base + "/guide/q1.html")
    assert result.ok and result.status == 200 and "本文です。" in result.html
    assert result.last_modified == "Sun, 01 Nov 2026 00:00:00 GMT"
    assert site.request_headers["/guide/q1.html"]["User-Agent"] == fast_scraper.user_agent


def test_5xx_is_retried_with_backoff_then_succeeds(fast_scraper) -> None:
    site = Site()
    site.page("/guide/q1.html", PAGE).fail_first = 2
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        result = fetcher.fetch(base + "/guide/q1.html")
    assert result.ok
    assert site.hits["/guide/q1.html"] == 3


def test_persistent_500_fails_after_all_retries(fast_scraper) -> None:
    site = Site()
    site.status("/guide/q1.html", 500)
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        result = fetcher.fetch(base + "/guide/q1.html")
    assert result.kind == fetch.FAILED
    assert "HTTP 500" in result.reason and "3 attempts" in result.reason
    assert site.hits["/guide/q1.html"] == fast_scraper.retries + 1
    assert not result.server_trouble  # one broken page, not a site going down


def test_persistent_503_is_the_mark_of_a_site_going_down(fast_scraper) -> None:
    site = Site()
    site.status("/guide/q1.html", 503)
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        result = fetcher.fetch(base + "/guide/q1.html")
    assert result.kind == fetch.FAILED and result.server_trouble and "HTTP 503" in result.reason


def test_404_and_410_mean_gone_and_are_not_retried(fast_scraper) -> None:
    site = Site()
    site.status("/guide/old.html", 410)
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        missing = fetcher.fetch(base + "/guide/missing.html")
        old = fetcher.fetch(base + "/guide/old.html")
    assert (missing.kind, missing.status, old.kind, old.status) == (fetch.GONE, 404, fetch.GONE, 410)
    assert site.hits["/guide/missing.html"] == 1


def test_connection_refused_is_retried_then_reported(fast_scraper) -> None:
    site = Site()
    with site.serve() as base:
        pass  # the port is closed again
    with fetch.Fetcher(fast_scraper, base) as fetcher:
        result = fetcher.fetch(base + "/guide/q1.html")
    assert result.kind == fetch.FAILED and result.server_trouble
    assert "connection refused" in result.reason


def test_robots_txt_disallow_is_obeyed(fast_scraper) -> None:
    site = Site()
    site.raw("/robots.txt", b"User-agent: *\nDisallow: /guide/private/\n", "text/plain")
    site.page("/guide/private/q9.html", PAGE)
    site.page("/guide/q1.html", PAGE)
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        robots = fetcher.load_robots()
        blocked = fetcher.fetch(base + "/guide/private/q9.html")
        allowed = fetcher.fetch(base + "/guide/q1.html")
    assert not robots.allowed(base + "/guide/private/q9.html")
    assert blocked.kind == fetch.FAILED and "robots.txt" in blocked.reason
    assert allowed.ok
    assert site.hits["/guide/private/q9.html"] == 0  # never even asked


def test_robots_txt_for_our_agent_only(fast_scraper) -> None:
    site = Site()
    site.raw("/robots.txt", b"User-agent: guiderag\nDisallow: /\n\nUser-agent: *\nAllow: /\n", "text/plain")
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        assert not fetcher.load_robots().allowed(base + "/guide/q1.html")


def test_missing_robots_txt_allows_all(fast_scraper) -> None:
    site = Site()
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        robots = fetcher.load_robots()
    assert robots.allowed(base + "/anything.html") and "no robots.txt" in robots.note


def test_redirect_within_the_site_is_followed(fast_scraper) -> None:
    site = Site()
    site.redirect("/guide/old.html", "/guide/new.html", status=301)
    site.page("/guide/new.html", PAGE)
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        result = fetcher.fetch(base + "/guide/old.html")
    assert result.ok and result.final_url == base + "/guide/new.html" and result.url == base + "/guide/old.html"


def test_redirect_off_the_site_is_refused(fast_scraper) -> None:
    site, other = Site(), Site()
    other.page("/elsewhere.html", PAGE)
    with other.serve() as other_base, site.serve() as base:
        site.redirect("/guide/q1.html", other_base + "/elsewhere.html")
        with fetch.Fetcher(fast_scraper, base) as fetcher:
            result = fetcher.fetch(base + "/guide/q1.html")
    assert result.kind == fetch.FAILED and "off-site" in result.reason
    assert other.hits["/elsewhere.html"] == 0


def test_https_upgrade_and_www_are_the_same_site() -> None:
    from guiderag.scraper import urls

    assert urls.is_same_site("http://example.org/guide/", "https://www.example.org/guide/q1.html")
    assert not urls.is_same_site("http://127.0.0.1:8000/", "http://127.0.0.1:8001/")


def test_redirect_loop_stops(fast_scraper) -> None:
    site = Site()
    site.redirect("/a.html", "/b.html")
    site.redirect("/b.html", "/a.html")
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        result = fetcher.fetch(base + "/a.html")
    assert result.kind == fetch.FAILED and "redirects" in result.reason


def test_non_html_is_skipped_by_content_type(fast_scraper) -> None:
    site = Site()
    site.raw("/guide/leaflet", b"PK\x03\x04 a zip file", "application/zip")
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        result = fetcher.fetch(base + "/guide/leaflet")
    assert result.kind == fetch.NOT_HTML and "application/zip" in result.reason


def test_a_pdf_comes_back_as_its_bytes_by_type_or_by_signature(fast_scraper) -> None:
    site = Site()
    site.raw("/guide/a", b"%PDF-1.7 typed", "application/pdf")
    site.raw("/guide/b", b"%PDF-1.7 generic", "application/octet-stream")
    site.raw("/guide/c", b"not a pdf at all", "application/pdf")
    site.raw("/guide/d", b"\x00\x01 binary", "application/octet-stream")
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        a, b, c, d = (fetcher.fetch(base + f"/guide/{x}") for x in "abcd")
    assert (a.kind, a.pdf, a.html) == (fetch.OK, b"%PDF-1.7 typed", "")
    assert (b.kind, b.pdf) == (fetch.OK, b"%PDF-1.7 generic")
    assert c.kind == fetch.FAILED and "not a PDF" in c.reason
    assert d.kind == fetch.NOT_HTML and "not a PDF" in d.reason


def test_a_pdf_may_be_larger_than_a_page_but_not_than_its_own_limit(fast_scraper) -> None:
    config = replace(fast_scraper, max_page_bytes=1000, pdf_max_bytes=5000)
    site = Site()
    site.raw("/guide/ok.pdf", b"%PDF-1.7" + b" " * 3000, "application/pdf")
    site.raw("/guide/big.pdf", b"%PDF-1.7" + b" " * 6000, "application/pdf")
    with site.serve() as base, fetch.Fetcher(config, base) as fetcher:
        ok, big = fetcher.fetch(base + "/guide/ok.pdf"), fetcher.fetch(base + "/guide/big.pdf")
    assert ok.kind == fetch.OK and ok.pdf is not None
    assert big.kind == fetch.FAILED and "size limit" in big.reason


def test_size_limit(fast_scraper) -> None:
    config = replace(fast_scraper, max_page_bytes=1000)
    site = Site()
    site.page("/guide/big.html", html_page("big", "<p>" + "あ" * 2000 + "</p>"))
    with site.serve() as base, fetch.Fetcher(config, base) as fetcher:
        result = fetcher.fetch(base + "/guide/big.html")
    assert result.kind == fetch.FAILED and "size limit" in result.reason


def test_conditional_get_answers_304(fast_scraper) -> None:
    site = Site()
    site.page("/guide/q1.html", PAGE, etag=True)
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        first = fetcher.fetch(base + "/guide/q1.html")
        second = fetcher.fetch(base + "/guide/q1.html", {"If-None-Match": first.etag})
    assert first.ok and first.etag
    assert second.kind == fetch.NOT_MODIFIED and site.not_modified["/guide/q1.html"] == 1


def test_delay_between_requests_is_applied(fast_scraper) -> None:
    import time

    config = replace(fast_scraper, delay_s=0.3)
    site = Site()
    site.page("/q.html", PAGE)
    with site.serve() as base, fetch.Fetcher(config, base) as fetcher:
        fetcher.fetch(base + "/q.html")
        start = time.monotonic()
        fetcher.fetch(base + "/q.html")
        waited = time.monotonic() - start
    assert waited >= 0.25  # a lower bound only (politeness, not speed), with slack for a busy machine
