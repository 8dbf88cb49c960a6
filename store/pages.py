"""Guidelines, their pages, the pages' versions and the scrape runs, in SQLite.

A store holds one or more guidelines (the `default` one when none was named). Every page
and every scrape run belongs to one guideline, and a scrape of one guideline reads and
writes only that guideline's pages: another guideline's pages, versions and index are
never touched. A page (URL) belongs to one guideline at a time. The schema is
store.schema's numbered migrations, applied when the store is opened for writing.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from guiderag.clock import utc_now
from guiderag.errors import InputError, StoreAccessError, StoreError, StoreMissingError
from guiderag.redact import redact
from guiderag.resources import is_postgres_url
from guiderag.settings import DEFAULT_GUIDELINE, check_guideline_id

from . import schema
from .connection import connect, describe, restate
from .layout import PdfLayout
from .pg import display


def content_hash(title: str, lines: Sequence[str], pdf: PdfLayout | None = None) -> str:
    """Hash of what a reader sees: the title and the text lines, not the raw HTML; for a
    PDF also where each line is printed and the file's bytes (PdfLayout.digest_parts)."""
    parts: list[Any] = [title, list(lines)]
    if pdf is not None:
        parts.append(pdf.digest_parts())
    digest = hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8"))
    return "sha256:" + digest.hexdigest()


@dataclass(frozen=True)
class PageVersion:
    """One stored version of one page: what retrieval indexes and answers cite."""

    page_id: int
    url: str
    title: str
    version: int
    fetched_at: str
    content_hash: str
    lines: tuple[str, ...]
    etag: str | None = None
    last_modified: str | None = None
    removed: bool = False
    guideline: str = DEFAULT_GUIDELINE  # the id of the guideline the page belongs to
    pdf: PdfLayout | None = None  # a PDF document: the pages of its lines, its sections

    def line(self, number: int) -> str:
        """Line `number`, counted from 1 as in citations."""
        return self.lines[number - 1]

    def summary(self) -> dict[str, Any]:
        """The page as `guiderag pages --json` and `GET /v1/pages` list it."""
        out: dict[str, Any] = {
            "url": self.url, "title": self.title, "version": self.version, "fetched_at": self.fetched_at,
            "content_hash": self.content_hash, "lines": len(self.lines), "removed": self.removed,
            "guideline": self.guideline,
        }
        if self.pdf is not None:  # a PDF document: its pages and sections
            out.update(pdf_pages=self.pdf.page_count, sections=len(self.pdf.sections))
        return out


@dataclass(frozen=True)
class FetchedPage:
    """A page the scraper fetched in this run (or found not modified: `not_modified`)."""

    url: str
    title: str = ""
    lines: tuple[str, ...] = ()
    fetched_at: str = field(default_factory=utc_now)
    etag: str | None = None
    last_modified: str | None = None
    http_status: int = 200
    not_modified: bool = False
    pdf: PdfLayout | None = None  # a PDF document: the pages of its lines, its sections


@dataclass(frozen=True)
class Guideline:
    """One guideline of the store: a table of contents and the pages scraped from it."""

    id: str
    title: str
    toc_url: str | None
    created_at: str
    removed_at: str | None = None

    @property
    def label(self) -> str:
        """What to call it for a reader: its title, else its id."""
        return self.title or self.id

    @property
    def removed(self) -> bool:
        return self.removed_at is not None


