"""Charset: header, then <meta>, then strict-decode detection; never ISO-8859-1 by default."""
from __future__ import annotations

import pytest

from guiderag.scraper import charset, fetch
from sitekit import Site, html_page

TEXT = "肺がんの治療には、手術・放射線治療・薬物療法があります。副作用は人によって違います。"


@pytest.mark.parametrize("encoding, expected", [("utf-8", "utf-8"), ("shift_jis", "cp932"),
                                                ("cp932", "cp932"), ("euc_jp", "euc_jp")])
def test_detection_without_any_label(encoding: str, expected: str) -> None:
    body = f"<html><body><p>{TEXT}</p></body></html>".encode(encoding)
    text, codec = charset.decode_html(body, "text/html")
    assert codec == expected
    assert TEXT in text


def test_euc_jp_that_also_decodes_as_cp932_is_still_read_as_euc_jp() -> None:
    body = "ひらがなとカタカナです".encode("euc_jp")
    body.decode("cp932")  # the trap: a strict cp932 decode succeeds, as half-width garbage
    assert charset.detect(body) == "euc_jp"


def test_header_charset_wins_and_a_lying_label_is_skipped() -> None:
    sjis = TEXT.encode("shift_jis")
    assert charset.decode_html(sjis, "text/html; charset=Shift_JIS") == (TEXT, "cp932")
    assert charset.decode_html(sjis, "text/html; charset=utf-8")[0] == TEXT  # wrong label: detected


def test_meta_charset_and_http_equiv() -> None:
    for meta in ('<meta charset="EUC-JP">', '<meta http-equiv="Content-Type" content="text/html; charset=euc-jp">'):
        body = f"<html><head>{meta}</head><body>{TEXT}</body></html>".encode("euc_jp")
        text, codec = charset.decode_html(body, "text/html")
        assert codec == "euc_jp" and TEXT in text


def test_iso_8859_1_is_never_a_silent_fallback() -> None:
    body = TEXT.encode("utf-8")
    assert charset.decode_html(body, "text/html; charset=ISO-8859-1")[0] == TEXT
    assert charset.decode_html(body, None)[0] == TEXT


@pytest.mark.parametrize("encoding", ["shift_jis", "euc_jp"])
def test_pages_served_without_charset_over_http(encoding: str, fast_scraper) -> None:
    site = Site()
    site.page("/guide/q1.html", html_page("Q1", f"<main><h1>Q1</h1><p>{TEXT}</p></main>"), encoding=encoding)
    with site.serve() as base, fetch.Fetcher(fast_scraper, base) as fetcher:
        result = fetcher.fetch(base + "/guide/q1.html")
    assert result.ok
    assert result.content_type == "text/html"  # no charset on the wire, as with http.server
    assert TEXT in result.html


def test_sample_site_shift_jis_and_euc_jp_pages(fast_scraper) -> None:
    from guiderag.scraper import sample
    from guiderag.resources import sample_site_dir
    SAMPLE_SITE_DIR = sample_site_dir()
    from guiderag.scraper.textlines import extract

    seen = set()
    with sample.serve_sample_site() as toc_url, fetch.Fetcher(fast_scraper, toc_url) as fetcher:
        site = toc_url.split("/guide/", 1)[0]
        for path in sample.declared_content_paths():
            try:
                (SAMPLE_SITE_DIR / path).read_bytes().decode("utf-8")
                continue  # only the pages stored in a legacy Japanese encoding
            except UnicodeDecodeError:
                pass
            result = fetcher.fetch(f"{site}/{path}")
            title, lines = extract(result.html)
            seen.add(result.codec)
            assert title.startswith("Q") and "\ufffd" not in title + "".join(lines)
            assert any("。" in line for line in lines)
    assert {"cp932", "euc_jp"} <= seen


def test_euc_jp_with_nec_specials_is_read_with_a_wider_codec() -> None:
    body = "検査値は①と②です。".encode("euc_jis_2004")  # what servers labelled EUC-JP often send
    for content_type in ("text/html; charset=EUC-JP", "text/html"):
        text, codec = charset.decode_html(body, content_type)
        assert text == "検査値は①と②です。", (content_type, codec)
