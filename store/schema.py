"""The store's schema as numbered migrations: the one list of them, applied in order.

A store records the migrations applied to it in `schema_migrations` (version, description,
applied_at). Opening a store for writing applies the missing ones, all in ONE transaction
(a failure leaves the store as it was); a store that records a version this guiderag does
not know was written by a newer one and is refused. A store from before this mechanism
(no `schema_migrations` table) is at version 0: migration 1 creates its tables only where
they are missing, so it opens unchanged and gains the later migrations.

Rules for a new migration (another store backend reuses this list):
- append it with the next number; never edit or reorder one that shipped;
- additive only (new tables, columns with a DEFAULT, indexes, data copied forward), so an
  older reader of the same rows keeps working;
- plain SQL, one statement per string, no SQLite-only syntax (no PRAGMA, no
  `ADD COLUMN IF NOT EXISTS`, no `INSERT OR ...`): what PostgreSQL also runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guiderag.clock import utc_now
from guiderag.errors import StoreVersionError

from .connection import lock_schema


@dataclass(frozen=True)
class Migration:
    """One step of the schema: its number, what it does, its SQL statements."""

    version: int
    description: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "pages, their versions, scrape runs and meta (the schema before migrations)", (
        """CREATE TABLE IF NOT EXISTS pages (
            id              INTEGER PRIMARY KEY,
            url             TEXT NOT NULL UNIQUE,
            first_seen      TEXT NOT NULL,
            last_seen       TEXT NOT NULL,
            removed_at      TEXT,
            current_version INTEGER NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS runs (
            id          INTEGER PRIMARY KEY,
            toc_url     TEXT NOT NULL,
            started_at  TEXT NOT NULL,
            finished_at TEXT,
            status      TEXT NOT NULL,            -- running | ok | failed | aborted
            added       INTEGER NOT NULL DEFAULT 0,
            changed     INTEGER NOT NULL DEFAULT 0,
            unchanged   INTEGER NOT NULL DEFAULT 0,
            removed     INTEGER NOT NULL DEFAULT 0,
            failed      INTEGER NOT NULL DEFAULT 0,
            message     TEXT
        )""",
        """CREATE TABLE IF NOT EXISTS page_versions (
            id            INTEGER PRIMARY KEY,
            page_id       INTEGER NOT NULL REFERENCES pages(id),
            version       INTEGER NOT NULL,
            title         TEXT NOT NULL,
            lines         TEXT NOT NULL,          -- JSON array of strings: the unit of citation
            content_hash  TEXT NOT NULL,          -- "sha256:<hex>" of title and lines
            fetched_at    TEXT NOT NULL,
            etag          TEXT,
            last_modified TEXT,
            http_status   INTEGER,
            run_id        INTEGER REFERENCES runs(id),
            UNIQUE (page_id, version)
        )""",
        """CREATE TABLE IF NOT EXISTS meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        )""",
    )),
    Migration(2, "guidelines: several in one store, each page and run belonging to one", (
        """CREATE TABLE guidelines (
            id          TEXT PRIMARY KEY,
            title       TEXT NOT NULL DEFAULT '',
            toc_url     TEXT,
            created_at  TEXT NOT NULL,
            removed_at  TEXT
        )""",
        "ALTER TABLE pages ADD COLUMN guideline_id TEXT NOT NULL DEFAULT 'default'",
        "ALTER TABLE runs ADD COLUMN guideline_id TEXT NOT NULL DEFAULT 'default'",
        "CREATE INDEX pages_guideline ON pages (guideline_id, url)",
        # A store that already holds a site: it becomes the default guideline.
        """INSERT INTO guidelines (id, title, toc_url, created_at)
            SELECT 'default', '',
                   (SELECT r.toc_url FROM runs r WHERE r.status = 'ok' ORDER BY r.id DESC LIMIT 1),
                   MIN(p.first_seen)
            FROM pages p HAVING COUNT(*) > 0""",
    )),
    # Issue 20 (STATUS.md reserves the number 5 for it; numbered here after the migrations
    # this branch has, the lead renumbers at merge): a guideline's own coverage decision.
    Migration(3, "coverage calibrations: a guideline's coverage decision fitted to its own questions", (
        """CREATE TABLE coverage_calibrations (
            guideline_id   TEXT PRIMARY KEY,
            corpus_version TEXT NOT NULL,   -- the corpus version it was fitted on
            fitted_at      TEXT NOT NULL,
            model          TEXT NOT NULL,   -- JSON: the coverage model, its operating point included
            summary        TEXT NOT NULL    -- JSON: the question set, what was refitted, the curve
        )""",
    )),
)
LATEST = MIGRATIONS[-1].version

BOOKKEEPING = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version     INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at  TEXT NOT NULL
)"""


def _check_list() -> None:
    numbers = [m.version for m in MIGRATIONS]
    if numbers != list(range(1, len(MIGRATIONS) + 1)):  # pragma: no cover - a developer's slip
        raise RuntimeError(f"store migrations must be numbered 1, 2, 3... in order, not {numbers}")


_check_list()


def schema_version(conn: Any) -> int:
    """The highest migration recorded in the store; 0 for a store from before migrations."""
    if not conn.table_exists("schema_migrations"):
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def refuse_newer(version: int, path: Path | str) -> None:
    """StoreVersionError when the store records a schema this guiderag does not know."""
    if version > LATEST:
        raise StoreVersionError(
            f"the page store {path} has schema version {version}, written by a newer guiderag "
            f"(this one knows versions up to {LATEST}); nothing was changed. Upgrade guiderag to "
            "use this store, or point --db / GUIDERAG_DB at another one"
        )


def migrate(conn: Any, path: Path | str) -> list[int]:
    """Apply the migrations the store lacks, in one transaction; return their numbers.

    The write lock is taken first (SQLite: BEGIN IMMEDIATE; PostgreSQL: a transaction-wide
    advisory lock) and the version read again inside it, so two processes opening an old
    store at once migrate it once. PostgreSQL runs the same statements (store.pg translates
    the column types), its DDL inside the same transaction."""
    refuse_newer(schema_version(conn), path)
    if schema_version(conn) == LATEST:
        return []
    if conn.dialect != "sqlite":
        with conn:
            lock_schema(conn)
            return _apply(conn, path)
    conn.execute("BEGIN IMMEDIATE")
    try:
        applied = _apply(conn, path)
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return applied


def _apply(conn: Any, path: Path | str) -> list[int]:
    """The missing migrations, inside the caller's transaction."""
    current = schema_version(conn)
    refuse_newer(current, path)
    conn.execute(BOOKKEEPING)
    applied = []
    for migration in MIGRATIONS:
        if migration.version <= current:
            continue
        for statement in migration.statements:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)",
            (migration.version, migration.description, utc_now()),
        )
        applied.append(migration.version)
    return applied


def require_current(conn: Any, path: Path | str) -> None:
    """For a read-only open, which must not migrate: the store must be at LATEST."""
    version = schema_version(conn)
    refuse_newer(version, path)
    if version < LATEST:
        raise StoreVersionError(
            f"the page store {path} has schema version {version}, older than this guiderag's "
            f"{LATEST}, and this command only reads it; run another guiderag command on it once "
            "(e.g. `guiderag guidelines`), which upgrades it, then try again"
        )
