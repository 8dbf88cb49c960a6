"""URL normalisation, link classification, and harvest of the sample site's TOC (real HTTP)."""
from __future__ import annotations

import pytest

from guiderag.scraper import urls
from guiderag.scraper.harvest import LinkRecord, apply_robots, classify_links
from sitekit import Site, html_page, toc_html

TOC = "http://127.0.0.1:8123/guide/index.html"


@pytest.mark.parametrize("href", [
    "q1.html", "./q1.html", "../guide/q1.html", "/guide/./sub/../q1.html", "q1.html#section-2",
    "q1.html?utm_source=news&utm_medium=mail", "q1.html?fbclid=abc&gclid=x",
    "HTTP://127.0.0.1:8123/guide/q1.html", "http://127.0.0.1:8123//guide/q1.html",
])
def test_one_page_however_it_is_spelt(href: str) -> None:
    assert urls.normalize_url(href, TOC) == "http://127.0.0.1:8123/guide/q1.html"


def test_default_port_and_case_of_host_are_not_part_of_identity() -> None:
    assert urls.normalize_url("HTTP://Example.ORG:80/a.html") == "http://example.org/a.html"
    assert urls.normalize_url("https://example.org:443/a.html") == "https://example.org/a.html"
    assert urls.normalize_url("https://example.org:8443/a.html") == "https://example.org:8443/a.html"


def test_default_index_is_the_same_page_but_kept_as_linked() -> None:
    assert urls.page_key(urls.normalize_url("index.html", TOC)) == urls.page_key(urls.normalize_url("./", TOC))
    # Fetchable spelling kept: not every server maps dir/ to dir/index.html.
    assert urls.normalize_url("index.html", TOC).endswith("/guide/index.html")


def test_real_query_parameters_are_kept_in_a_stable_order() -> None:
    a = urls.normalize_url("page.php?id=3&lang=ja&utm_campaign=x", TOC)
    b = urls.normalize_url("page.php?lang=ja&id=3", TOC)
    assert a == b == "http://127.0.0.1:8123/guide/page.php?id=3&lang=ja"


def test_non_ascii_paths_are_percent_encoded_once() -> None:
    assert urls.normalize_url("肺がん.html", TOC) == urls.normalize_url("%e8%82%ba%E3%81%8C%E3%82%93.html", TOC)


@pytest.mark.parametrize("href, text, category", [
    ("ch1/q01.html", "Q1 肺がんとは", urls.CONTENT),
    ("mailto:info@example.jp", "メール", urls.SCHEME),
    ("javascript:void(0)", "印刷", urls.SCHEME),
    ("tel:0312345678", "電話", urls.SCHEME),
    ("https://www.example.org/guide/q1.html", "外部", urls.OFFSITE),
    ("http://127.0.0.1:9999/guide/q1.html", "another port is another site", urls.OFFSITE),
    ("files/leaflet.pdf", "PDF", urls.CONTENT),  # a PDF inside the guide is read (scraper.pdf)
    ("files/memo.pdf", "受診メモ（印刷用）", urls.PRINTABLE),  # a form or print edition, by its link text
    ("files/leaflet.docx", "Word", urls.NOT_HTML),
    ("img/figure.png", "図", urls.NOT_HTML),
    ("/about.html", "このサイトについて", urls.NAVIGATION),
    ("/privacy.html", "個人情報", urls.NAVIGATION),
    ("contact/", "問い合わせ", urls.NAVIGATION),
    ("/sitemap.html", "サイトマップ", urls.NAVIGATION),
    ("search.html?q=肺", "検索", urls.NAVIGATION),
    ("/login", "ログイン", urls.NAVIGATION),
    ("page.php?id=7", "お問い合わせ", urls.NAVIGATION),  # opaque URL: told by the link text
    ("./", "目次", urls.NAVIGATION),  # the TOC itself
    ("/news/2026.html", "お知らせ", urls.OUTSIDE_GUIDE),
])
def test_classification_with_reasons(href: str, text: str, category: str) -> None:
    verdict = urls.classify(urls.normalize_url(href, TOC), TOC, text)
    assert verdict.category == category
    assert verdict.reason


def test_predicates_are_one_liners_over_named_patterns() -> None:
    assert urls.is_navigation_page("http://h/privacy-policy.html")
    assert not urls.is_navigation_page("http://h/guide/q-about-surgery.html")
    assert urls.is_html_by_extension("http://h/guide/q1")
    assert not urls.is_html_by_extension("http://h/guide/a.docx")
    assert urls.guide_path("http://h/guide/index.html") == "/guide/"
    assert urls.guide_path("http://h/guide/") == "/guide/"


def test_harvest_keeps_one_entry_per_page_and_marks_the_rest_duplicate() -> None:
    html = toc_html([("q1.html", "Q1"), ("./q1.html#a", "Q1 again"), ("q2.html?utm_source=x", "Q2"),
                     ("q2.html", "Q2 plain"), ("mailto:a@example.jp", "mail")])
    records = classify_links(html, TOC)
    assert [r.category for r in records] == [urls.CONTENT, urls.DUPLICATE, urls.CONTENT, urls.DUPLICATE,
                                              urls.SCHEME]
    assert [r.link_text for r in records][:2] == ["Q1", "Q1 again"]
    assert records[2].url == "http://127.0.0.1:8123/guide/q2.html"
    assert all(r.reason for r in records)
    assert [r.include for r in records] == [True, False, True, False, False]


def test_a_malformed_href_is_recorded_not_fatal() -> None:
    records = classify_links(toc_html([("http://[broken/q.html", "broken"), ("q1.html", "Q1")]), TOC)
    assert [(r.category, r.reason) for r in records][0] == (urls.SCHEME, "malformed URL")
    assert records[1].include


