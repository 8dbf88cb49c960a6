"""The store's two backends (store.backend's Connection protocol: store/sqlite.py and
store/pg.py, the latter on a real server) behave alike where the store relies on them:
placeholders, INSERT returning the new id, upsert by key, transactions committed whole or
rolled back, the catalog, declared column types. And SQL reaches each database as written:
nothing rewrites it on the way."""
from __future__ import annotations

import psycopg
import pytest

from guiderag.store import Store
from guiderag.store.backend import ID, INTEGER, REAL, TEXT, Column, Index, Table, marks
from guiderag.store.schema import CreateTable, EnsureTable

THINGS = Table("things", (
    Column("id", ID),
    Column("name", TEXT, "NOT NULL UNIQUE"),
    Column("n", INTEGER, "NOT NULL DEFAULT 0"),
    Column("x", REAL),
), indexes=(Index("things_n", "things", ("n",)),))


@pytest.fixture()
def conn(store_at):
    with Store(store_at) as store:
        yield store.conn


def test_insert_returns_the_new_id_and_rows_read_by_name_and_position(conn) -> None:
    CreateTable(THINGS).apply(conn)
    p = conn.param
    first = conn.insert(f"INSERT INTO things (name, x) VALUES ({p}, {p})", ("a", 0.1))
    second = conn.insert(f"INSERT INTO things (name, n, x) VALUES ({marks(conn, 3)})", ("b", 2**40, 1 / 3))
    assert second == first + 1
    row = conn.execute(f"SELECT id, name, n, x FROM things WHERE id = {p}", (second,)).fetchone()
    assert (row["id"], row["name"], row["n"]) == (second, "b", 2**40) and row[1] == "b"
    assert row["x"] == pytest.approx(1 / 3, rel=1e-15)  # a REAL is double precision on both
    assert dict(row) == {"id": second, "name": "b", "n": 2**40, "x": row["x"]}
    assert [tuple(r) for r in conn.execute("SELECT name, n FROM things ORDER BY id")] == [("a", 0), ("b", 2**40)]


def test_upsert_inserts_then_updates_by_key(conn) -> None:
    CreateTable(THINGS).apply(conn)
    with conn.transaction():
        conn.upsert("things", {"name": "a", "n": 1}, key=("name",), update={"n": "excluded.n"})
        conn.upsert("things", {"name": "a", "n": 5}, key=("name",), update={"n": "excluded.n + things.n"})
        conn.upsert("things", {"name": "a", "n": 99}, key=("name",), update={})  # DO NOTHING
    assert [tuple(r) for r in conn.execute("SELECT name, n FROM things")] == [("a", 6)]


def test_a_transaction_is_committed_whole_or_rolled_back(conn) -> None:
    CreateTable(THINGS).apply(conn)
    p = conn.param
    with pytest.raises(RuntimeError):
        with conn.transaction():
            conn.execute(f"INSERT INTO things (name) VALUES ({p})", ("gone",))
            raise RuntimeError("half-way")
    with conn:  # the same, as `with conn:`
        conn.execute(f"INSERT INTO things (name) VALUES ({p})", ("kept",))
    with pytest.raises(conn.errors):  # a constraint: our bug, the backend's own error type
        with conn.transaction():
            conn.execute(f"INSERT INTO things (name) VALUES ({p})", ("x",))
            conn.execute(f"INSERT INTO things (name) VALUES ({p})", ("kept",))
    assert [r[0] for r in conn.execute("SELECT name FROM things")] == ["kept"]


def test_the_catalog_and_a_table_made_by_someone_else(conn) -> None:
    assert conn.table_exists("pages") and not conn.table_exists("things")
    with conn.transaction():
        conn.execute(f"CREATE TABLE things (id {conn.column_type(ID)}, name TEXT NOT NULL UNIQUE)")
        conn.execute(f"INSERT INTO things (name) VALUES ({conn.param})", ("old",))
    assert conn.columns("things") == {"id", "name"} and not conn.index_exists("things_n")
    with conn.schema_transaction():
        EnsureTable(THINGS).apply(conn)  # given what it lacks, its row kept
        EnsureTable(THINGS).apply(conn)  # and nothing the second time
    assert conn.columns("things") == {"id", "name", "n", "x"} and conn.index_exists("things_n")
    assert [tuple(r) for r in conn.execute("SELECT name, n, x FROM things")] == [("old", 0, None)]


def test_sql_reaches_the_database_as_written(conn) -> None:
    """The other backend's placeholder is not translated: each database reads its own."""
    other = "%s" if conn.param == "?" else "?"
    with pytest.raises(conn.errors):
        conn.execute(f"SELECT {other}", (1,)).fetchone()
    assert conn.execute(f"SELECT {conn.param}", ("一",)).fetchone()[0] == "一"
    assert conn.execute("SELECT '%' || 'x'").fetchone()[0] == "%x"  # no parameters: '%' is itself
    if conn.param == "%s":
        assert isinstance(conn.execute("SELECT pg_backend_pid()").fetchone()[0], int)
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM sqlite_master")
