"""Verdicts learnt by fetching (scraper/postfetch.py): pages that are only lists of links are
`index`, spellings of one document (`?from=toc`, `#frag`, a canonical link) are one page.

Real loopback sites (sitekit); each mechanism is also shown switched off, so the tests
are seen to depend on it."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from openpyxl import load_workbook

from guiderag.scraper import postfetch, scrape_site
from guiderag.scraper.textlines import read_page
from guiderag.guideline import GuidelineScope
from guiderag.scopes import ScraperConfig, StoreConfig
from guiderag.store import Store
from sitekit import Site, html_page

ANSWER = "<p>{q}の答えです。" + "この段落は本文で、患者さんに向けた説明がここに続きます。" * 3 + "</p>"


def _old_layout(title: str, main: str) -> str:
    """An older site's page: table layout, no <main>, a side menu with a heading."""
    side = ('<div class="sidebox"><h3>目次</h3><ul><li><a href="/gb/ch1/index.html">第1章</a></li>'
            '<li><a href="/gb/ch2/index.html">第2章</a></li></ul></div>')
    return html_page(title, f'<div id="header"><a href="/">トップ</a></div><table><tr><td id="leftcol">{side}</td>'
                     f'<td id="maincol">{main}<p class="notice">このサイトはデモです。</p></td></tr></table>')


def _site() -> Site:
    site = Site()
    toc = ['<li><a href="ch1/index.html">第1章 病気を知る</a></li>', '<li><a href="ch2/index.html">第2章 治療</a></li>']
    for n in (1, 2, 3, 4):
        toc.append(f'<li><a href="ch{1 if n < 3 else 2}/q{n}.html">Q{n} 質問{n}</a></li>')
    toc += ['<li><a href="ch1/q1.html?from=toc">（続きを読む）</a></li>',
            '<li><a href="ch1/q1.html#section2">この章の最初へ</a></li>',
            '<li><a href="ch2/q3.html?print=1">Q3 印刷用</a></li>',
            '<li><a href="ch2/view.php?id=3">Q3 別のURL</a></li>',
            '<li><a href="ch2/q4.html?lang=ja">Q4 日本語</a></li>',
            '<li><a href="sitemap-list.html">ページ一覧</a></li>']
    site.page("/gb/index.html", html_page("目次", f"<h1>ガイドブック目次</h1><ul>{''.join(toc)}</ul>"))
    for ch, qs in ((1, (1, 2)), (2, (3, 4))):
        items = "".join(f'<li><a href="q{n}.html">Q{n} 質問{n}についての詳しい解説</a></li>' for n in qs)
        site.page(f"/gb/ch{ch}/index.html", _old_layout(f"第{ch}章", f"<h1>第{ch}章</h1><p>この章の項目です。</p>"
                                                       f'<ul class="qlist">{items}</ul>'))
    for n in (1, 2, 3, 4):
        related = '<div class="relatedQA"><h3>関連</h3><ul>' + "".join(
            f'<li><a href="q{m}.html">Q{m}</a></li>' for m in (1, 2) if m != n) + "</ul></div>"
        head = '<link rel="canonical" href="/gb/ch2/q3.html">' if n == 3 else ""
        site.page(f"/gb/ch{1 if n < 3 else 2}/q{n}.html",
                  _old_layout(f"Q{n}", f"<h1>Q{n} 質問{n}</h1>" + ANSWER.format(q=f"質問{n}") + related)
                  if not head else html_page("Q3", f"<main><h1>Q3 質問3</h1>{ANSWER.format(q='質問3')}</main>", head=head))
    # the print view: other text, and a canonical link naming the question page; the same
    # text under another path, with a canonical link naming it too
    site.page("/gb/ch2/q3.html?print=1", html_page(
        "Q3", f"<main><h1>Q3 質問3（印刷用）</h1>{ANSWER.format(q='質問3')}</main>",
        head='<link rel="canonical" href="q3.html">'))
    site.page("/gb/ch2/view.php", html_page("Q3", f"<main><h1>Q3 質問3</h1>{ANSWER.format(q='質問3')}</main>",
                                            head='<link rel="canonical" href="/gb/ch2/q3.html">'))
    # a site map with <main>: nothing but links to the guide's pages
    links = "".join(f'<li><a href="/gb/ch{1 if n < 3 else 2}/q{n}.html">Q{n} 質問{n}の解説</a></li>' for n in (1, 2, 3, 4))
    site.page("/gb/sitemap-list.html", html_page("一覧", f"<main><h1>ページ一覧</h1><ul>{links}</ul></main>"))
    return site


