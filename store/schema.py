"""The store's schema as numbered migrations: the one list of them, applied in order.

A store records the migrations applied to it in `schema_migrations` (version, description,
applied_at). Opening a store for writing applies the missing ones, all in ONE transaction
(a failure leaves the store as it was); a store that records a version this guiderag does
not know was written by a newer one and is refused. A store from before this mechanism
(no `schema_migrations` table) is at version 0: migration 1 creates its tables only where
they are missing, so it opens unchanged and gains the later migrations.

The same list runs on every backend (store.backend). Rules for a new migration:
- append it with the next number; never edit or reorder one that shipped;
- additive only (new tables, columns with a DEFAULT or nullable, indexes, data copied
  forward), so an older reader of the same rows keeps working;
- a step is plain SQL that both SQLite and PostgreSQL read alike, one statement per
  string, no SQLite-only syntax (no PRAGMA, no `ADD COLUMN IF NOT EXISTS`, no
  `INSERT OR ...`), TEXT the only column type named in it; a table, or a column of
  another type, is declared (`CreateTable`, `AddColumn` with a backend.Column, whose
  type each backend names: an `id` is SQLite's rowid and PostgreSQL's identity column,
  a REAL there DOUBLE PRECISION);
- `EnsureTable` is for a table an older guiderag made outside the migrations (1: the
  tables from before them; 3: the audit log, once made with its first row): created
  when missing, else given the columns and indexes it lacks, its rows kept.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Union

from guiderag.clock import utc_now
from guiderag.errors import StoreError, StoreVersionError

from .backend import ID, INTEGER, REAL, TEXT, Column, Connection, Index, Table


@dataclass(frozen=True)
class CreateTable:
    """A new table (and its indexes)."""

    table: Table

    def apply(self, conn: Connection) -> None:
        conn.execute(self.table.ddl(conn))
        for index in self.table.indexes:
            conn.execute(index.ddl())


@dataclass(frozen=True)
class AddColumn:
    """A new column of an existing table, as declared (NOT NULL needs a DEFAULT)."""

    table: str
    column: Column

    def apply(self, conn: Connection) -> None:
        conn.execute(f"ALTER TABLE {self.table} ADD COLUMN {self.column.ddl(conn)}")


@dataclass(frozen=True)
class EnsureTable:
    """A table an older guiderag may have made outside the migrations: created when
    missing; else the columns it lacks are added (nullable, as rows exist) and the
    indexes it lacks made. Its rows and any column of its own are kept."""

    table: Table

    def apply(self, conn: Connection) -> None:
        table = self.table
        if not conn.table_exists(table.name):
            conn.execute(table.ddl(conn))
        else:
            have = conn.columns(table.name)
            for column in table.columns:
                if column.name in have:
                    continue
                if column.type == ID:
                    raise StoreError(f"the table {table.name} of the page store {conn.location} has no "
                                     f"{column.name} column: it was not written by guiderag; restore the "
                                     "store from a backup")
                conn.execute(f"ALTER TABLE {table.name} ADD COLUMN {column.added_ddl(conn)}")
        for index in table.indexes:
            if not conn.index_exists(index.name):
                conn.execute(index.ddl())


Step = Union[str, CreateTable, AddColumn, EnsureTable]


@dataclass(frozen=True)
class Migration:
    """One step of the schema: its number, what it does, its steps (SQL or declared)."""

    version: int
    description: str
    statements: tuple[Step, ...]


def apply_step(conn: Connection, step: Step) -> None:
    if isinstance(step, str):
        conn.execute(step)
    else:
        step.apply(conn)


# The tables of migration 1, as guiderag made them before there were migrations.
PAGES = Table("pages", (
    Column("id", ID),
    Column("url", TEXT, "NOT NULL UNIQUE"),
    Column("first_seen", TEXT, "NOT NULL"),
    Column("last_seen", TEXT, "NOT NULL"),
    Column("removed_at", TEXT),
    Column("current_version", INTEGER, "NOT NULL"),
))
RUNS = Table("runs", (
    Column("id", ID),
    Column("toc_url", TEXT, "NOT NULL"),
    Column("started_at", TEXT, "NOT NULL"),
    Column("finished_at", TEXT),
    Column("status", TEXT, "NOT NULL"),  # running | ok | failed | aborted
    Column("added", INTEGER, "NOT NULL DEFAULT 0"),
    Column("changed", INTEGER, "NOT NULL DEFAULT 0"),
    Column("unchanged", INTEGER, "NOT NULL DEFAULT 0"),
    Column("removed", INTEGER, "NOT NULL DEFAULT 0"),
    Column("failed", INTEGER, "NOT NULL DEFAULT 0"),
    Column("message", TEXT),
))
PAGE_VERSIONS = Table("page_versions", (
    Column("id", ID),
    Column("page_id", INTEGER, "NOT NULL REFERENCES pages(id)"),
    Column("version", INTEGER, "NOT NULL"),
    Column("title", TEXT, "NOT NULL"),
    Column("lines", TEXT, "NOT NULL"),  # JSON array of strings: the unit of citation
    Column("content_hash", TEXT, "NOT NULL"),  # "sha256:<hex>" of title and lines
    Column("fetched_at", TEXT, "NOT NULL"),
    Column("etag", TEXT),
    Column("last_modified", TEXT),
    Column("http_status", INTEGER),
    Column("run_id", INTEGER, "REFERENCES runs(id)"),
), constraints=("UNIQUE (page_id, version)",))
META = Table("meta", (
    Column("key", TEXT, "PRIMARY KEY"),
    Column("value", TEXT, "NOT NULL"),
))

# The audit log (chatbot.audit writes it, store.audit holds its SQL): one row per answer.
# Before migration 3 the chatbot made it with its first row and added missing columns
# itself: such a table is kept, rows and all, and given what it lacks.
AUDIT = Table("audit", (
    Column("id", ID),
    Column("asked_at", TEXT, "NOT NULL"),  # ISO-8601 UTC with milliseconds
    Column("question", TEXT, "NOT NULL"),  # as answered (cleaned, possibly capped)
    Column("question_norm", TEXT, "NOT NULL"),  # NFKC, whitespace collapsed: what gaps groups by
    Column("keywords", TEXT, "NOT NULL"),  # JSON list
    Column("requested_mode", TEXT),
    Column("mode", TEXT),  # the mode that produced the answer (after any fallback)
    Column("model", TEXT),  # the answer model (lines, generate)
    Column("keywords_model", TEXT),  # the keywords model, when keywords came from one
    Column("pipeline", TEXT),
    Column("threshold", REAL),
    Column("top_score", REAL),
    Column("scores", TEXT),  # JSON: candidate pages with scores
    Column("corpus_version", TEXT),
    Column("shown", TEXT, "NOT NULL"),  # JSON: [{url, version, lines, content_hash}]
    Column("answer", TEXT),  # the exact answer text shown
    Column("summary", TEXT),  # generate mode: the model's text
    Column("unsupported", TEXT),  # JSON: flagged generated sentences
    Column("coverage", TEXT, "NOT NULL"),  # governed | not_governed | error
    Column("error", TEXT),
    Column("latency_ms", REAL),
    Column("answer_json", TEXT),  # the full answer object (without audit_id)
    Column("guideline", TEXT),  # id of the guideline answered from (none: no guideline governs)
    Column("routing", TEXT),  # JSON: how that guideline was chosen (chatbot.routing)
    Column("model_use", TEXT),  # JSON: what each model asked did (outcome, why, what was shown)
    Column("model_replies", TEXT),  # JSON: the models' raw replies, by role (never shown)
), indexes=(Index("audit_coverage", "audit", ("coverage", "question_norm")),))

# Columns later migrations added to the audit table, in order (store.audit reads them too).
AUDIT_CONVERSATION = "conversation"
AUDIT_ADDED: tuple[str, ...] = (AUDIT_CONVERSATION,)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "pages, their versions, scrape runs and meta (the schema before migrations)", (
        EnsureTable(PAGES), EnsureTable(RUNS), EnsureTable(PAGE_VERSIONS), EnsureTable(META),
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
    Migration(3, "PDF documents: the page(s) each stored line is printed on, sections, removed lines", (
        # JSON (store.layout.PdfLayout); NULL for an HTML page. Kept with each version,
        # as its lines are: a citation names the PDF page of the version it quotes.
        "ALTER TABLE page_versions ADD COLUMN pdf_layout TEXT",
    )),

    Migration(4, "the audit log: one row per answer (a table made by an older guiderag with its first "
                 "row is kept and given the columns it lacks)", (
        EnsureTable(AUDIT),
    )),

    # Issue 20: a guideline's coverage decision fitted to its own labelled questions.
    Migration(5, "coverage calibrations: a guideline's coverage decision fitted to its own questions", (
        """CREATE TABLE coverage_calibrations (
            guideline_id   TEXT PRIMARY KEY,
            corpus_version TEXT NOT NULL,
            fitted_at      TEXT NOT NULL,
            model          TEXT NOT NULL,
            summary        TEXT NOT NULL
        )""",
    )),

    # Issue 21: a follow-up's audit row records the conversation it was read with (JSON:
    # the earlier questions, how the question was read, what was carried); NULL for a
    # question asked alone.
    Migration(6, "conversations: the history a follow-up was read with and what it carried, in its audit row", (
        f"ALTER TABLE audit ADD COLUMN {AUDIT_CONVERSATION} TEXT",
    )),
)
LATEST = MIGRATIONS[-1].version

# What a store records of its migrations. (`version` is declared an ID as it always was:
# an identity column in PostgreSQL, given explicit values.)
BOOKKEEPING = Table("schema_migrations", (
    Column("version", ID),
    Column("description", TEXT, "NOT NULL"),
    Column("applied_at", TEXT, "NOT NULL"),
))


def _check_list() -> None:
    numbers = [m.version for m in MIGRATIONS]
    if numbers != list(range(1, len(MIGRATIONS) + 1)):  # pragma: no cover - a developer's slip
        raise RuntimeError(f"store migrations must be numbered 1, 2, 3... in order, not {numbers}")


_check_list()


def schema_version(conn: Connection) -> int:
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


def migrate(conn: Connection, path: Path | str) -> list[int]:
    """Apply the migrations the store lacks, in one transaction; return their numbers.

    The schema lock is taken first (conn.schema_transaction(): SQLite's BEGIN IMMEDIATE,
    PostgreSQL's transaction-wide advisory lock) and the version read again inside it, so
    two processes opening an old store at once migrate it once. PostgreSQL's DDL runs
    inside the same transaction as SQLite's."""
    refuse_newer(schema_version(conn), path)
    if schema_version(conn) == LATEST:
        return []
    with conn.schema_transaction():
        return _apply(conn, path)


def _apply(conn: Connection, path: Path | str) -> list[int]:
    """The missing migrations, inside the caller's transaction."""
    current = schema_version(conn)
    refuse_newer(current, path)
    EnsureTable(BOOKKEEPING).apply(conn)
    applied = []
    p = conn.param
    for migration in MIGRATIONS:
        if migration.version <= current:
            continue
        for step in migration.statements:
            apply_step(conn, step)
        conn.execute(
            f"INSERT INTO schema_migrations (version, description, applied_at) VALUES ({p}, {p}, {p})",
            (migration.version, migration.description, utc_now()),
        )
        applied.append(migration.version)
    return applied


def require_current(conn: Connection, path: Path | str) -> None:
    """For a read-only open, which must not migrate: the store must be at LATEST."""
    version = schema_version(conn)
    refuse_newer(version, path)
    if version < LATEST:
        raise StoreVersionError(
            f"the page store {path} has schema version {version}, older than this guiderag's "
            f"{LATEST}, and this command only reads it; run another guiderag command on it once "
            "(e.g. `guiderag guidelines`), which upgrades it, then try again"
        )
