"""The store's schema migrations (store/schema.py): old stores open and keep working, a
newer one is refused, migrations apply once and all together, read-only opens write nothing."""
from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from pathlib import Path

import pytest

from guiderag.errors import StoreVersionError
from guiderag.store import FetchedPage, Store, schema

# What guiderag wrote before stores had guidelines and schema versions (one site a store),
# with the audit table the chatbot adds: a store like this must open and keep working.
OLD_SCHEMA = """
CREATE TABLE pages (id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE, first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL, removed_at TEXT, current_version INTEGER NOT NULL);
CREATE TABLE page_versions (id INTEGER PRIMARY KEY, page_id INTEGER NOT NULL REFERENCES pages(id),
    version INTEGER NOT NULL, title TEXT NOT NULL, lines TEXT NOT NULL, content_hash TEXT NOT NULL,
    fetched_at TEXT NOT NULL, etag TEXT, last_modified TEXT, http_status INTEGER,
    run_id INTEGER REFERENCES runs(id), UNIQUE (page_id, version));
CREATE TABLE runs (id INTEGER PRIMARY KEY, toc_url TEXT NOT NULL, started_at TEXT NOT NULL,
    finished_at TEXT, status TEXT NOT NULL, added INTEGER NOT NULL DEFAULT 0,
    changed INTEGER NOT NULL DEFAULT 0, unchanged INTEGER NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0, message TEXT);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE audit (id INTEGER PRIMARY KEY, asked_at TEXT NOT NULL, question TEXT NOT NULL,
    question_norm TEXT NOT NULL, keywords TEXT NOT NULL, shown TEXT NOT NULL, coverage TEXT NOT NULL);
INSERT INTO runs VALUES (1, 'http://old.example/guide/index.html', '2026-01-01T00:00:00Z',
    '2026-01-01T00:01:00Z', 'ok', 2, 0, 0, 0, 0, NULL);
INSERT INTO pages VALUES (1, 'http://old.example/guide/q1.html', '2026-01-01T00:00:10Z',
    '2026-01-01T00:00:10Z', NULL, 1);
INSERT INTO pages VALUES (2, 'http://old.example/guide/q2.html', '2026-01-01T00:00:20Z',
    '2026-01-01T00:00:20Z', NULL, 1);
INSERT INTO page_versions VALUES (1, 1, 1, 'Q1 胸腺腫', '["Q1 胸腺腫", "胸腺腫は胸腺の腫瘍です。"]',
    'sha256:aa', '2026-01-01T00:00:10Z', NULL, NULL, 200, 1);
INSERT INTO page_versions VALUES (2, 2, 1, 'Q2 手術', '["Q2 手術", "手術が治療の中心です。"]',
    'sha256:bb', '2026-01-01T00:00:20Z', NULL, NULL, 200, 1);
INSERT INTO audit VALUES (1, '2026-01-02T00:00:00Z', '胸腺腫とは', '胸腺腫とは', '[]', '[]', 'governed');
"""


def old_store(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SCHEMA)
    conn.close()
    return path


def old_corpus_version(path: Path) -> str:
    """The corpus version as guiderag computed it before guidelines (its index records it)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT p.url, v.content_hash FROM pages p JOIN page_versions v ON v.page_id = p.id "
            "AND v.version = p.current_version WHERE p.removed_at IS NULL ORDER BY p.url").fetchall()
    conn.close()
    digest = hashlib.sha256()
    for url, chash in rows:
        digest.update(f"{url}\t{chash}\n".encode("utf-8"))
    return "corpus:" + digest.hexdigest()[:32]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_old_store_opens_as_the_default_guideline_and_keeps_its_corpus_version(tmp_path: Path) -> None:
    db = old_store(tmp_path / "old.db")
    before = old_corpus_version(db)
    with Store(db) as store:
        assert schema.schema_version(store.conn) == schema.LATEST
        [g] = store.guidelines()
        assert (g.id, g.toc_url, g.created_at) == ("default", "http://old.example/guide/index.html",
                                                   "2026-01-01T00:00:10Z")
        pages = store.current_pages()
        assert [p.url for p in pages] == ["http://old.example/guide/q1.html", "http://old.example/guide/q2.html"]
        assert {p.guideline for p in pages} == {"default"}
        # the index built from the old store stays valid: same fingerprint of the same pages
        assert store.corpus_version() == store.corpus_version("default") == before
        assert store.resolve_guideline() == "default"
        assert store.conn.execute("SELECT COUNT(*) FROM audit").fetchone()[0] == 1  # untouched
        applied = [r[0] for r in store.conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
        assert applied == [m.version for m in schema.MIGRATIONS]
        # and it keeps working: a new scrape of the default guideline
        run = store.begin_run("http://old.example/guide/index.html")
        page = FetchedPage(url="http://old.example/guide/q3.html", title="Q3", lines=("Q3", "新しいページです。"))
        summary = store.commit_run(run, [page], content_urls=[p.url for p in pages] + [page.url],
                                   failed={p.url: "kept" for p in pages})
        assert summary.added == [page.url]
    with Store(db) as store:  # a second open applies nothing
        assert schema.migrate(store.conn, db) == []


def test_a_store_from_a_newer_guiderag_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    Store(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (?, 'from the future', '2030-01-01T00:00:00Z')",
                     (schema.LATEST + 1,))
    conn.close()
    before = digest(db)
    for readonly in (False, True):
        with pytest.raises(StoreVersionError, match="newer guiderag"):
            Store(db, readonly=readonly)
    assert digest(db) == before


def test_migrations_apply_in_one_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A migration failing half-way leaves the store exactly as it was (no new table, no
    new column, no version recorded)."""
    db = old_store(tmp_path / "old.db")
    broken = schema.Migration(schema.LATEST + 1, "broken", ("CREATE TABLE later (x INTEGER)", "NOT SQL AT ALL"))
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS + (broken,))
    monkeypatch.setattr(schema, "LATEST", broken.version)
    with pytest.raises(Exception):
        Store(db)
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        columns = {r[1] for r in conn.execute("PRAGMA table_info(pages)")}
    conn.close()
    assert "later" not in tables and "guidelines" not in tables and "schema_migrations" not in tables
    assert "guideline_id" not in columns