def test_base_href_is_honoured() -> None:
    html = html_page("目次", '<base href="/other/"><main><a href="q1.html">Q1</a></main>')
    (record,) = classify_links(html, TOC)
    assert record.url == "http://127.0.0.1:8123/other/q1.html"
    assert record.category == urls.OUTSIDE_GUIDE


def test_a_toc_kept_apart_from_its_pages_finds_the_guide_in_their_folder() -> None:
    """/guide/toc/ linking /guide/q/...: the pages' folder is the guide, news stays out."""
    toc = "http://127.0.0.1:8123/guide/toc/index.html"
    links = [(f"../q/q{i}.html", f"Q{i}") for i in range(1, 6)]
    links += [("/news/a.html", "お知らせ"), ("/news/b.html", "お知らせ2"), ("/about.html", "このサイトについて"),
              ("help.html", "使い方")]  # one page in the TOC's own folder does not make it the guide's
    records = classify_links(toc_html(links), toc)
    got = {r.url.rsplit("/", 2)[-2] + "/" + r.url.rsplit("/", 1)[-1]: r.category for r in records}
    assert [got[f"q/q{i}.html"] for i in range(1, 6)] == [urls.CONTENT] * 5
    assert got["news/a.html"] == got["news/b.html"] == urls.OUTSIDE_GUIDE
    assert got["127.0.0.1:8123/about.html"] == urls.NAVIGATION
    reason = next(r.reason for r in records if r.category == urls.CONTENT)
    assert "/guide/toc/" in reason and "/guide/q/" in reason
    # two equal folders: their common parent, not one of them by chance
    assert urls.majority_folder([f"http://h/g/{d}/q{i}.html" for d in "ab" for i in range(3)], 3) == "/g/"
    # a small guide of two pages beside a news folder of five is left alone
    small = [("q1.html", "Q1"), ("q2.html", "Q2")] + [(f"/news/{i}.html", "n") for i in range(5)]
    assert [r.category for r in classify_links(toc_html(small), TOC)].count(urls.CONTENT) == 2
    # a TOC whose own folder holds the guide is left alone
    records = classify_links(toc_html([("q1.html", "Q1"), ("q2.html", "Q2"), ("q3.html", "Q3")]
                                      + [(f"/news/{i}.html", "n") for i in range(5)]), TOC)
    assert [r.category for r in records].count(urls.OUTSIDE_GUIDE) == 5


def test_robots_verdict_only_touches_content_links() -> None:
    records = [LinkRecord("http://h/guide/drafts/q.html", "x", "", urls.CONTENT, "", True, urls.CONTENT),
               LinkRecord("http://h/guide/q.html", "y", "", urls.CONTENT, "", True, urls.CONTENT)]
    out = apply_robots(records, lambda u: "/drafts/" not in u)
    assert [(r.category, r.include) for r in out] == [(urls.DISALLOWED, False), (urls.CONTENT, True)]


def test_sample_site_classification_precision_and_recall_are_one(fast_scraper) -> None:
    from guiderag.scraper import sample
    from guiderag.scraper import fetch
    from guiderag.scraper.harvest import apply_robots as robots_pass

    with sample.serve_sample_site() as toc_url:
        declared = sample.sample_content_urls(toc_url)
        with fetch.Fetcher(fast_scraper, toc_url) as fetcher:
            robots = fetcher.load_robots()
            page = fetcher.fetch(toc_url)
        assert page.ok
        records = robots_pass(classify_links(page.html, toc_url), robots.allowed)
    found = {urls.page_key(r.url) for r in records if r.include}
    truth = {urls.page_key(u) for u in declared}
    true_pos = found & truth
    assert len(true_pos) / len(found) == 1.0, sorted(found - truth)  # precision
    assert len(true_pos) / len(truth) == 1.0, sorted(truth - found)  # recall
    # Every kind of non-content link of the sample is recognised, with a reason.
    categories = {r.category for r in records}
    # (its leaflet PDF, linked as 印刷用リーフレット, is a print edition: not read)
    assert {urls.SCHEME, urls.OFFSITE, urls.PRINTABLE, urls.NAVIGATION, urls.DUPLICATE,
            urls.DISALLOWED} <= categories
    assert all(r.reason for r in records)


def test_site_served_toc_links_resolve_over_http(fast_scraper) -> None:
    from guiderag.scraper import fetch

    site = Site()
    site.page("/guide/index.html", toc_html([("q1.html", "Q1")]))
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        page = fetcher.fetch(base + "/guide/index.html")
        (record,) = classify_links(page.html, page.final_url)
    assert record.url == base + "/guide/q1.html"


from hypothesis import given, settings as hsettings, strategies as st  # noqa: E402

_SEGMENT = st.sampled_from(["guide", "q1.html", ".", "..", "index.html", "肺", "a b", "%7e", "", "Ch1"])
_QUERY = st.sampled_from(["", "?utm_source=x", "?b=2&a=1", "?fbclid=z&id=3", "#frag", "?q=肺#x"])


@hsettings(max_examples=300, deadline=None)
@given(st.lists(_SEGMENT, max_size=5), _QUERY, st.sampled_from(["", "./", "../", "/"]))
def test_normalisation_is_idempotent_and_drops_tracking(segments, query, prefix) -> None:
    url = urls.normalize_url(prefix + "/".join(segments) + query, TOC)
    assert urls.normalize_url(url) == url
    assert urls.page_key(urls.page_key(url)) == urls.page_key(url)
    assert "#" not in url and "utm_" not in url and "fbclid" not in url
    href = prefix + "/".join(segments)
    if not href.startswith("//"):  # "//host/..." is protocol-relative: another host, rightly
        assert url.startswith("http://127.0.0.1:8123/")
