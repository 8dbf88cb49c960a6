"""The URL workbook: written atomically, read back, the maintainer's hand edits win."""
from __future__ import annotations

from pathlib import Path

import pytest
from openpyxl import Workbook, load_workbook

from guiderag.errors import WorkbookError
from guiderag.scraper import urls, workbook
from guiderag.scraper.harvest import classify_links
from guiderag.scraper.run import scrape_site
from sitekit import Site, html_page, toc_html

TOC = "http://127.0.0.1:8123/guide/index.html"
LINKS = [("q1.html", "Q1"), ("q2.html", "Q2"), ("/about.html", "このサイトについて"), ("q1.html#x", "Q1 again")]


def _rows(path: Path) -> list[dict]:
    sheet = load_workbook(path).active
    rows = list(sheet.iter_rows(values_only=True))
    return [dict(zip(rows[0], r)) for r in rows[1:]]


def test_written_columns_and_rows(tmp_path: Path) -> None:
    records = classify_links(toc_html(LINKS), TOC)
    info = {records[0].url: workbook.FetchInfo(200, "Q1 題名", "2026-11-29T00:00:00Z", "sha256:abc")}
    out = tmp_path / "urls.xlsx"
    workbook.write(out, records, info)
    rows = _rows(out)
    assert list(rows[0])[:9] == ["url", "link_text", "category", "reason", "include", "http_status", "title",
                                 "fetched_at", "content_hash"]
    assert [(r["category"], r["include"]) for r in rows] == [
        (urls.CONTENT, True), (urls.CONTENT, True), (urls.NAVIGATION, False), (urls.DUPLICATE, False)]
    assert rows[0]["title"] == "Q1 題名" and rows[0]["http_status"] == 200
    assert list(tmp_path.iterdir()) == [out]  # no temporary file left behind


def _edit(path: Path, changes: dict[str, dict]) -> None:
    book = load_workbook(path)
    sheet = book.active
    header = [c.value for c in sheet[1]]
    for row in sheet.iter_rows(min_row=2):
        url = row[header.index("url")].value
        for column, value in changes.get(url, {}).items():
            row[header.index(column)].value = value
    book.save(path)


def test_hand_edits_win(tmp_path: Path) -> None:
    records = classify_links(toc_html(LINKS), TOC)
    out = tmp_path / "urls.xlsx"
    workbook.write(out, records, {})
    q2 = urls.normalize_url("q2.html", TOC)
    about = urls.normalize_url("/about.html", TOC)
    _edit(out, {q2: {"include": False}, about: {"include": "TRUE"}})
    edited = workbook.apply_edits(classify_links(toc_html(LINKS), TOC), workbook.read_edits(out))
    include = {r.url: r.include for r in edited if r.category != urls.DUPLICATE}
    assert include == {urls.normalize_url("q1.html", TOC): True, q2: False, about: True}
    assert "by hand" in next(r.reason for r in edited if r.url == q2)
    # Written again, the edits persist: the next read gives the same decisions.
    workbook.write(out, edited, {})
    again = workbook.apply_edits(classify_links(toc_html(LINKS), TOC), workbook.read_edits(out))
    assert {r.url: r.include for r in again if r.category != urls.DUPLICATE} == include


def test_category_edit_and_a_row_added_by_hand(tmp_path: Path) -> None:
    out = tmp_path / "urls.xlsx"
    book = Workbook()
    sheet = book.active
    sheet.append(["url", "include", "category"])
    sheet.append([urls.normalize_url("q1.html", TOC), None, "navigation"])
    sheet.append([urls.normalize_url("extra.html", TOC), True, None])
    book.save(out)
    edited = workbook.apply_edits(classify_links(toc_html(LINKS), TOC), workbook.read_edits(out), toc_url=TOC)
    by_url = {r.url: r for r in edited if r.category != urls.DUPLICATE}
    assert not by_url[urls.normalize_url("q1.html", TOC)].include
    extra = by_url[urls.normalize_url("extra.html", TOC)]
    assert extra.include and extra.reason == "added by hand in the workbook"


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_text("url,include\nhttp://x/,TRUE\n"), "not a readable .xlsx"),
    (lambda p: p.write_bytes(b"PK\x03\x04 broken zip"), "not a readable .xlsx"),
    (lambda p: _book(p, [["address", "keep"], ["http://x/", True]]), "missing url, include"),
    (lambda p: _book(p, [["url", "link_text"], ["http://x/", "x"]]), "missing include"),
    (lambda p: _book(p, [["url", "include"], ["http://x/", "maybe"]]), "include must be TRUE or FALSE"),
    (lambda p: _book(p, [["url", "include", "category"], ["http://x/", True, "contents"]]), "unknown category"),
])
def test_malformed_workbook_is_a_clear_error(tmp_path: Path, make, message: str) -> None:
    path = tmp_path / "bad.xlsx"
    make(path)
    with pytest.raises(WorkbookError, match=message):
        workbook.read_edits(path)


def _book(path: Path, rows: list[list]) -> None:
    book = Workbook()
    for row in rows:
        book.active.append(row)
    book.save(path)


def test_scrape_honours_a_hand_edited_workbook(fast_scraper, store_config, tmp_path: Path) -> None:
    site = Site()
    site.page("/guide/index.html", toc_html([("q1.html", "Q1"), ("q2.html", "Q2"), ("/about.html", "About")]))
    for name in ("q1", "q2"):
        site.page(f"/guide/{name}.html", html_page(name, f"<main><h1>{name}</h1><p>{name}の本文です。</p></main>"))
    site.page("/about.html", html_page("about", "<main><h1>このサイトについて</h1><p>運営者の説明です。</p></main>"))
    book = tmp_path / "review.xlsx"
    with site.serve() as base:
        first = scrape_site(fast_scraper, store_config, base + "/guide/index.html", urls_xlsx=book)
        assert sorted(first.summary.added) == [base + "/guide/q1.html", base + "/guide/q2.html"]
        _edit(book, {base + "/guide/q2.html": {"include": False}, base + "/about.html": {"include": True}})
        second = scrape_site(fast_scraper, store_config, base + "/guide/index.html", urls_xlsx=book)
    assert second.summary.added == [base + "/about.html"]
    assert second.summary.removed == [base + "/guide/q2.html"]
    rows = {r["url"]: r for r in _rows(book)}
    assert rows[base + "/about.html"]["include"] is True and rows[base + "/about.html"]["http_status"] == 200
    assert rows[base + "/guide/q2.html"]["include"] is False
