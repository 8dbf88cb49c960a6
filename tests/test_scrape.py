"""Whole scrapes into a real SQLite store, over real HTTP: versions, removals, failures."""
from __future__ import annotations

import pytest

from guiderag.errors import ScrapeError
from guiderag.scraper import fetch, scrape, urls
from guiderag.scraper.run import scrape_site
from sitekit import Site, html_page, toc_html
from guiderag.store.pages import Store


def _page(title: str, text: str) -> str:
    return html_page(title, f"<nav>メニュー</nav><main><h1>{title}</h1><p>{text}</p></main><footer>フッター</footer>")


def _site(n: int = 4, *, etag: bool = False) -> Site:
    site = Site()
    site.page("/guide/index.html", toc_html([(f"q{i}.html", f"Q{i}") for i in range(1, n + 1)]))
    for i in range(1, n + 1):
        site.page(f"/guide/q{i}.html", _page(f"Q{i}", f"質問{i}への答えです。"), etag=etag)
    return site


def _corpus(settings) -> list[tuple]:
    with Store(settings.db) as store:
        return [(p.url, p.version, p.content_hash, p.lines) for p in store.current_pages(include_removed=True)]


def _runs(settings) -> list[dict]:
    with Store(settings.db) as store:
        return store.runs()


def test_sample_site_stores_exactly_its_content_pages_then_nothing_new(fast_settings) -> None:
    from guiderag.scraper import sample
    with sample.serve_sample_site() as toc_url:
        declared = {urls.page_key(u) for u in sample.sample_content_urls(toc_url)}
        first = scrape(fast_settings, toc_url)
        second = scrape(fast_settings, toc_url)
    with Store(fast_settings.db) as store:
        stored = {urls.page_key(p.url) for p in store.current_pages()}
        hidden = [line for p in store.current_pages() for line in p.lines]
    assert stored == declared  # precision and recall 1.0
    assert len(first.added) == len(declared) and not first.failed
    assert second.counts() == {"added": 0, "changed": 0, "unchanged": len(declared), "removed": 0, "failed": 0}
    assert not second.corpus_changed and "no page changed" in second.describe()
    assert not any("ページの先頭へ" in line or "ホーム" == line for line in hidden)


def test_sample_tooltip_definitions_are_not_in_stored_lines(fast_settings) -> None:
    from guiderag.scraper import sample
    from bs4 import BeautifulSoup

    from guiderag.resources import sample_site_dir

    SAMPLE_SITE_DIR = sample_site_dir()
    from guiderag.scraper.charset import decode_html

    definitions = set()
    for path in sample.declared_content_paths():
        soup = BeautifulSoup(decode_html((SAMPLE_SITE_DIR / path).read_bytes())[0], "html.parser")
        definitions |= {t.get_text(strip=True) for t in soup.select(".tooltip, [role=tooltip]")}
    assert definitions, "the sample site has glossary tooltips"
    with sample.serve_sample_site() as toc_url:
        scrape(fast_settings, toc_url)
    with Store(fast_settings.db) as store:
        text = "\n".join(line for p in store.current_pages() for line in p.lines)
    leaked = sorted(d for d in definitions if d and d in text)
    assert not leaked


def test_edited_page_gets_a_new_version_and_the_old_one_is_kept(fast_settings) -> None:
    site = _site()
    with site.serve() as base:
        toc = base + "/guide/index.html"
        scrape(fast_settings, toc)
        site.page("/guide/q2.html", _page("Q2", "質問2への答えを改訂しました。"))
        summary = scrape(fast_settings, toc)
    url = base + "/guide/q2.html"
    assert summary.changed == [url] and summary.counts()["unchanged"] == 3
    with Store(fast_settings.db) as store:
        versions = store.versions(url)
        assert [v.version for v in versions] == [1, 2]
        assert versions[0].lines == ("Q2", "質問2への答えです。")
        assert versions[1].lines == ("Q2", "質問2への答えを改訂しました。")
        assert store.get_page(url).version == 2


def test_page_removed_from_the_toc_is_marked_removed_not_deleted(fast_settings) -> None:
    site = _site()
    with site.serve() as base:
        toc = base + "/guide/index.html"
        scrape(fast_settings, toc)
        site.page("/guide/index.html", toc_html([(f"q{i}.html", f"Q{i}") for i in (1, 2, 4)]))
        summary = scrape(fast_settings, toc)
    url = base + "/guide/q3.html"
    assert summary.removed == [url]
    with Store(fast_settings.db) as store:
        assert url not in {p.url for p in store.current_pages()}
        page = store.get_page(url)
        assert page.removed and page.lines == ("Q3", "質問3への答えです。")