def test_two_processes_opening_an_old_store_at_once_migrate_it_once(tmp_path: Path) -> None:
    db = old_store(tmp_path / "old.db")
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            Store(db).close()
        except BaseException as exc:  # pragma: no cover - the failure being tested for
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with Store(db) as store:
        versions = [r[0] for r in store.conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
        assert versions == [m.version for m in schema.MIGRATIONS]
        assert len(store.guidelines()) == 1


def test_opening_an_old_store_while_another_connection_writes_to_it_waits_for_it(tmp_path: Path) -> None:
    """Switching a store that is not in WAL mode yet asks for SQLite's write lock without its
    busy handler: the open waits for another connection's write (here 0.3 s), as any
    statement does, instead of failing at once with "database is locked" (which also hit
    two processes opening an old store at once)."""
    import time

    db = old_store(tmp_path / "old.db")
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO meta VALUES ('written', 'by another connection')")
    done = threading.Timer(0.3, other.execute, ("COMMIT",))
    started = time.monotonic()
    done.start()
    try:
        with Store(db) as store:
            waited = time.monotonic() - started
            assert store.get_meta("written") == "by another connection"
            assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        done.join()
        other.close()
    assert waited >= 0.25


def test_a_read_only_open_writes_nothing_and_wants_a_current_schema(tmp_path: Path) -> None:
    db = old_store(tmp_path / "old.db")
    before = digest(db)
    with pytest.raises(StoreVersionError, match="older than this guiderag"):
        Store(db, readonly=True)
    assert digest(db) == before
    Store(db).close()  # a writing open upgrades it
    before = digest(db)
    with Store(db, readonly=True) as store:
        assert len(store.current_pages()) == 2
        with pytest.raises(sqlite3.DatabaseError, match="readonly"):
            store.conn.execute("DELETE FROM pages")
    assert digest(db) == before


def test_migrations_are_plain_additive_sql() -> None:
    """The rules store/schema.py states, kept: numbered in order, one statement a string,
    nothing SQLite-only, no column type but TEXT named in SQL (a declared step names the
    others per backend), and EnsureTable only for the tables an older guiderag made
    outside the migrations."""
    assert [m.version for m in schema.MIGRATIONS] == list(range(1, len(schema.MIGRATIONS) + 1))
    for m in schema.MIGRATIONS:
        for step in m.statements:
            if not isinstance(step, str):
                assert isinstance(step, (schema.CreateTable, schema.AddColumn, schema.EnsureTable)), step
                if isinstance(step, schema.EnsureTable):
                    # migration 1 (the schema before migrations), and the audit table an older
                    # guiderag created with its first row
                    assert m.version == 1 or step.table.name == "audit", (m.version, step.table.name)
                continue
            assert ";" not in step.replace("';'", ""), (m.version, step)
            upper = step.upper()
            assert "DROP " not in upper and "PRAGMA" not in upper and "INSERT OR" not in upper
            assert "IF NOT EXISTS" not in upper
            assert not re.search(r"\b(INTEGER|REAL|BIGINT|DOUBLE|SERIAL)\b", upper), (m.version, step)


def test_a_fresh_store_is_born_at_the_latest_schema(tmp_path: Path) -> None:
    with Store(tmp_path / "fresh.db") as store:
        assert schema.schema_version(store.conn) == schema.LATEST
        assert store.guidelines() == []  # a guideline exists once something is scraped into it
        assert store.resolve_guideline() == "default"
