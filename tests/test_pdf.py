"""Guidelines published as PDF: real PDFs made in the test (tests/pdfkit.py, reportlab),
read through the worker process, served from loopback, scraped, versioned and cited."""
from __future__ import annotations

import json
from dataclasses import replace
from html import unescape
from pathlib import Path

import openpyxl
import pytest

from guiderag.chatbot.config import BotConfig
from guiderag.errors import PdfRefusedError
from guiderag.guideline import DEFAULT_GUIDELINE
from guiderag.scraper import pdfscan, scrape_site, urls
from guiderag.scraper.check import check_guideline
from guiderag.scraper.pdf import read_pdf
from guiderag.scraper.workbook import REMOVED_SHEET
from guiderag.store import Store

import pdfkit
from sitekit import Site, toc_html

SURGERY = ("手術の前には、心臓や肺のはたらきを調べる検査を行い、安全に手術を受けられるかどうかを確かめます。"
           "普段飲んでいる薬は、お薬手帳を持参してすべて伝えてください。")
ENGLISH = ("The guideline recommends that patients stop smoking at least four weeks before the operation "
           "to lower the risk of complications.")
DISCHARGE = "経過が順調であれば、手術の後一週間から二週間ほどで退院となります。"


def chapter(extra: str = "") -> pdfkit.Chapter:
    """Two questions over two pages: wrapped paragraphs, a list, a table, and the last
    paragraph of the first page running on to the second."""
    ch = pdfkit.Chapter("第1章 手術を受ける方へ", folio_start=7)
    ch.question("Q1 手術の前にはどのような準備をしますか？")
    ch.heading("手術の前の検査")
    ch.paragraph(SURGERY)
    ch.paragraph(ENGLISH)
    ch.bullets("入院の前日は、決められた時間以降の食事を控えてください。水分は指示された時間までとることができます。",
               "当日は、指示された時間に来院してください。")
    ch.table(("時期", "主な内容"), ("手術前日", "入院し、麻酔や手術について説明を受けます。"),
             ("手術翌日", "痛み止めを使いながらベッドから起き上がり、歩き始めます。"))
    ch.question("Q2 退院はいつごろですか？")
    for i in range(8):
        ch.paragraph(f"第{i + 1}段落です。" + DISCHARGE * 3 + extra)
    return ch


def test_a_typeset_chapter_reads_as_its_lines_each_with_its_pages(fast_scraper) -> None:
    text = read_pdf(chapter().build(), fast_scraper)
    lines = text.lines
    # wrapped lines joined into their sentence: no space between Japanese characters (a
    # long paragraph is one line per sentence), one space between Latin words
    assert "手術の前には、心臓や肺のはたらきを調べる検査を行い、安全に手術を受けられるかどうかを確かめます。" in lines
    assert "普段飲んでいる薬は、お薬手帳を持参してすべて伝えてください。" in lines
    assert ENGLISH in lines
    # running head, foot and folio: never a line, kept for review with the reason
    assert not any(pdfkit.HEADER in line or "Copyright" in line or line == "- 7 -" for line in lines)
    why = {(page, t): w for page, t, w in text.removed}
    assert why[(1, "- 7 -")].startswith("folio") and why[(2, "- 8 -")].startswith("folio")
    assert "running head" in why[(2, pdfkit.HEADER)] and "running head" in why[(1, pdfkit.COPYRIGHT)]
    # list items stay items (their hanging second line joined), table rows stay rows
    assert "・入院の前日は、決められた時間以降の食事を控えてください。水分は指示された時間までとることができます。" in lines
    first_row = lines.index("時期 | 主な内容")
    assert lines[first_row + 1:first_row + 3] == [
        "手術前日 | 入院し、麻酔や手術について説明を受けます。",
        "手術翌日 | 痛み止めを使いながらベッドから起き上がり、歩き始めます。"]
    # the paragraph split by the page break is one, and names both pages
    split = [(line, pages) for line, pages in zip(lines, text.line_pages) if len(pages) > 1]
    assert len(split) == 1 and split[0][1] == (1, 2) and split[0][0].startswith("第") and "退院" in split[0][0]
    assert text.line_pages[-1] == (2,)
    # sections from the bookmarks: the chapter's front, then each question
    assert [t for _, t in text.sections] == ["第1章 手術を受ける方へ", "Q1 手術の前にはどのような準備をしますか？",
                                              "Q2 退院はいつごろですか？"]
    assert lines[text.sections[2][0] - 1] == "Q2 退院はいつごろですか？"
    assert text.title == "第1章 手術を受ける方へ" and text.page_count == 2