def test_404_removes_and_500_keeps_the_previous_version(fast_settings) -> None:
    site = _site()
    with site.serve() as base:
        toc = base + "/guide/index.html"
        scrape(fast_settings, toc)
        site.remove("/guide/q1.html")
        site.status("/guide/q2.html", 500)
        summary = scrape(fast_settings, toc)
    assert summary.removed == [base + "/guide/q1.html"]
    assert list(summary.failed) == [base + "/guide/q2.html"]
    assert "HTTP 500" in summary.failed[base + "/guide/q2.html"]
    assert site.hits["/guide/q2.html"] == 1 + fast_settings.retries + 1  # first scrape + retried attempts
    with Store(fast_settings.db) as store:
        kept = store.get_page(base + "/guide/q2.html")
        assert not kept.removed and kept.version == 1 and kept.lines[1] == "質問2への答えです。"


def test_site_going_down_mid_scrape_leaves_the_corpus_as_it_was(fast_settings) -> None:
    site = _site(8)
    with site.serve() as base:
        toc = base + "/guide/index.html"
        scrape(fast_settings, toc)
        before = _corpus(fast_settings)
        for i in range(1, 9):
            site.page(f"/guide/q{i}.html", _page(f"Q{i}", "改訂版の答えです。"))
        site.go_down_after(4)  # robots.txt, the TOC, two pages... then nothing answers
        with pytest.raises(ScrapeError, match="stopped answering"):
            scrape(fast_settings, toc)
    assert _corpus(fast_settings) == before
    assert _runs(fast_settings)[0]["status"] == "failed"


def test_ctrl_c_leaves_the_corpus_as_it_was(fast_settings, monkeypatch: pytest.MonkeyPatch) -> None:
    site = _site()
    with site.serve() as base:
        toc = base + "/guide/index.html"
        scrape(fast_settings, toc)
        before = _corpus(fast_settings)
        site.page("/guide/q1.html", _page("Q1", "改訂版です。"))
        real_fetch = fetch.Fetcher.fetch
        calls = {"n": 0}

        def fetch_then_interrupt(self, url, headers=None):
            calls["n"] += 1
            if calls["n"] == 3:  # the TOC, one page, then the user presses Ctrl-C
                raise KeyboardInterrupt
            return real_fetch(self, url, headers)

        monkeypatch.setattr(fetch.Fetcher, "fetch", fetch_then_interrupt)
        with pytest.raises(KeyboardInterrupt):
            scrape(fast_settings, toc)
    assert _corpus(fast_settings) == before
    assert _runs(fast_settings)[0]["status"] == "aborted"


def test_conditional_get_uses_the_stored_etag(fast_settings) -> None:
    site = _site(etag=True)
    with site.serve() as base:
        toc = base + "/guide/index.html"
        scrape(fast_settings, toc)
        summary = scrape(fast_settings, toc)
        site.page("/guide/q3.html", _page("Q3", "改訂した答えです。"), etag=True)  # a new ETag
        edited = scrape(fast_settings, toc)
    assert sum(site.not_modified.values()) == 4 + 3
    assert summary.counts()["unchanged"] == 4 and not summary.corpus_changed
    assert site.request_headers["/guide/q1.html"]["If-None-Match"].startswith('"')
    assert edited.changed == [base + "/guide/q3.html"] and edited.counts()["unchanged"] == 3


def test_empty_page_fails_and_is_not_stored(fast_settings) -> None:
    site = _site(2)
    site.page("/guide/q2.html", html_page("空", "<nav>メニュー</nav><main></main>"))
    with site.serve() as base:
        summary = scrape(fast_settings, base + "/guide/index.html")
    assert summary.failed == {base + "/guide/q2.html": "empty page (no text lines)"}
    with Store(fast_settings.db) as store:
        assert store.get_page(base + "/guide/q2.html") is None


def test_robots_disallowed_and_redirects(fast_settings) -> None:
    site, other = _site(4), Site()
    site.raw("/robots.txt", b"User-agent: *\nDisallow: /guide/q4.html\n", "text/plain")
    site.redirect("/guide/q2.html", "/guide/moved/q2.html", status=301)
    site.page("/guide/moved/q2.html", _page("Q2", "移動した答えです。"))
    with other.serve() as other_base, site.serve() as base:
        site.redirect("/guide/q3.html", other_base + "/q3.html")
        report = scrape_site(fast_settings, base + "/guide/index.html")
    by_url = {r.url: r for r in report.links}
    assert by_url[base + "/guide/q4.html"].category == urls.DISALLOWED
    assert site.hits["/guide/q4.html"] == 0
    assert base + "/guide/q2.html" in report.summary.added  # followed within the site
    assert "off-site" in report.summary.failed[base + "/guide/q3.html"]
    assert other.hits["/q3.html"] == 0
    with Store(fast_settings.db) as store:
        assert store.get_page(base + "/guide/q2.html").lines == ("Q2", "移動した答えです。")


def test_a_link_that_turns_out_not_html_is_not_content(fast_settings) -> None:
    site = _site(2)
    site.raw("/guide/q2.html", b"GIF89a...", "image/gif")
    with site.serve() as base:
        report = scrape_site(fast_settings, base + "/guide/index.html")
    q2 = next(r for r in report.links if r.url == base + "/guide/q2.html")
    assert (q2.category, q2.include) == (urls.NOT_HTML, False) and "image/gif" in q2.reason
    assert report.summary.added == [base + "/guide/q1.html"] and not report.summary.failed