def _scrape(config: ScraperConfig, store: StoreConfig, base: str, **kw) -> dict[str, tuple[str, str, bool]]:
    """The workbook's rows by URL (the first row of each: `#frag` spellings share the URL)."""
    report = scrape_site(config, store, base + "/gb/index.html", **kw)
    rows: dict[str, tuple[str, str, bool]] = {}
    for r in report.links:
        rows.setdefault(r.url[len(base):], (r.category, r.reason, r.include))
    return rows


def _stored(location: StoreConfig, base: str) -> list[str]:
    with Store(location.store) as store:
        return [p.url[len(base):] for p in store.current_pages()]


QUESTION_PAGES = ["/gb/ch1/q1.html", "/gb/ch1/q2.html", "/gb/ch2/q3.html", "/gb/ch2/q4.html"]


def test_index_pages_and_other_spellings_are_not_stored(fast_scraper: ScraperConfig, store_config: StoreConfig) -> None:
    site = _site()
    with site.serve() as base:
        rows = _scrape(fast_scraper, store_config, base)
        assert _stored(store_config, base) == QUESTION_PAGES
    for chapter in ("/gb/ch1/index.html", "/gb/ch2/index.html", "/gb/sitemap-list.html"):
        category, reason, include = rows[chapter]
        assert category == "index" and not include and "links to" in reason and "guide pages" in reason
    assert rows["/gb/ch1/q1.html?from=toc"][0] == "duplicate"
    assert "same text" in rows["/gb/ch1/q1.html?from=toc"][1]
    assert rows["/gb/ch2/q4.html?lang=ja"][0] == "duplicate"
    for spelling in ("/gb/ch2/q3.html?print=1", "/gb/ch2/view.php?id=3"):
        assert rows[spelling][0] == "duplicate" and "rel=canonical" in rows[spelling][1]
    assert rows["/gb/ch1/q1.html"][0] == "content"
    # the workbook says so, category and reason, for the maintainer; the #frag spelling is
    # a duplicate of its page before anything is fetched
    book = load_workbook(GuidelineScope.of(store_config, "default").workbook_path, read_only=True)
    sheet: dict[str, tuple] = {}
    for r in book["urls"].iter_rows(min_row=2, values_only=True):
        sheet.setdefault(r[9], r)  # by href as written
        sheet.setdefault(r[0][len(base):], r)
    book.close()
    assert sheet["ch1/q1.html#section2"][2] == "duplicate"
    assert sheet["/gb/ch1/index.html"][2] == "index" and sheet["/gb/ch1/index.html"][10] == "index"
    assert sheet["/gb/ch1/q1.html?from=toc"][2] == "duplicate"


def test_a_maintainer_can_include_an_index_page_by_hand(fast_scraper: ScraperConfig, store_config: StoreConfig) -> None:
    site = _site()
    with site.serve() as base:
        _scrape(fast_scraper, store_config, base)
        book = load_workbook(GuidelineScope.of(store_config, "default").workbook_path)
        sheet = book["urls"]
        for row in sheet.iter_rows(min_row=2):
            if row[0].value == base + "/gb/ch1/index.html":
                row[4].value = True  # include
        book.save(GuidelineScope.of(store_config, "default").workbook_path)
        rows = _scrape(fast_scraper, store_config, base, urls_xlsx=GuidelineScope.of(store_config, "default").workbook_path)
        assert "/gb/ch1/index.html" in _stored(store_config, base)
        assert rows["/gb/ch1/index.html"][2] and "by hand" in rows["/gb/ch1/index.html"][1]
        # left as the scraper wrote it, the workbook read back keeps the other index pages out
        assert "/gb/ch2/index.html" not in _stored(store_config, base)


