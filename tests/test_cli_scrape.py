"""`guiderag scrape` / `guiderag pages` through guiderag.cli.main: output and exit codes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from guiderag.cli import main
from sitekit import Site, html_page, toc_html
from guiderag.store.pages import Store


def _site() -> Site:
    site = Site()
    site.page("/guide/index.html", toc_html([("q1.html", "Q1"), ("q2.html", "Q2"), ("/about.html", "About")]))
    site.page("/guide/q1.html", html_page("Q1", "<main><h1>Q1 肺がん</h1><p>答えの一です。</p></main>"))
    site.page("/guide/q2.html", html_page("Q2", "<main><h1>Q2 手術</h1><p>答えの二です。</p></main>"),
              encoding="shift_jis")
    return site


def test_scrape_prints_the_summary_and_says_when_nothing_changed(fast_env: Path, capsys) -> None:
    site = _site()
    with site.serve() as base:
        assert main(["scrape", base + "/guide/index.html", "--no-index"]) == 0
        out = capsys.readouterr().out
        assert "added 2, changed 0, unchanged 0, removed 0, failed 0" in out
        assert "no page changed" not in out
        assert main(["scrape", base + "/guide/index.html", "--no-index"]) == 0
        out = capsys.readouterr().out
    assert "added 0, changed 0, unchanged 2, removed 0, failed 0" in out
    assert "no page changed" in out
    assert fast_env.with_name("cli.urls.xlsx").exists()  # the URL workbook beside the db


def test_scrape_shows_its_fetching_on_stderr_unless_told_not_to(fast_env: Path, capsys,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI hands the scraper a progress reporter made from GUIDERAG_PROGRESS and
    --no-progress (the stage reads no setting for it)."""
    monkeypatch.setenv("GUIDERAG_PROGRESS", "1")
    site = _site()
    with site.serve() as base:
        assert main(["scrape", base + "/guide/index.html", "--no-index"]) == 0
        shown = capsys.readouterr().err
        assert main(["scrape", base + "/guide/index.html", "--no-index", "--no-progress"]) == 0
        quiet = capsys.readouterr().err
    assert "fetch [" in shown and "2/2" in shown
    assert "fetch [" not in quiet and "unchanged" not in quiet  # the summary goes to stdout


def test_failures_are_reported_with_reasons_on_stderr(fast_env: Path, capsys) -> None:
    site = _site()
    site.status("/guide/q2.html", 503)
    with site.serve() as base:
        assert main(["scrape", base + "/guide/index.html", "--no-index"]) == 0
    captured = capsys.readouterr()
    assert "failed 1" in captured.out
    assert f"failed: {base}/guide/q2.html: HTTP 503" in captured.err


def test_pages_lists_the_store_as_json(fast_env: Path, capsys) -> None:
    site = _site()
    with site.serve() as base:
        assert main(["scrape", base + "/guide/index.html", "--no-index"]) == 0
        site.page("/guide/index.html", toc_html([("q1.html", "Q1")]))
        assert main(["scrape", base + "/guide/index.html", "--no-index"]) == 0
    capsys.readouterr()
    assert main(["pages", "--json"]) == 0
    pages = json.loads(capsys.readouterr().out)["pages"]
    assert [(p["url"], p["title"], p["version"], p["lines"]) for p in pages] == [
        (base + "/guide/q1.html", "Q1 肺がん", 1, 2)]
    assert set(pages[0]) >= {"url", "title", "version", "fetched_at", "content_hash", "lines"}
    assert main(["pages", "--json", "--all"]) == 0
    everything = json.loads(capsys.readouterr().out)["pages"]
    assert [p["title"] for p in everything] == ["Q1 肺がん", "Q2 手術"] and everything[1]["removed"]
    assert main(["pages"]) == 0
    assert "Q1 肺がん" in capsys.readouterr().out


def test_pages_without_a_store_is_a_clear_error(fast_env: Path, capsys) -> None:
    assert main(["pages"]) == 2  # bad input: --db / GUIDERAG_DB names no store
    assert "no page store" in capsys.readouterr().err
    assert not fast_env.exists()


def _bad_input(fast_env: Path, capsys, argv: list[str], message: str) -> None:
    before = fast_env.read_bytes() if fast_env.exists() else None
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1  # one line, with the reason
    assert (fast_env.read_bytes() if fast_env.exists() else None) == before


def test_unreachable_url(fast_env: Path, capsys) -> None:
    with Site().serve() as base:
        pass  # closed again: nothing listens on that port
    _bad_input(fast_env, capsys, ["scrape", base + "/guide/index.html", "--no-index"], "connection refused")


def test_not_a_url(fast_env: Path, capsys) -> None:
    _bad_input(fast_env, capsys, ["scrape", "guide/index.html", "--no-index"], "not an http(s) URL")


def test_toc_that_is_not_html(fast_env: Path, capsys) -> None:
    site = Site()
    site.raw("/guide/guide.pdf", b"%PDF-1.4", "application/pdf")
    with site.serve() as base:
        _bad_input(fast_env, capsys, ["scrape", base + "/guide/guide.pdf", "--no-index"], "not an HTML page")


