"""Stores as older guiderags left them, written with the database's own driver (sqlite3,
psycopg) in the SQL those versions ran, for the upgrade tests (tests/test_store_upgrade.py).

Before migration 3 the audit table was made by the chatbot with its first answer
(`CREATE TABLE IF NOT EXISTS audit ...` with the columns of the day) and a later guiderag
added the columns it missed (`ALTER TABLE audit ADD COLUMN name`, typeless in SQLite).
A PostgreSQL store got the same SQL translated by the old store.pg (INTEGER PRIMARY KEY
an identity column, INTEGER BIGINT, REAL DOUBLE PRECISION).
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

# The schema of guiderag before 3 (migrations 1 and 2, as their SQL read), per backend.
_V2 = """
CREATE TABLE IF NOT EXISTS pages (
    id              {id},
    url             TEXT NOT NULL UNIQUE,
    first_seen      TEXT NOT NULL,
    last_seen       TEXT NOT NULL,
    removed_at      TEXT,
    current_version {int} NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id          {id},
    toc_url     TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    status      TEXT NOT NULL,
    added       {int} NOT NULL DEFAULT 0,
    changed     {int} NOT NULL DEFAULT 0,
    unchanged   {int} NOT NULL DEFAULT 0,
    removed     {int} NOT NULL DEFAULT 0,
    failed      {int} NOT NULL DEFAULT 0,
    message     TEXT
);
CREATE TABLE IF NOT EXISTS page_versions (
    id            {id},
    page_id       {int} NOT NULL REFERENCES pages(id),
    version       {int} NOT NULL,
    title         TEXT NOT NULL,
    lines         TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    fetched_at    TEXT NOT NULL,
    etag          TEXT,
    last_modified TEXT,
    http_status   {int},
    run_id        {int} REFERENCES runs(id),
    UNIQUE (page_id, version)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     {id},
    description TEXT NOT NULL,
    applied_at  TEXT NOT NULL
);
CREATE TABLE guidelines (
    id          TEXT PRIMARY KEY,
    title       TEXT NOT NULL DEFAULT '',
    toc_url     TEXT,
    created_at  TEXT NOT NULL,
    removed_at  TEXT
);
ALTER TABLE pages ADD COLUMN guideline_id TEXT NOT NULL DEFAULT 'default';
ALTER TABLE runs ADD COLUMN guideline_id TEXT NOT NULL DEFAULT 'default';
CREATE INDEX pages_guideline ON pages (guideline_id, url);
INSERT INTO schema_migrations (version, description, applied_at) VALUES (1, 'pages', '2026-11-30T00:00:00Z');
INSERT INTO schema_migrations (version, description, applied_at) VALUES (2, 'guidelines', '2026-12-01T00:00:00Z');
INSERT INTO runs (toc_url, started_at, finished_at, status, added) VALUES
    ('http://old.example/guide/index.html', '2026-12-01T00:00:00Z', '2026-12-01T00:01:00Z', 'ok', 2);
INSERT INTO pages (url, first_seen, last_seen, current_version) VALUES
    ('http://old.example/guide/q1.html', '2026-12-01T00:00:10Z', '2026-12-01T00:00:10Z', 1);
INSERT INTO pages (url, first_seen, last_seen, current_version) VALUES
    ('http://old.example/guide/q2.html', '2026-12-01T00:00:20Z', '2026-12-01T00:00:20Z', 1);
INSERT INTO page_versions (page_id, version, title, lines, content_hash, fetched_at, http_status, run_id) VALUES
    (1, 1, 'Q1 胸腺腫', '["Q1 胸腺腫", "胸腺腫は胸腺の腫瘍です。"]', 'sha256:aa', '2026-12-01T00:00:10Z', 200, 1);
INSERT INTO page_versions (page_id, version, title, lines, content_hash, fetched_at, http_status, run_id) VALUES
    (2, 1, 'Q2 手術', '["Q2 手術", "手術が治療の中心です。"]', 'sha256:bb', '2026-12-01T00:00:20Z', 200, 1);
INSERT INTO guidelines (id, title, toc_url, created_at) VALUES
    ('default', '', 'http://old.example/guide/index.html', '2026-12-01T00:00:10Z')