def _site(ch1: bytes, ch2: bytes) -> Site:
    site = Site()
    site.page("/guide/index.html", toc_html([
        ("pdf/ch1.pdf", "第1章 手術を受ける方へ"), ("pdf/ch2.pdf", "第2章 退院のあと"),
        ("pdf/ch1.pdf?v=2", "第1章（改訂）"), ("pdf/memo.pdf", "受診メモ"),
        ("pdf/sheet.pdf", "体調記録シート（印刷用）"), ("../about.html", "このサイトについて")]))
    site.raw("/guide/pdf/ch1.pdf", ch1, "application/pdf")
    site.raw("/guide/pdf/ch2.pdf", ch2, "application/octet-stream")  # told by its %PDF- signature
    site.raw("/guide/pdf/memo.pdf", pdfkit.form("受診メモ", ["受診日", "医療機関", "担当医", "聞きたいこと",
                                                            "説明されたこと"]), "application/pdf")
    site.raw("/guide/pdf/sheet.pdf", pdfkit.form("体調記録シート", ["日付", "体温"]), "application/pdf")
    return site


def _second() -> bytes:
    ch = pdfkit.Chapter("第2章 退院のあと", folio_start=9)
    ch.question("Q3 退院後の食事で気をつけることはありますか？")
    ch.paragraph("退院後は、一度にたくさん食べずに、少量ずつ回数を分けて食べるようにしましょう。よくかんでゆっくり食べることが大切です。")
    return ch.build()


def test_a_pdf_guide_is_harvested_stored_cited_and_versioned(fast_settings) -> None:
    from guiderag import retrieval
    from guiderag.chatbot import Library

    settings = fast_settings.replace(urls_xlsx=fast_settings.storage.db.with_name("urls.xlsx"))
    scope = settings.guideline_scope(DEFAULT_GUIDELINE)
    site = _site(chapter().build(), _second())
    with site.serve() as base:
        toc = base + "/guide/index.html"
        report = scrape_site(settings.scraper, settings.storage, toc, guideline=scope)
        ch1, ch2 = base + "/guide/pdf/ch1.pdf", base + "/guide/pdf/ch2.pdf"
        assert sorted(report.summary.added) == [ch1, ch2]
        by = {r.url: r for r in report.links}
        assert by[ch1 + "?v=2"].category == urls.DUPLICATE
        assert by[base + "/guide/pdf/memo.pdf"].category == urls.PRINTABLE  # blank fields: a form
        assert "blank fields" in by[base + "/guide/pdf/memo.pdf"].reason
        assert by[base + "/guide/pdf/sheet.pdf"].category == urls.PRINTABLE  # by its link text (印刷用)
        assert site.hits["/guide/pdf/sheet.pdf"] == 0
        book = openpyxl.load_workbook(settings.scraper.urls_xlsx, read_only=True)
        removed = list(book[REMOVED_SHEET].iter_rows(values_only=True))
        book.close()
        assert removed[0] == ("url", "pdf_page", "text", "why")
        assert (ch1, 2, "- 8 -", "folio (page number)") in removed
        with Store(settings.storage.db) as store:
            page = store.get_page(ch1)
            assert page is not None and page.pdf is not None and page.version == 1
            assert page.pdf.page_count == 2 and page.pdf.sha256.startswith("sha256:")
            assert len(page.pdf.line_pages) == len(page.lines)
        again = scrape_site(settings.scraper, settings.storage, toc, guideline=scope)
        assert sorted(again.summary.unchanged) == [ch1, ch2] and not again.summary.corpus_changed
        assert not check_guideline(settings.scraper, settings.storage, scope).diverged

        retrieval.build_index(settings.retrieval, settings.storage, scope)
        with Library(BotConfig.of(settings)) as library:
            answer = library.ask("手術の後、退院はいつごろになりますか？")
        assert answer.governed
        shown = answer.to_json()["passages"]
        holding = next(p for p in shown if DISCHARGE in p["text"])
        assert holding["title"] == "Q2 退院はいつごろですか？"  # the section, not the chapter file
        assert holding["document_title"] == "第1章 手術を受ける方へ"
        assert holding["url"] == f"{ch1}#page={holding['pdf_page']}"
        assert holding["pdf_page"] in (1, 2) and holding["pdf_page"] == min(holding["pdf_pages"])
        with Store(settings.storage.db) as store:
            row = store.conn.execute("SELECT shown, answer_json FROM audit ORDER BY id DESC LIMIT 1").fetchone()
            stored = store.get_page(ch1)
        assert stored is not None and stored.pdf is not None
        audited = json.loads(row[0])
        assert any(s.get("pdf_page") == holding["pdf_page"] and s["url"] == ch1 for s in audited)
        assert holding in json.loads(row[1])["passages"]
        for p in shown:  # every line shown is a stored line, cited on its own PDF page
            for n, text in zip(p["lines"], p["text"].splitlines()):
                assert stored.line(n) == text and p["pdf_page"] <= min(stored.pdf.line_pages[n - 1])

        site.raw("/guide/pdf/ch1.pdf", chapter("改訂しました。").build(), "application/pdf")
        assert check_guideline(settings.scraper, settings.storage, scope).diverged
        changed = scrape_site(settings.scraper, settings.storage, toc, guideline=scope)
        assert changed.summary.changed == [ch1] and changed.summary.unchanged == [ch2]
    with Store(settings.storage.db) as store:
        versions = store.versions(ch1)
        assert [v.version for v in versions] == [1, 2]
        assert versions[0].pdf is not None and versions[1].pdf is not None
        assert versions[0].pdf.sha256 != versions[1].pdf.sha256
        assert any("改訂しました。" in line for line in versions[1].lines)


