"""Guidelines: the store holds one or more (the `default` one when none was named), each
a table of contents and the pages scraped from it; a page belongs to one live guideline.
A guideline comes into being with its first committed scrape (store.runs)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from guiderag.clock import utc_now
from guiderag.errors import InputError
from guiderag.guideline import DEFAULT_GUIDELINE

from .backend import Connection, marks
from .records import Guideline

# Bound parameters per statement: SQLite's default limit is 999 (older builds), so a long
# list of URLs is asked about in chunks.
CHUNK = 500


def _guideline(row: Any) -> Guideline:
    return Guideline(row["id"], row["title"], row["toc_url"], row["created_at"], row["removed_at"])


class Guidelines:
    """The guidelines table, and which guideline holds which page (a part of store.pages.Store)."""

    conn: Connection
    path: Path | str

    def guidelines(self, *, include_removed: bool = False) -> list[Guideline]:
        """The store's guidelines, in id order (removed ones left out)."""
        sql = "SELECT * FROM guidelines" + ("" if include_removed else " WHERE removed_at IS NULL") + " ORDER BY id"
        return [_guideline(r) for r in self.conn.execute(sql)]

    def get_guideline(self, gid: str) -> Guideline | None:
        row = self.conn.execute(f"SELECT * FROM guidelines WHERE id = {self.conn.param}", (gid,)).fetchone()
        return _guideline(row) if row else None

    def resolve_guideline(self, requested: str = "") -> str:
        """The id of the guideline to work on: `requested` when the store holds it, else the
        store's only guideline (the default one for a store that holds none yet).
        InputError for an unknown id, or for none named in a store of several."""
        live = self.guidelines()
        if requested:
            if any(g.id == requested for g in live):
                return requested
            if requested == DEFAULT_GUIDELINE and not live:
                return requested
            names = ", ".join(g.id for g in live) or "none yet"
            raise InputError(f"the store {self.path} holds no guideline {requested!r} (it holds: {names}); "
                             "`guiderag guidelines` lists them")
        if len(live) > 1:
            raise InputError(f"the store {self.path} holds {len(live)} guidelines "
                             f"({', '.join(g.id for g in live)}): name one with --guideline ID")
        return live[0].id if live else DEFAULT_GUIDELINE

    def page_counts(self) -> dict[str, int]:
        """Live pages per guideline id."""
        rows = self.conn.execute(
            "SELECT guideline_id, COUNT(*) FROM pages WHERE removed_at IS NULL GROUP BY guideline_id")
        return {str(g): int(n) for g, n in rows}

    def owners(self, urls: Iterable[str]) -> dict[str, str]:
        """URL -> the guideline holding that page, for the URLs of `urls` that are live
        pages of a live guideline (a removed page, or a removed guideline's, may be scraped
        into another guideline: it moves there with its versions)."""
        wanted = list(dict.fromkeys(urls))
        owned: dict[str, str] = {}
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start:start + CHUNK]
            rows = self.conn.execute(
                f"SELECT p.url, p.guideline_id FROM pages p JOIN guidelines g ON g.id = p.guideline_id "
                f"WHERE g.removed_at IS NULL AND p.removed_at IS NULL AND p.url IN ({marks(self.conn, len(chunk))})",
                chunk)
            owned.update({r[0]: r[1] for r in rows})
        return owned

    def remove_guideline(self, gid: str) -> int:
        """Mark a guideline removed and its pages removed (kept, like every removed page,
        with all their versions; audit rows are not touched). Returns the pages it had."""
        guideline = self.get_guideline(gid)
        if guideline is None or guideline.removed:
            names = ", ".join(g.id for g in self.guidelines()) or "none"
            raise InputError(f"the store {self.path} holds no guideline {gid!r} to remove (it holds: {names})")
        now = utc_now()
        p = self.conn.param
        with self.conn.transaction():
            cur = self.conn.execute(
                f"UPDATE pages SET removed_at = {p} WHERE guideline_id = {p} AND removed_at IS NULL", (now, gid))
            self.conn.execute(f"UPDATE guidelines SET removed_at = {p} WHERE id = {p}", (now, gid))
        return int(cur.rowcount)