"""

# The audit table of guiderag at #15 (PostgreSQL's first): every column of today's but
# model_use and model_replies, in its order. The first one (2026-11-29) lacked keywords_model,
# guideline and routing too.
_AUDIT_AT_15 = (("id", "{id}"), ("asked_at", "TEXT NOT NULL"), ("question", "TEXT NOT NULL"),
                ("question_norm", "TEXT NOT NULL"), ("keywords", "TEXT NOT NULL"), ("requested_mode", "TEXT"),
                ("mode", "TEXT"), ("model", "TEXT"), ("keywords_model", "TEXT"), ("pipeline", "TEXT"),
                ("threshold", "{real}"), ("top_score", "{real}"), ("scores", "TEXT"), ("corpus_version", "TEXT"),
                ("shown", "TEXT NOT NULL"), ("answer", "TEXT"), ("summary", "TEXT"), ("unsupported", "TEXT"),
                ("coverage", "TEXT NOT NULL"), ("error", "TEXT"), ("latency_ms", "{real}"), ("answer_json", "TEXT"),
                ("guideline", "TEXT"), ("routing", "TEXT"))
_NOT_IN_FIRST = ("keywords_model", "guideline", "routing")
AUDITS = ("none", "first", "altered", "at-15")


def _audit_table(audit: str) -> str:
    columns = [(n, t) for n, t in _AUDIT_AT_15 if audit == "at-15" or n not in _NOT_IN_FIRST]
    return ("CREATE TABLE IF NOT EXISTS audit (" + ", ".join(f"{n} {t}" for n, t in columns) + ");\n"
            "CREATE INDEX IF NOT EXISTS audit_coverage ON audit(coverage, question_norm)")


_TYPES = {
    "sqlite": {"id": "INTEGER PRIMARY KEY", "int": "INTEGER", "real": "REAL"},
    "postgresql": {"id": "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", "int": "BIGINT",
                   "real": "DOUBLE PRECISION"},
}

AUDIT_ROWS = [  # (question, coverage, threshold, error): what old answers wrote
    ("胸腺腫とは", "governed", 0.2, None),
    ("糖尿病の食事療法を教えてください", "not_governed", 0.2, None),
    ("糖尿病の食事療法を教えてください", "not_governed", 0.2, None),
    ("検査は？", "error", None, "HTTP 500 from the model"),
]


def _statements(script: str, backend: str) -> list[str]:
    text = script.format(**_TYPES[backend])
    return [s.strip() for s in text.split(";") if s.strip()]


def _audit_inserts(with_keywords_model: bool) -> list[tuple[str, tuple[Any, ...]]]:
    rows = []
    for i, (question, coverage, threshold, error) in enumerate(AUDIT_ROWS):
        cols = ["asked_at", "question", "question_norm", "keywords", "mode", "threshold", "shown", "coverage",
                "error", "answer_json"]
        values: list[Any] = [f"2026-12-01T0{i}:00:00.000Z", question, question, '["胸腺腫"]', "extract", threshold,
                             "[]", coverage, error, '{"answer": "old"}']
        if with_keywords_model:
            cols.append("keywords_model")
            values.append("kw-model" if i % 2 else None)
        rows.append((", ".join(cols), tuple(values)))
    return rows


def make_old_store(location: Path | str, audit: str) -> None:
    """A store at schema version 2 as guiderag left it, at `location` (an SQLite file or a
    fresh PostgreSQL database), with `audit` one of AUDITS: "none" (no answer ever written),
    "first" (the first audit table, 21 columns), "altered" (that table given keywords_model
    by the old ALTER path) or "at-15" (the table of #15, without model_use and
    model_replies); each but "none" holds the rows of AUDIT_ROWS."""
    backend = "postgresql" if str(location).startswith("postgresql://") else "sqlite"
    statements = _statements(_V2, backend)
    if audit != "none":
        statements += _statements(_audit_table(audit), backend)
        if audit == "altered":  # what the old AuditLog._prepare ran (PostgreSQL wants a type)
            statements.append("ALTER TABLE audit ADD COLUMN keywords_model" + (" TEXT" if backend == "postgresql" else ""))
    mark = "%s" if backend == "postgresql" else "?"
    inserts = []
    if audit != "none":
        for cols, values in _audit_inserts(audit in ("altered", "at-15")):
            inserts.append((f"INSERT INTO audit ({cols}) VALUES ({', '.join([mark] * len(values))})", values))
    if backend == "sqlite":
        conn = sqlite3.connect(location)
        try:
            with conn:
                for sql in statements:
                    conn.execute(sql)
                for sql, values in inserts:
                    conn.execute(sql, values)
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(str(location), autocommit=True) as pg, pg.transaction():
        for sql in statements:
            pg.execute(sql)
        for sql, values in inserts:
            pg.execute(sql, values)


def raw_rows(location: Path | str, table: str, order: str = "id") -> list[dict[str, Any]]:
    """Every row of `table` in `order`, read with the database's own driver."""
    if str(location).startswith("postgresql://"):
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(str(location), row_factory=dict_row) as pg:
            return list(pg.execute(f"SELECT * FROM {table} ORDER BY {order}"))
    conn = sqlite3.connect(location)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY {order}")]
    finally:
        conn.close()


def raw_schema(location: Path | str) -> list[tuple[str, str]]:
    """(table, column) of every table in the store, to see that nothing changed."""
    if str(location).startswith("postgresql://"):
        import psycopg

        with psycopg.connect(str(location)) as pg:
            return [tuple(r) for r in pg.execute(
                "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = "
                "current_schema() ORDER BY table_name, ordinal_position")]
    conn = sqlite3.connect(location)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return [(t, str(c[1])) for t in tables for c in conn.execute(f"PRAGMA table_info({t})")]
    finally:
        conn.close()