def test_the_coverage_evidence_reads_the_section_that_answers_not_the_document_s_last(fast_settings) -> None:
    """A PDF document is one unit per section, all with its url: the evidence of the best
    candidate is that section's (its title, its terms), whichever section it is."""
    from guiderag import retrieval
    from guiderag.retrieval.evidence import query_evidence
    from guiderag.retrieval.pipeline_ours import OursRetriever

    scope = fast_settings.guideline_scope(DEFAULT_GUIDELINE)
    with _site(chapter().build(), _second()).serve() as base:
        scrape_site(fast_settings.scraper, fast_settings.storage, base + "/guide/index.html", guideline=scope)
    retrieval.build_index(fast_settings.retrieval, fast_settings.storage, scope)
    retriever = retrieval.load_retriever(fast_settings.retrieval, fast_settings.storage, scope)
    assert isinstance(retriever, OursRetriever)
    question = "手術の前の検査では何を調べますか？"  # answered by Q1, the first of ch1's sections
    result = retriever.search(question)
    top = result.candidates[0]
    assert top.title == "Q1 手術の前にはどのような準備をしますか？" and top.url.endswith("/guide/pdf/ch1.pdf")
    assert top.row is not None and retriever.pages[top.row].title == top.title
    assert sum(p.url == top.url for p in retriever.pages) > 1  # its document has other units
    evidence = query_evidence(retriever, question, result)
    assert evidence.top_page == top.row and evidence.top_title == top.title


BAD = [
    ("encrypted", pdfkit.encrypted, "encrypted: it needs a password"),
    ("scanned", pdfkit.scanned, "OCR is not supported"),
    ("damaged", pdfkit.damaged, "damaged"),
    ("truncated", lambda: pdfkit.truncated(chapter().build()), "truncated"),
    ("bomb", lambda: pdfkit.bomb(64 << 20), "decompression bomb"),
    ("javascript", pdfkit.with_javascript, "JavaScript"),
    ("hidden javascript", pdfkit.with_hidden_javascript, "JavaScript"),
    ("embedded file", pdfkit.with_embedded_file, "embedded files"),
    ("5,000 pages", lambda: pdfkit.many_pages(5000), "5000 pages, more than the 1000"),
]


@pytest.mark.slow  # nine bad PDFs, each read by a memory-limited worker process
def test_each_bad_pdf_is_refused_with_its_reason_and_the_previous_version_stays(fast_scraper, store_config) -> None:
    config = replace(fast_scraper, urls_xlsx=store_config.db.with_name("urls.xlsx"), pdf_max_stream_bytes=16 << 20)
    good = chapter().build()
    site = Site()
    site.page("/guide/index.html", toc_html([("a.pdf", "第1章 手術を受ける方へ"), ("b.pdf", "第2章 退院のあと")]))
    site.raw("/guide/a.pdf", good, "application/pdf")
    site.raw("/guide/b.pdf", _second(), "application/pdf")
    with site.serve() as base:
        toc, url = base + "/guide/index.html", base + "/guide/a.pdf"
        assert url in scrape_site(config, store_config, toc).summary.added
        with Store(store_config.db) as store:
            before = store.get_page(url)
        assert before is not None
        for name, make, reason in BAD:
            site.raw("/guide/a.pdf", make(), "application/pdf")
            report = scrape_site(config, store_config, toc)
            assert reason in report.summary.failed.get(url, ""), (name, report.summary.failed)
            row = next(r for r in report.links if r.url == url)
            assert reason in row.reason and "PDF not read" in row.reason, name
            with Store(store_config.db) as store:
                now = store.get_page(url)
            assert now is not None and not now.removed, name
            assert (now.version, now.content_hash, now.lines) == (before.version, before.content_hash, before.lines)