def test_a_store_write_failing_half_way_leaves_the_corpus_as_it_was(fast_settings) -> None:
    from guiderag.errors import StoreError

    site = _site()
    with site.serve() as base:
        toc = base + "/guide/index.html"
        scrape(fast_settings, toc)
        before = _corpus(fast_settings)
        for i in (1, 2, 3):
            site.page(f"/guide/q{i}.html", _page(f"Q{i}", "改訂版の答えです。"))
        with Store(fast_settings.db) as store, store.conn:
            # The second new version cannot be written, as when the disk fills mid-transaction.
            store.conn.execute(
                "CREATE TRIGGER full_disk BEFORE INSERT ON page_versions "
                "WHEN (SELECT COUNT(*) FROM page_versions) >= 5 "
                "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
        with pytest.raises(StoreError, match="previous corpus is unchanged"):
            scrape(fast_settings, toc)
    assert _corpus(fast_settings) == before
    assert _runs(fast_settings)[0]["status"] == "failed"
    assert not list(fast_settings.db.parent.glob("*.xlsx.*.tmp"))  # no half-written workbook left


def test_force_fetches_in_full_without_validators(fast_settings) -> None:
    site = _site(etag=True)
    with site.serve() as base:
        toc = base + "/guide/index.html"
        scrape(fast_settings, toc)
        site.request_headers.clear()
        forced = scrape(fast_settings.replace(conditional_get=False), toc)
    assert "If-None-Match" not in site.request_headers["/guide/q1.html"]
    assert forced.counts()["unchanged"] == 4 and not forced.corpus_changed


def test_an_older_site_without_main_is_scraped_to_its_content_only(fast_settings) -> None:
    """A 2000s-style site: Shift_JIS, a layout table, gNavi and a link-list sidebar with no
    telling class, the TOC in its own folder (/guide/toc/) apart from the pages (/guide/q/).
    Over real HTTP, the store gets exactly the pages' own sentences."""
    titles = {i: f"Q{i} 治療のことその{i}について" for i in range(1, 5)}
    sidebar = "".join(f'<li><a href="../q/q{i}.html">{t}</a></li>' for i, t in titles.items())

    def old_page(i: int) -> str:
        return html_page(titles[i], f"""<div id="gNavi"><a href="/">トップ</a> <a href="/guide/toc/">目次</a></div>
            <table width="900"><tr><td class="l"><div class="box"><ul>{sidebar}</ul></div></td>
            <td><h1>{titles[i]}</h1><p>{'これは答えの本文です。' * 8}{i}</p><p>担当医に相談してください。{i}</p></td></tr></table>
            <div id="footerArea">Copyright デモ</div>""", charset="Shift_JIS")

    site = Site()
    site.page("/guide/toc/index.html", toc_html([(f"../q/q{i}.html", t) for i, t in titles.items()]
                                                + [("/news/1.html", "お知らせ")]))
    for i in titles:
        site.page(f"/guide/q/q{i}.html", old_page(i), encoding="shift_jis")
    with site.serve() as base:
        summary = scrape(fast_settings, base + "/guide/toc/index.html")
    assert sorted(summary.added) == sorted(f"{base}/guide/q/q{i}.html" for i in titles)
    with Store(fast_settings.db) as store:
        for i, title in titles.items():
            page = store.get_page(f"{base}/guide/q/q{i}.html")
            assert page.title == title
            assert page.lines == (title, f"{'これは答えの本文です。' * 8}{i}", f"担当医に相談してください。{i}")


def test_a_second_scrape_of_the_same_store_is_refused_while_one_runs(fast_settings, capsys) -> None:
    """The lock is held by another process: the second scrape fetches nothing, changes
    nothing and says who holds the store; once that process ends, scraping works again."""
    import subprocess
    import sys

    from guiderag.cli import main
    from guiderag.store.lock import lock_path

    site = _site(2)
    with site.serve() as base:
        toc = base + "/guide/index.html"
        assert main(["scrape", toc, "--db", str(fast_settings.db), "--no-progress", "--no-index", "--delay", "0"]) == 0
        before, hits = _corpus(fast_settings), dict(site.hits)
        holder = subprocess.Popen(
            [sys.executable, "-c",
             "import sys; from guiderag.store.lock import scrape_lock\n"
             "with scrape_lock(sys.argv[1]):\n    print('held', flush=True); sys.stdin.readline()",
             str(fast_settings.db)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        try:
            assert holder.stdout.readline().strip() == "held"
            capsys.readouterr()
            assert main(["scrape", toc, "--db", str(fast_settings.db), "--no-progress", "--no-index", "--delay", "0"]) == 1
            err = capsys.readouterr().err
            assert "another scrape is writing to" in err and f"pid {holder.pid}" in err
            assert _corpus(fast_settings) == before and dict(site.hits) == hits
        finally:
            holder.communicate("\n", timeout=10)
        assert lock_path(fast_settings.db).read_text(encoding="utf-8") == ""
        assert main(["scrape", toc, "--db", str(fast_settings.db), "--no-progress", "--no-index", "--delay", "0"]) == 0