def test_toc_that_is_an_empty_page(fast_env: Path, capsys) -> None:
    site = Site()
    site.page("/guide/index.html", html_page("空", ""))
    with site.serve() as base:
        _bad_input(fast_env, capsys, ["scrape", base + "/guide/index.html", "--no-index"], "has no links")


def test_toc_without_any_guide_page(fast_env: Path, capsys) -> None:
    site = Site()
    site.page("/guide/index.html", toc_html([("/about.html", "About"), ("/qa/q1.html", "Q1")]))
    site.page("/qa/q1.html", html_page("Q1", "<main><h1>Q1</h1><p>答えです。</p></main>"))
    book = fast_env.with_name("cli.urls.xlsx")
    with site.serve() as base:
        _bad_input(fast_env, capsys, ["scrape", base + "/guide/index.html", "--no-index"], "is a guide page")
        # The classification was written for review: including the page by hand makes it content.
        from openpyxl import load_workbook

        wb = load_workbook(book)
        for row in wb.active.iter_rows(min_row=2):
            if row[0].value.endswith("/qa/q1.html"):
                row[4].value = True
        wb.save(book)
        assert main(["scrape", base + "/guide/index.html", "--urls-xlsx", str(book), "--no-index"]) == 0
    assert "added 1," in capsys.readouterr().out


@pytest.mark.parametrize("content", [b"not a workbook", b""])
def test_malformed_workbook_changes_nothing(fast_env: Path, capsys, tmp_path: Path, content: bytes) -> None:
    site = _site()
    book = tmp_path / "review.xlsx"
    with site.serve() as base:
        assert main(["scrape", base + "/guide/index.html", "--no-index"]) == 0
        capsys.readouterr()
        with Store(fast_env) as store:
            before = (store.corpus_version(), len(store.runs()))
        book.write_bytes(content)
        assert main(["scrape", base + "/guide/index.html", "--urls-xlsx", str(book), "--no-index"]) == 2
        err = capsys.readouterr().err
    assert "not a readable .xlsx workbook" in err
    assert book.read_bytes() == content
    with Store(fast_env) as store:
        assert (store.corpus_version(), len(store.runs())) == before


def test_scrape_needs_exactly_one_of_url_and_sample(fast_env: Path, capsys) -> None:
    assert main(["scrape", "--no-index"]) == 2
    assert main(["scrape", "http://127.0.0.1:1/guide/", "--sample", "--no-index"]) == 2
    assert not fast_env.exists()


def test_scrape_sample(fast_env: Path, capsys) -> None:
    from guiderag.scraper import sample
    declared = sample.declared_content_paths()
    assert main(["scrape", "--sample", "--no-index"]) == 0
    out = capsys.readouterr().out
    assert f"added {len(declared)}, changed 0" in out
    assert main(["scrape", "--sample", "--no-index"]) == 0
    assert "no page changed" in capsys.readouterr().out  # stable URLs across loopback ports
    with Store(fast_env) as store:
        assert len(store.current_pages()) == len(declared)


def test_index_is_rebuilt_only_when_the_corpus_changed(fast_env: Path, capsys, monkeypatch) -> None:
    from guiderag import retrieval

    built = []
    monkeypatch.setattr(retrieval, "build_index", lambda config, store, guideline=None, **kwargs: built.append(store.db),
                        raising=False)
    site = _site()
    with site.serve() as base:
        assert main(["scrape", base + "/guide/index.html"]) == 0
        assert main(["scrape", base + "/guide/index.html"]) == 0  # unchanged: no rebuild
    assert built == [fast_env]
    assert "retrieval index rebuilt" in capsys.readouterr().err


def test_workbook_that_cannot_be_written_changes_nothing(fast_env: Path, capsys, tmp_path: Path) -> None:
    site = _site()
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a folder should be")
    with site.serve() as base:
        assert main(["scrape", base + "/guide/index.html", "--no-index"]) == 0
        with Store(fast_env) as store:
            before = store.corpus_version()
        site.page("/guide/q1.html", html_page("Q1", "<main><h1>Q1 肺がん</h1><p>改訂しました。</p></main>"))
        code = main(["scrape", base + "/guide/index.html", "--no-index", "--urls-xlsx", str(blocker / "u.xlsx")])
    assert code == 1
    assert "previous corpus was kept" in capsys.readouterr().err
    with Store(fast_env) as store:
        assert store.corpus_version() == before
        assert store.runs()[0]["status"] == "failed"


def test_workbook_path_must_be_xlsx(fast_env: Path, capsys, tmp_path: Path) -> None:
    _bad_input(fast_env, capsys, ["scrape", "http://127.0.0.1:1/guide/", "--urls-xlsx", str(tmp_path / "u.csv"),
                                  "--no-index"], "must be an .xlsx file")


def test_a_store_path_under_a_file_is_a_clear_error_and_fetches_nothing(tmp_path: Path, capsys) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a folder should be")
    site = _site()
    with site.serve() as base:
        code = main(["scrape", base + "/guide/index.html", "--no-index", "--db", str(blocker / "g.db")])
    assert code == 1
    err = capsys.readouterr().err
    assert "cannot create the scrape lock" in err and "Traceback" not in err
    assert sum(site.hits.values()) == 0
