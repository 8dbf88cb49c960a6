"""The versioned page store: versions, removals, runs, and all-or-nothing commits."""
from __future__ import annotations

import sqlite3

import psycopg
import pytest

from guiderag.errors import StoreError
from guiderag.store import FetchedPage, Store, content_hash


def page(url: str, *lines: str, title: str = "T", etag: str | None = None) -> FetchedPage:
    return FetchedPage(url=url, title=title, lines=tuple(lines), etag=etag)


def scrape(store: Store, pages: list[FetchedPage], **kw):
    run = store.begin_run("http://x/toc")
    content = kw.pop("content_urls", [p.url for p in pages])
    return store.commit_run(run, pages, content_urls=content, **kw)


def test_added_then_unchanged_stores_no_new_version(store_at):
    with Store(store_at) as s:
        first = scrape(s, [page("http://x/a", "肺がんとは"), page("http://x/b", "検査")])
        assert first.counts() == {"added": 2, "changed": 0, "unchanged": 0, "removed": 0, "failed": 0}
        again = scrape(s, [page("http://x/a", "肺がんとは"), page("http://x/b", "検査")])
        assert again.unchanged == ["http://x/a", "http://x/b"]
        assert not again.corpus_changed
        assert "no new version" in again.describe()
        assert [p.version for p in s.current_pages()] == [1, 1]


def test_edit_makes_new_version_and_keeps_old(store_at):
    with Store(store_at) as s:
        scrape(s, [page("http://x/a", "旧い文")])
        before = s.corpus_version()
        summary = scrape(s, [page("http://x/a", "新しい文", "二行目")])
        assert summary.changed == ["http://x/a"]
        versions = s.versions("http://x/a")
        assert [v.version for v in versions] == [1, 2]
        assert versions[0].lines == ("旧い文",)
        assert s.get_page("http://x/a").line(2) == "二行目"
        assert s.get_version("http://x/a", 1).content_hash == content_hash("T", ["旧い文"])
        assert s.corpus_version() != before


def test_page_missing_from_toc_is_marked_removed_not_deleted(store_at):
    with Store(store_at) as s:
        scrape(s, [page("http://x/a", "a"), page("http://x/b", "b")])
        summary = scrape(s, [page("http://x/a", "a")])
        assert summary.removed == ["http://x/b"]
        assert [p.url for p in s.current_pages()] == ["http://x/a"]
        gone = s.get_page("http://x/b")
        assert gone is not None and gone.removed
        # it comes back as added when it reappears
        back = scrape(s, [page("http://x/a", "a"), page("http://x/b", "b")])
        assert back.added == ["http://x/b"]


def test_failed_fetch_keeps_previous_version(store_at):
    with Store(store_at) as s:
        scrape(s, [page("http://x/a", "a"), page("http://x/b", "b")])
        summary = scrape(
            s, [page("http://x/a", "a")], content_urls=["http://x/a", "http://x/b"],
            failed={"http://x/b": "HTTP 500"},
        )
        assert summary.failed == {"http://x/b": "HTTP 500"}
        assert summary.removed == []
        assert s.get_page("http://x/b").lines == ("b",)


def test_gone_pages_are_removed(store_at):
    with Store(store_at) as s:
        scrape(s, [page("http://x/a", "a"), page("http://x/b", "b")])
        summary = scrape(s, [page("http://x/a", "a")], content_urls=["http://x/a", "http://x/b"],
                         failed={"http://x/b": "HTTP 404"}, gone=["http://x/b"])
        assert summary.removed == ["http://x/b"] and "http://x/b" not in summary.failed


def test_not_modified_counts_unchanged_and_headers_are_offered(store_at):
    with Store(store_at) as s:
        scrape(s, [page("http://x/a", "a", etag='"v1"')])
        assert s.conditional_headers("http://x/a") == {"If-None-Match": '"v1"'}
        summary = scrape(s, [FetchedPage(url="http://x/a", not_modified=True, http_status=304)])
        assert summary.unchanged == ["http://x/a"]


def test_failure_inside_commit_rolls_back_everything(store_at):
    with Store(store_at) as s:
        scrape(s, [page("http://x/a", "a")])
        before = s.corpus_version()

        # the disk filling up, as each backend reports it
        full = (sqlite3.OperationalError("database or disk is full") if s.backend.name == "sqlite"
                else psycopg.errors.DiskFull("could not extend file: No space left on device"))

        class Boom(FetchedPage):
            @property
            def lines(self):  # type: ignore[override]
                raise full

        run = s.begin_run("http://x/toc")
        bad = Boom.__new__(Boom)
        object.__setattr__(bad, "url", "http://x/b")
        object.__setattr__(bad, "title", "B")
        object.__setattr__(bad, "not_modified", False)
        with pytest.raises(StoreError, match="previous corpus is unchanged"):
            s.commit_run(run, [page("http://x/a", "changed"), bad], content_urls=["http://x/a", "http://x/b"])
        assert s.corpus_version() == before
        assert s.get_page("http://x/a").lines == ("a",)
        assert s.runs()[0]["status"] == "failed"


def test_not_a_database_is_a_clear_error(tmp_path):
    bogus = tmp_path / "bogus.db"
    bogus.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="cannot open the page store"):
        Store(bogus)


def test_missing_store_without_create(tmp_path):
    with pytest.raises(StoreError, match="guiderag scrape") as exc:
        Store(tmp_path / "none.db", create=False)
    assert exc.value.exit_code == 2
    assert not (tmp_path / "none.db").exists()