def test_the_worker_s_memory_limit_refuses_what_the_scan_lets_through(fast_scraper) -> None:
    # a bomb below the scan's stream limit but above the worker's memory: PDFium (or the
    # scan) runs out of the worker's address space, never the scraper's
    config = replace(fast_scraper, pdf_max_stream_bytes=1 << 31, pdf_memory_mb=200)
    with pytest.raises(PdfRefusedError) as caught:
        read_pdf(pdfkit.bomb(400 << 20), config)
    assert caught.value.code == "crashed" and "200 MB" in str(caught.value)
    with pytest.raises(PdfRefusedError) as caught:
        read_pdf(b"x" * 2000, replace(fast_scraper, pdf_max_bytes=1000))
    assert caught.value.code == "too_large"


def test_the_scan_reads_names_in_dictionaries_and_object_streams_only() -> None:
    with pytest.raises(pdfscan.PdfScanError, match="JavaScript"):
        pdfscan.scan(pdfkit.with_hidden_javascript(), max_stream_bytes=1 << 20)
    # stream bytes are data, not names: "/JS" inside a content stream is no JavaScript
    objects = pdfkit._page_objects(pdfkit.TEXT + b"\n% /JS /Launch /EmbeddedFile\n")
    assert pdfscan.scan(pdfkit.raw_pdf(objects), max_stream_bytes=1 << 20).streams == 0
    result = pdfscan.scan(chapter().build(), max_stream_bytes=1 << 20)
    assert result.streams > 0 and result.inflated_bytes > 0
    with pytest.raises(pdfscan.PdfScanError, match="not a PDF"):
        pdfscan.scan(b"<html></html>", max_stream_bytes=1 << 20)


def test_the_chat_cites_the_pdf_page_and_shows_that_page(fast_settings) -> None:
    from guiderag.chatbot.answer import Answer, ShownPassage
    from guiderag.retrieval.corpus import units
    from guiderag.ui.render import answer_html
    from guiderag.ui.session import cited_pages

    site = Site()
    site.page("/guide/index.html", toc_html([("a.pdf", "第1章")]))
    site.raw("/guide/a.pdf", chapter().build(), "application/pdf")
    with site.serve() as base:
        scrape_site(fast_settings.scraper, fast_settings.storage, base + "/guide/index.html")
    with Store(fast_settings.storage.db) as store:
        page = store.current_pages()[0]
    assert page.pdf is not None
    sections = units([page])
    assert [s.title for s in sections] == [t for _, t in page.pdf.sections]
    n = next(i for i, line in enumerate(page.lines, 1) if line.startswith("第6段落"))
    passage = ShownPassage(url=page.url, title="Q2 退院はいつごろですか？", score=0.5, lines=[n],
                           text=page.line(n), version=page.version, fetched_at=page.fetched_at,
                           content_hash=page.content_hash, pdf_page=1, pdf_pages=[1, 2],
                           document_title=page.pdf.document_title)
    answer = Answer(question="退院は？", keywords=[], mode="extract", coverage="governed", answer=page.line(n),
                    passages=[passage], retrieval={})
    shown = cited_pages(answer, sections)
    lines = shown[(page.url + "#page=1", page.version)]
    assert len(lines) == len(page.lines)  # every line keeps its number
    on_page_1 = {i for i, p in enumerate(page.pdf.line_pages, 1) if 1 in p}
    assert {i for i, line in enumerate(lines, 1) if line} == on_page_1
    html = unescape(answer_html(answer, fast_settings, shown))  # every shown character is a reference
    assert "第1章 手術を受ける方へ（PDF）p.1" in html and f'{page.url}#page=1' in html
    assert "PDFのp.1全体を読む" in html


@pytest.mark.slow
def test_devbench_pdf_suite_scores_the_pdf_edition_beside_the_html_one(tmp_path: Path, capsys, no_settings_env) -> None:
    from guiderag.cli import main
    from guiderag.eval.pdfsuite import suite_dir

    try:
        suite_dir()
    except Exception as exc:  # the shared benchmark folder is part of the dev machine, not the repo
        pytest.skip(f"no pdf-gastric benchmark here: {exc}")
    assert main(["devbench", "--suite", "pdf", "--limit", "12", "--workdir", str(tmp_path / "w"),
                 "--json", "--no-progress"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["harvest"]["precision"] == 1.0 and report["harvest"]["recall"] == 1.0
    assert report["harvest"]["categories"].get("printable") == 1 and report["harvest"]["categories"]["duplicate"] >= 1
    assert report["rescrape"]["versions changed"] == 0 and report["removed_lines_shown"] == 0
    assert report["removed"].get("folio", 0) >= 8 and report["html"]["table"]["in scope"]["n"] > 0
    assert 0.0 <= report["page_citation"]["rate"] <= 1.0
    assert report["pdf"]["table"]["in scope"]["n"] == report["html"]["table"]["in scope"]["n"]
