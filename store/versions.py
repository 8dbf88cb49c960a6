"""Pages and their versions: what is read for retrieval and citations, and how one fetched
page becomes a new version (or none) inside a scrape's transaction (store.runs).

A page (URL) belongs to one guideline at a time; it is never deleted: one that disappears
is marked removed, and every changed text becomes a new version.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from guiderag.errors import StoreError
from guiderag.guideline import DEFAULT_GUIDELINE

from .backend import Connection, marks
from .layout import PdfLayout
from .records import FetchedPage, PageVersion, RunSummary, content_hash

# A page's current version, or any version, with what its page row says of it.
_VERSION_OF_PAGE = ("SELECT p.id AS page_id, p.url, p.removed_at, p.guideline_id, v.* FROM pages p "
                    "JOIN page_versions v ON v.page_id = p.id")
_CURRENT = " AND v.version = p.current_version"


class PageVersions:
    """The pages and page_versions tables (a part of store.pages.Store)."""

    conn: Connection
    path: Path | str

    # -- reading ----------------------------------------------------------------------
    def current_pages(self, *, include_removed: bool = False, guideline: str | None = None) -> list[PageVersion]:
        """The current version of every page (of one guideline, or of all), in URL order
        (removed pages left out)."""
        p = self.conn.param
        sql = _VERSION_OF_PAGE + _CURRENT + " WHERE 1 = 1 "
        params: list[str] = []
        if not include_removed:
            sql += "AND p.removed_at IS NULL "
        if guideline is not None:
            sql += f"AND p.guideline_id = {p} "
            params.append(guideline)
        sql += "ORDER BY p.url"
        return [_row_to_version(r) for r in self.conn.execute(sql, params)]

    def get_page(self, url: str) -> PageVersion | None:
        """The current version of one page, removed or not."""
        row = self.conn.execute(f"{_VERSION_OF_PAGE}{_CURRENT} WHERE p.url = {self.conn.param}", (url,)).fetchone()
        return _row_to_version(row) if row else None

    def get_version(self, url: str, version: int) -> PageVersion | None:
        """A given version of one page, for audits of what was shown back then."""
        p = self.conn.param
        row = self.conn.execute(f"{_VERSION_OF_PAGE} WHERE p.url = {p} AND v.version = {p}", (url, version)).fetchone()
        return _row_to_version(row) if row else None

    def versions(self, url: str) -> list[PageVersion]:
        """Every stored version of one page, oldest first."""
        rows = self.conn.execute(f"{_VERSION_OF_PAGE} WHERE p.url = {self.conn.param} ORDER BY v.version", (url,))
        return [_row_to_version(r) for r in rows]

    def corpus_version(self, guideline: str | None = None) -> str:
        """A fingerprint of the current corpus (of one guideline, or of all); the index
        records the one it was built from."""
        sql = ("SELECT p.url, v.content_hash FROM pages p JOIN page_versions v "
               "ON v.page_id = p.id AND v.version = p.current_version WHERE p.removed_at IS NULL ")
        params: list[str] = []
        if guideline is not None:
            sql += f"AND p.guideline_id = {self.conn.param} "
            params.append(guideline)
        rows = self.conn.execute(sql + "ORDER BY p.url", params).fetchall()
        digest = hashlib.sha256()
        for url, chash in rows:
            digest.update(f"{url}\t{chash}\n".encode("utf-8"))
        return "corpus:" + digest.hexdigest()[:32]

    def conditional_headers(self, url: str) -> dict[str, str]:
        """If-None-Match / If-Modified-Since for a conditional GET of a live stored page."""
        page = self.get_page(url)
        if page is None or page.removed:
            return {}
        headers = {}
        if page.etag:
            headers["If-None-Match"] = page.etag
        if page.last_modified:
            headers["If-Modified-Since"] = page.last_modified
        return headers

    # -- writing, inside a scrape's transaction -----------------------------------------
    def _apply_fetched(self, page: FetchedPage, run_id: int, now: str, summary: RunSummary, gid: str) -> None:
        """One fetched (or not modified) page of guideline `gid`: a new page, a new version,
        validators refreshed, or a page moved here from a removed guideline."""
        p = self.conn.param
        row = self.conn.execute(
            "SELECT p.id, p.current_version, p.removed_at, p.guideline_id, v.content_hash, g.removed_at AS owner_removed "
            "FROM pages p JOIN page_versions v ON v.page_id = p.id AND v.version = p.current_version "
            f"LEFT JOIN guidelines g ON g.id = p.guideline_id WHERE p.url = {p}",
            (page.url,),
        ).fetchone()
        if row is not None and row["guideline_id"] != gid:
            if row["owner_removed"] is None and row["removed_at"] is None:
                raise StoreError(f"{page.url} is a page of guideline {row['guideline_id']!r}, not of {gid!r}; "
                                 "a page belongs to one guideline")
            # The page of a removed guideline (or one its guideline dropped): it moves here,
            # its versions with it, and counts as added.
            self.conn.execute(f"UPDATE pages SET guideline_id = {p}, removed_at = {p} WHERE id = {p}",
                              (gid, now, row["id"]))
            row = self.conn.execute(
                "SELECT p.id, p.current_version, p.removed_at, v.content_hash FROM pages p "
                f"JOIN page_versions v ON v.page_id = p.id AND v.version = p.current_version WHERE p.id = {p}",
                (row["id"],),
            ).fetchone()
        if page.not_modified:
            if row is None:
                summary.failed[page.url] = "304 Not Modified for a page never stored"
                return
            self.conn.execute(f"UPDATE pages SET last_seen = {p}, removed_at = NULL WHERE id = {p}", (now, row["id"]))
            summary.unchanged.append(page.url)
            return
        chash = content_hash(page.title, page.lines, page.pdf)
        if row is None:
            page_id = self.conn.insert(
                "INSERT INTO pages(url, first_seen, last_seen, current_version, guideline_id) "
                f"VALUES ({p}, {p}, {p}, 1, {p})",
                (page.url, now, now, gid),
            )
            self._insert_version(page_id, 1, page, chash, run_id)
            summary.added.append(page.url)
            return
        if row["content_hash"] == chash:
            # Same text: refresh validators only, no new version.
            self.conn.execute(
                f"UPDATE page_versions SET etag = {p}, last_modified = {p} WHERE page_id = {p} AND version = {p}",
                (page.etag, page.last_modified, row["id"], row["current_version"]),
            )
            self.conn.execute(f"UPDATE pages SET last_seen = {p}, removed_at = NULL WHERE id = {p}", (now, row["id"]))
            if row["removed_at"]:
                summary.added.append(page.url)
            else:
                summary.unchanged.append(page.url)
            return
        version = int(row["current_version"]) + 1
        self._insert_version(int(row["id"]), version, page, chash, run_id)
        self.conn.execute(
            f"UPDATE pages SET current_version = {p}, last_seen = {p}, removed_at = NULL WHERE id = {p}",
            (version, now, row["id"]),
        )
        (summary.added if row["removed_at"] else summary.changed).append(page.url)

    def _insert_version(self, page_id: int, version: int, page: FetchedPage, chash: str, run_id: int) -> None:
        p = self.conn.param
        self.conn.execute(
            "INSERT INTO page_versions(page_id, version, title, lines, content_hash, fetched_at, "
            f"etag, last_modified, http_status, run_id, pdf_layout) VALUES ({marks(self.conn, 11)})",
            (page_id, version, page.title, json.dumps(list(page.lines), ensure_ascii=False), chash,
             page.fetched_at, page.etag, page.last_modified, page.http_status, run_id,
             page.pdf.to_json() if page.pdf is not None else None),
        )


def _row_to_version(row: Any) -> PageVersion:
    return PageVersion(
        page_id=row["page_id"],
        url=row["url"],
        title=row["title"],
        version=row["version"],
        fetched_at=row["fetched_at"],
        content_hash=row["content_hash"],
        lines=tuple(json.loads(row["lines"])),
        etag=row["etag"],
        last_modified=row["last_modified"],
        removed=row["removed_at"] is not None,
        guideline=row["guideline_id"] if "guideline_id" in row.keys() else DEFAULT_GUIDELINE,
        pdf=PdfLayout.from_json(row["pdf_layout"]) if "pdf_layout" in row.keys() else None,
    )