def test_a_rescrape_removes_pages_a_past_scrape_stored_as_content(fast_scraper: ScraperConfig, store_config: StoreConfig,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A store filled before these verdicts (index pages and ?from=toc stored) is put right
    by the next full scrape."""
    site = _site()
    with site.serve() as base:
        with monkeypatch.context() as m:  # the mechanisms switched off: the old behaviour
            m.setattr(postfetch, "INDEX_LINK_SHARE", 2.0)
            m.setattr(postfetch, "duplicates", lambda spellings: {})
            _scrape(fast_scraper, store_config, base)
            wrong = _stored(store_config, base)
        assert "/gb/ch1/index.html" in wrong and "/gb/ch1/q1.html?from=toc" in wrong  # the tests depend on them
        report = scrape_site(replace(fast_scraper, conditional_get=False), store_config, base + "/gb/index.html")
        assert _stored(store_config, base) == QUESTION_PAGES
        assert base + "/gb/ch1/index.html" in report.summary.removed


def test_question_pages_with_related_boxes_are_content_not_index() -> None:
    html = _old_layout("Q1", "<h1>Q1 質問1</h1>" + ANSWER.format(q="質問1") +
                       '<div class="relatedQA"><h3>関連</h3><ul><li><a href="q2.html">Q2 質問2について</a></li>'
                       '<li><a href="q3.html">Q3 質問3について</a></li><li><a href="q4.html">Q4 質問4</a></li></ul></div>')
    profile = read_page(html).profile
    assert postfetch.index_reason(profile, "http://h/gb/ch1/q1.html", lambda u: "/gb/" in u) is None
    chapter = _old_layout("第1章", "<h1>第1章</h1><ul>" + "".join(
        f'<li><a href="q{n}.html">Q{n} 質問{n}についての詳しい解説</a></li>' for n in (1, 2, 3)) + "</ul>")
    assert postfetch.index_reason(read_page(chapter).profile, "http://h/gb/ch1/index.html", lambda u: "/gb/" in u)
    # links elsewhere (off the guide) do not make an index page of the guide
    assert postfetch.index_reason(read_page(chapter).profile, "http://h/gb/ch1/index.html", lambda u: False) is None


def test_a_canonical_link_naming_another_page_is_not_trusted_blindly() -> None:
    """Sites that give every page the home page as canonical do not lose their pages."""
    spellings = [postfetch.Spelling("http://h/gb/q1.html", "sha256:1", "http://h/gb/q2.html"),
                 postfetch.Spelling("http://h/gb/q2.html", "sha256:2", "http://h/gb/q2.html")]
    assert postfetch.duplicates(spellings) == {}
    same_path = [postfetch.Spelling("http://h/gb/q1.html?x=1", "sha256:1", "http://h/gb/q1.html"),
                 postfetch.Spelling("http://h/gb/q1.html", "sha256:2")]
    assert postfetch.duplicates(same_path) == {
        "http://h/gb/q1.html?x=1": ("http://h/gb/q1.html",
                                    "duplicate of http://h/gb/q1.html (its rel=canonical link names that page)")}
    # same text under another path is two pages (only query-string spellings are merged)
    twins = [postfetch.Spelling("http://h/gb/a.html", "sha256:1"), postfetch.Spelling("http://h/gb/b.html", "sha256:1")]
    assert postfetch.duplicates(twins) == {}
    # the spelling without a query is kept, wherever it is listed
    order = [postfetch.Spelling("http://h/gb/a.html?from=toc", "sha256:1"), postfetch.Spelling("http://h/gb/a.html", "sha256:1")]
    assert list(postfetch.duplicates(order)) == ["http://h/gb/a.html?from=toc"]


def test_the_gastric_development_site_stores_exactly_its_content_pages(fast_scraper: ScraperConfig, store_config: StoreConfig) -> None:
    """The development site of ../shared (8 chapter index pages, 8 `?from=toc` spellings)."""
    import json

    from guiderag.resources import shared_bench_dir
    from guiderag.scraper.sample import serve_directory

    root = shared_bench_dir() / "patient-gastric"
    if not (root / "gold.json").is_file():
        pytest.skip(f"the shared development set is not here ({root})")
    gold = json.loads((root / "gold.json").read_text(encoding="utf-8"))
    with serve_directory(root / "site") as base:
        report = scrape_site(fast_scraper, store_config, base + gold["toc"])
    with Store(store_config.db) as store:
        stored = sorted(p.url[len(base):] for p in store.current_pages())
    assert stored == sorted(gold["content_urls"]) and len(stored) == 32
    assert sum(r.category == "index" for r in report.links) == 8