@dataclass
class RunSummary:
    """What a scrape changed, by URL."""

    run_id: int
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        return {
            "added": len(self.added),
            "changed": len(self.changed),
            "unchanged": len(self.unchanged),
            "removed": len(self.removed),
            "failed": len(self.failed),
        }

    @property
    def corpus_changed(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def describe(self) -> str:
        c = self.counts()
        text = ", ".join(f"{k} {v}" for k, v in c.items())
        if not self.corpus_changed:
            text += " (no page changed: no new version stored)"
        return text


# PostgreSQL stores this process has seen at the latest schema: later opens (one per API
# request) skip the check. (An upgrade of a shared store needs its replicas restarted.)
_CURRENT_SCHEMA: set[str] = set()


class Store:
    """The page store: an SQLite file, or a PostgreSQL database (a postgresql:// URL, shared
    by several processes). Use as a context manager or call close()."""

    def __init__(self, path: Path | str, *, create: bool = True, readonly: bool = False) -> None:
        """Open the store at `path`, creating it when `create` (and not `readonly`).

        Opened for writing, the schema is brought up to date (store.schema); `readonly`
        opens the file read-only and changes nothing, not even the schema, so the store
        must be at this guiderag's schema version already."""
        self.shared = is_postgres_url(path)
        if self.shared:
            self._open_shared(str(path), create=create, readonly=readonly)
            return
        self.path: Path | str = Path(path)
        if (readonly or not create) and (not self.path.exists() or is_empty_file(self.path)):
            # An empty file is no store either; opening it would write a schema into it.
            what = "no page store at" if not self.path.exists() else "an empty file (0 bytes), not a page store, at"
            raise StoreMissingError(
                f"{what} {self.path}: run `guiderag scrape TOC_URL` (or "
                "`guiderag scrape --sample`) first, or point --db / GUIDERAG_DB at an existing store"
            )
        self.readonly = readonly
        if not readonly:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the folder of the page store {self.path} "
                                 f"({exc.strerror or exc}): check the path and its permissions") from exc
        self.conn = connect(self.path, readonly=readonly)
        try:
            if (readonly or not create) and not self._has_tables():
                raise StoreMissingError(
                    f"{self.path} is an SQLite file without guiderag's tables, not a page store; nothing "
                    "was written to it. Point --db / GUIDERAG_DB at a store written by `guiderag scrape`"
                )
            self.conn.execute("PRAGMA foreign_keys=ON")  # (SQLite only; PostgreSQL: _open_shared)
            if readonly:
                schema.require_current(self.conn, self.path)
            else:
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
                schema.migrate(self.conn, self.path)
        except StoreAccessError as exc:
            self.conn.close()
            raise restate(exc, f"cannot open the page store {self.path}") from exc
        except BaseException:
            self.conn.close()
            raise

    def _open_shared(self, url: str, *, create: bool, readonly: bool) -> None:
        """The PostgreSQL store: its tables made or brought up to date unless read-only;
        a database without them is no store for a read-only or a non-creating open."""
        self.path = display(url)
        self.readonly = readonly
        self.conn = connect(url, readonly=readonly)
        if url in _CURRENT_SCHEMA:
            return  # this process saw it at the latest schema already
        try:
            if (readonly or not create) and not self._has_tables():
                raise StoreMissingError(
                    f"the PostgreSQL database {self.path} holds no page store yet: run `guiderag scrape "
                    "TOC_URL --db URL` (or `guiderag scrape --sample --db URL`) first"
                )
            if readonly:
                schema.require_current(self.conn, self.path)
            else:
                schema.migrate(self.conn, self.path)
            _CURRENT_SCHEMA.add(url)
        except BaseException:
            self.conn.close()
            raise

    def _has_tables(self) -> bool:
        return bool(self.conn.table_exists("pages"))

    def check_integrity(self) -> None:
        """StoreAccessError unless SQLite's quick check finds the file sound: run before a
        scrape fetches a whole site only to find it cannot write it. (A PostgreSQL server
        checks its own pages.)"""
        if self.shared:
            return
        problems = [str(r[0]) for r in self.conn.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            raise describe(self.path, sqlite3.DatabaseError("quick_check: " + "; ".join(problems)))

    # -- lifecycle ------------------------------------------------------------
    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading --------------------------------------------------------------
    def current_pages(self, *, include_removed: bool = False, guideline: str | None = None) -> list[PageVersion]:
        """The current version of every page (of one guideline, or of all), in URL order
        (removed pages left out)."""
        sql = (
            "SELECT p.id AS page_id, p.url, p.removed_at, p.guideline_id, v.* FROM pages p "
            "JOIN page_versions v ON v.page_id = p.id AND v.version = p.current_version WHERE 1 = 1 "
        )
        params: list[str] = []
        if not include_removed:
            sql += "AND p.removed_at IS NULL "
        if guideline is not None:
            sql += "AND p.guideline_id = ? "
            params.append(guideline)
        sql += "ORDER BY p.url"
        return [self._row_to_version(r) for r in self.conn.execute(sql, params)]

    def get_page(self, url: str) -> PageVersion | None:
        """The current version of one page, removed or not."""
        row = self.conn.execute(
            "SELECT p.id AS page_id, p.url, p.removed_at, p.guideline_id, v.* FROM pages p JOIN page_versions v "
            "ON v.page_id = p.id AND v.version = p.current_version WHERE p.url = ?",
            (url,),
        ).fetchone()
        return self._row_to_version(row) if row else None

    def get_version(self, url: str, version: int) -> PageVersion | None:
        """A given version of one page, for audits of what was shown back then."""
        row = self.conn.execute(
            "SELECT p.id AS page_id, p.url, p.removed_at, p.guideline_id, v.* FROM pages p JOIN page_versions v "
            "ON v.page_id = p.id WHERE p.url = ? AND v.version = ?",
            (url, version),
        ).fetchone()
        return self._row_to_version(row) if row else None

    def versions(self, url: str) -> list[PageVersion]:
        """Every stored version of one page, oldest first."""
        rows = self.conn.execute(
            "SELECT p.id AS page_id, p.url, p.removed_at, p.guideline_id, v.* FROM pages p JOIN page_versions v "
            "ON v.page_id = p.id WHERE p.url = ? ORDER BY v.version",
            (url,),
        )
        return [self._row_to_version(r) for r in rows]

    def state(self) -> str:
        """A token that changes whenever a corpus may have: a scrape committed (its run
        finished ok) or a guideline was removed. A scrape still running changes nothing
        yet, so a reader that reloads on a new token never loads a half-scraped corpus."""
        ok = self.conn.execute("SELECT MAX(id) FROM runs WHERE status = 'ok'").fetchone()[0]
        removed = self.conn.execute("SELECT COUNT(*) FROM guidelines WHERE removed_at IS NOT NULL").fetchone()[0]
        return f"run {ok or 0}; removed {removed}"

    def corpus_version(self, guideline: str | None = None) -> str:
        """A fingerprint of the current corpus (of one guideline, or of all); the index
        records the one it was built from."""
        sql = ("SELECT p.url, v.content_hash FROM pages p JOIN page_versions v "
               "ON v.page_id = p.id AND v.version = p.current_version WHERE p.removed_at IS NULL ")
        params: list[str] = []
        if guideline is not None:
            sql += "AND p.guideline_id = ? "
            params.append(guideline)
        rows = self.conn.execute(sql + "ORDER BY p.url", params).fetchall()
        digest = hashlib.sha256()
        for url, chash in rows:
            digest.update(f"{url}\t{chash}\n".encode("utf-8"))
        return "corpus:" + digest.hexdigest()[:32]

    def runs(self, guideline: str | None = None) -> list[dict]:
        """Every scrape run (of one guideline, or of all), newest first."""
        if guideline is None:
            return [dict(r) for r in self.conn.execute("SELECT * FROM runs ORDER BY id DESC")]
        return [dict(r) for r in self.conn.execute(
            "SELECT * FROM runs WHERE guideline_id = ? ORDER BY id DESC", (guideline,))]

    def last_run(self, *, status: str | None = "ok", guideline: str | None = None) -> dict | None:
        """The newest run with that status (None: any), of one guideline or of all."""
        where, params = [], []
        if status:
            where.append("status = ?")
            params.append(status)
        if guideline is not None:
            where.append("guideline_id = ?")
            params.append(guideline)
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id DESC LIMIT 1"
        row = self.conn.execute(sql, params).fetchone()
        return dict(row) if row else None

    # -- guidelines -----------------------------------------------------------
    def guidelines(self, *, include_removed: bool = False) -> list[Guideline]:
        """The store's guidelines, in id order (removed ones left out)."""
        sql = "SELECT * FROM guidelines" + ("" if include_removed else " WHERE removed_at IS NULL") + " ORDER BY id"
        return [Guideline(r["id"], r["title"], r["toc_url"], r["created_at"], r["removed_at"])
                for r in self.conn.execute(sql)]

    def get_guideline(self, gid: str) -> Guideline | None:
        row = self.conn.execute("SELECT * FROM guidelines WHERE id = ?", (gid,)).fetchone()
        return Guideline(row["id"], row["title"], row["toc_url"], row["created_at"], row["removed_at"]) if row else None

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
        for start in range(0, len(wanted), 500):  # SQLite's default limit of bound parameters
            chunk = wanted[start:start + 500]
            marks = ", ".join("?" for _ in chunk)
            rows = self.conn.execute(
                f"SELECT p.url, p.guideline_id FROM pages p JOIN guidelines g ON g.id = p.guideline_id "
                f"WHERE g.removed_at IS NULL AND p.removed_at IS NULL AND p.url IN ({marks})", chunk)
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
        with self.conn:
            cur = self.conn.execute(
                "UPDATE pages SET removed_at = ? WHERE guideline_id = ? AND removed_at IS NULL", (now, gid))
            self.conn.execute("UPDATE guidelines SET removed_at = ? WHERE id = ?", (now, gid))
        return int(cur.rowcount)

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

    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.conn:
            self.conn.execute(
                "INSERT INTO meta(key, value) VALUES(?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- writing --------------------------------------------------------------
    def begin_run(self, toc_url: str, *, guideline: str = DEFAULT_GUIDELINE) -> int:
        """Record that a scrape of `guideline` started (committed at once, so aborted runs
        are visible)."""
        check_guideline_id(guideline)
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO runs(toc_url, started_at, status, guideline_id) VALUES (?, ?, 'running', ?)",
                (redact(toc_url), utc_now(), guideline),
            )
        return _row_id(cur)

    def fail_run(self, run_id: int, message: str, *, status: str = "failed") -> None:
        """Mark a run failed or aborted; the corpus is not touched."""
        with self.conn:
            self.conn.execute(
                "UPDATE runs SET status = ?, finished_at = ?, message = ? WHERE id = ?",
                (status, utc_now(), redact(message), run_id),
            )

    def abort_unfinished_runs(self, message: str) -> list[int]:
        """Mark every run still `running` aborted; returns their ids.

        Call only while holding the scrape lock (store.lock.scrape_lock): every run is
        begun under it, so a run still `running` then is one whose process died (SIGTERM,
        kill -9, a power cut) before it could say so."""
        with self.conn:
            ids = [int(r[0]) for r in self.conn.execute("SELECT id FROM runs WHERE status = 'running'")]
            if ids:
                self.conn.execute(
                    "UPDATE runs SET status = 'aborted', finished_at = ?, message = ? WHERE status = 'running'",
                    (utc_now(), redact(message)),
                )
        return ids

    def commit_run(
        self,
        run_id: int,
        fetched: Iterable[FetchedPage],
        *,
        content_urls: Iterable[str],
        failed: dict[str, str] | None = None,
        gone: Iterable[str] = (),
        title: str | None = None,
    ) -> RunSummary:
        """Apply one scrape of the run's guideline in a single transaction.

        fetched: pages fetched (or found not modified) in this run.
        content_urls: every URL classified as content this run; the guideline's live pages
            outside it disappeared from the table of contents and are marked removed.
        failed: URL -> reason for pages that could not be fetched; their previous
            version (if any) stays current.
        gone: URLs the server says no longer exist (404 / 410): marked removed.
        title: the guideline's title (None: keep the one it has).
        Other guidelines' pages are never read or written; a fetched page another live
        guideline holds is a StoreError (the scraper refuses such a scrape before fetching).
        """
        failed = dict(failed or {})
        summary = RunSummary(run_id=run_id, failed=dict(failed))
        now = utc_now()
        content = set(content_urls)
        gone = set(gone)
        run = self.conn.execute("SELECT toc_url, guideline_id FROM runs WHERE id = ?", (run_id,)).fetchone()
        if run is None:
            raise StoreError(f"no scrape run {run_id} in {self.path} to commit")
        gid = str(run["guideline_id"])
        try:
            with self.conn:
                self.conn.execute(
                    "INSERT INTO guidelines (id, title, toc_url, created_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (id) DO UPDATE SET toc_url = excluded.toc_url, removed_at = NULL, "
                    "title = CASE WHEN ? THEN excluded.title ELSE guidelines.title END",
                    (gid, title or "", run["toc_url"], now, title is not None),
                )
                for page in fetched:
                    self._apply_fetched(page, run_id, now, summary, gid)
                live = self.conn.execute(
                    "SELECT id, url FROM pages WHERE removed_at IS NULL AND guideline_id = ?", (gid,)
                ).fetchall()
                for row in live:
                    if row["url"] in gone or (row["url"] not in content and row["url"] not in failed):
                        self.conn.execute(
                            "UPDATE pages SET removed_at = ? WHERE id = ?", (now, row["id"])
                        )
                        summary.removed.append(row["url"])
                        summary.failed.pop(row["url"], None)
                c = summary.counts()
                self.conn.execute(
                    "UPDATE runs SET status = 'ok', finished_at = ?, added = ?, changed = ?, "
                    "unchanged = ?, removed = ?, failed = ? WHERE id = ?",
                    (now, c["added"], c["changed"], c["unchanged"], c["removed"], c["failed"], run_id),
                )
        except sqlite3.DatabaseError as exc:
            # The transaction was rolled back: the previous corpus is intact.
            try:
                self.fail_run(run_id, f"store write failed: {exc}")
            except sqlite3.DatabaseError:
                pass
            failure = exc if isinstance(exc, StoreAccessError) else describe(self.path, exc)
            raise restate(failure, f"could not write the scrape to {self.path}; the previous corpus is "
                                   "unchanged") from exc
        return summary

    def _apply_fetched(self, page: FetchedPage, run_id: int, now: str, summary: RunSummary, gid: str) -> None:
        row = self.conn.execute(
            "SELECT p.id, p.current_version, p.removed_at, p.guideline_id, v.content_hash, g.removed_at AS owner_removed "
            "FROM pages p JOIN page_versions v ON v.page_id = p.id AND v.version = p.current_version "
            "LEFT JOIN guidelines g ON g.id = p.guideline_id WHERE p.url = ?",
            (page.url,),
        ).fetchone()
        if row is not None and row["guideline_id"] != gid:
            if row["owner_removed"] is None and row["removed_at"] is None:
                raise StoreError(f"{page.url} is a page of guideline {row['guideline_id']!r}, not of {gid!r}; "
                                 "a page belongs to one guideline")
            # The page of a removed guideline (or one its guideline dropped): it moves here,
            # its versions with it, and counts as added.
            self.conn.execute("UPDATE pages SET guideline_id = ?, removed_at = ? WHERE id = ?",
                              (gid, now, row["id"]))
            row = self.conn.execute(
                "SELECT p.id, p.current_version, p.removed_at, v.content_hash FROM pages p "
                "JOIN page_versions v ON v.page_id = p.id AND v.version = p.current_version WHERE p.id = ?",
                (row["id"],),
            ).fetchone()
        if page.not_modified:
            if row is None:
                summary.failed[page.url] = "304 Not Modified for a page never stored"
                return
            self.conn.execute(
                "UPDATE pages SET last_seen = ?, removed_at = NULL WHERE id = ?", (now, row["id"])
            )
            summary.unchanged.append(page.url)
            return
        chash = content_hash(page.title, page.lines, page.pdf)
        if row is None:
            cur = self.conn.execute(
                "INSERT INTO pages(url, first_seen, last_seen, current_version, guideline_id) VALUES (?, ?, ?, 1, ?)",
                (page.url, now, now, gid),
            )
            self._insert_version(_row_id(cur), 1, page, chash, run_id)
            summary.added.append(page.url)
            return
        if row["content_hash"] == chash:
            # Same text: refresh validators only, no new version.
            self.conn.execute(
                "UPDATE page_versions SET etag = ?, last_modified = ? WHERE page_id = ? AND version = ?",
                (page.etag, page.last_modified, row["id"], row["current_version"]),
            )
            self.conn.execute(
                "UPDATE pages SET last_seen = ?, removed_at = NULL WHERE id = ?", (now, row["id"])
            )
            if row["removed_at"]:
                summary.added.append(page.url)
            else:
                summary.unchanged.append(page.url)
            return
        version = int(row["current_version"]) + 1
        self._insert_version(int(row["id"]), version, page, chash, run_id)
        self.conn.execute(
            "UPDATE pages SET current_version = ?, last_seen = ?, removed_at = NULL WHERE id = ?",
            (version, now, row["id"]),
        )
        (summary.added if row["removed_at"] else summary.changed).append(page.url)

    def _insert_version(
        self, page_id: int, version: int, page: FetchedPage, chash: str, run_id: int
    ) -> None:
        self.conn.execute(
            "INSERT INTO page_versions(page_id, version, title, lines, content_hash, fetched_at, "
            "etag, last_modified, http_status, run_id, pdf_layout) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                page_id,
                version,
                page.title,
                json.dumps(list(page.lines), ensure_ascii=False),
                chash,
                page.fetched_at,
                page.etag,
                page.last_modified,
                page.http_status,
                run_id,
                page.pdf.to_json() if page.pdf is not None else None,
            ),
        )

    @staticmethod
    def _row_to_version(row: sqlite3.Row) -> PageVersion:
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


def is_empty_file(path: Path) -> bool:
    """A 0-byte file with no write-ahead log beside it: what `touch` leaves, not a store."""
    try:
        if path.stat().st_size:
            return False
        wal = path.with_name(path.name + "-wal")
        return not wal.exists() or wal.stat().st_size == 0
    except OSError:
        return False


def _row_id(cur: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just wrote."""
    if cur.lastrowid is None:  # pragma: no cover - sqlite3 sets it after every INSERT
        raise StoreError("the store did not report the id of the row it wrote")
    return int(cur.lastrowid)


def open_store(path: Path | str, *, create: bool = True) -> Store:
    """Open (or create) the store at `path`."""
    return Store(path, create=create)


def store_exists(location: Path | str) -> bool:
    """True when there is a store at `location` to open without creating one: an SQLite
    file that is not empty, or a PostgreSQL database holding guiderag's tables."""
    if is_postgres_url(location):
        conn = connect(str(location), readonly=True)
        try:
            return bool(conn.table_exists("pages"))
        finally:
            conn.close()
    path = Path(location)
    return path.exists() and not is_empty_file(path)
