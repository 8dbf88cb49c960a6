"""What the store needs of a database: two small protocols, each implemented by SQLite
(store/sqlite.py, the embedded default) and by PostgreSQL (store/pg.py, a shared store).

A `Backend` is a store's location: it opens connections to it, holds the store-wide locks
(one scrape at a time, one first-run build at a time: a file lock beside an SQLite file,
an advisory lock in PostgreSQL) and says whether a store is there. A `Connection` runs the
store's SQL in its backend's own syntax: the placeholder of a bound value is
`conn.param` ("?" or "%s"), an INSERT that makes an id returns it (`insert`), a row
written or updated by key is `upsert`, a transaction is `with conn.transaction():` (or
`with conn:`), the schema's migrations run in `schema_transaction()` (which holds the
store's schema lock), and what a table holds is asked of the catalog (`table_exists`,
`columns`, `index_exists`). Column types in DDL are named by kind (`Column`, `Table`) and
each backend names them in its own words (`column_type`). No SQL text is rewritten on
its way to a database, and nothing above this layer asks which backend it talks to.

Failures of the database (a damaged file, a full disk, a server that cannot be reached or
does not answer in time) are StoreAccessError (guiderag.errors) on both; errors that are
our own bugs (bad SQL, a constraint) keep their backend's type (`Connection.errors`).
`restate` tells such a failure from a caller's side. `PgOptions` is what a process asks of
a shared (PostgreSQL) store: its pool size and bounded waits.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ContextManager, Iterator, Mapping, Protocol, Sequence

from guiderag.errors import StoreAccessError

if TYPE_CHECKING:
    from guiderag.settings import Settings

# Column kinds (Column.type): each backend names them (Connection.column_type).
ID = "id"  # the table's integer key, assigned by the database when an INSERT leaves it out
INTEGER = "integer"
REAL = "real"
TEXT = "text"
KINDS = (ID, INTEGER, REAL, TEXT)


@dataclass(frozen=True)
class Column:
    """One column of a table: its name, kind (ID, INTEGER, REAL, TEXT) and constraints in
    words both backends read alike (NOT NULL, UNIQUE, DEFAULT ..., REFERENCES t(id))."""

    name: str
    type: str
    constraints: str = ""

    def __post_init__(self) -> None:
        if self.type not in KINDS:  # pragma: no cover - a developer's slip
            raise ValueError(f"column {self.name}: type must be one of {KINDS}, not {self.type!r}")

    def ddl(self, conn: "Connection") -> str:
        return " ".join(p for p in (self.name, conn.column_type(self.type), self.constraints) if p)

    def added_ddl(self, conn: "Connection") -> str:
        """The column as ALTER TABLE ... ADD COLUMN adds it to a table that has rows: without
        NOT NULL unless it has a DEFAULT (a NOT NULL column without one cannot be added)."""
        words = self.constraints
        if "DEFAULT" not in words.upper():
            words = " ".join(w for w in words.replace("NOT NULL", "").split())
        return " ".join(p for p in (self.name, conn.column_type(self.type), words) if p)


@dataclass(frozen=True)
class Index:
    """An index of a table on some of its columns."""

    name: str
    table: str
    columns: tuple[str, ...]

    def ddl(self) -> str:
        return f"CREATE INDEX {self.name} ON {self.table} ({', '.join(self.columns)})"


@dataclass(frozen=True)
class Table:
    """A table as the schema declares it: columns, table constraints, indexes."""

    name: str
    columns: tuple[Column, ...]
    constraints: tuple[str, ...] = ()
    indexes: tuple[Index, ...] = ()

    def ddl(self, conn: "Connection") -> str:
        parts = [c.ddl(conn) for c in self.columns] + list(self.constraints)
        return f"CREATE TABLE {self.name} (\n    " + ",\n    ".join(parts) + "\n)"

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


@dataclass(frozen=True)
class PgOptions:
    """What a process asks of its connections to a PostgreSQL store (guiderag.settings:
    pg_pool_size, pg_connect_timeout_s, pg_statement_timeout_s, pg_pool_timeout_s)."""

    pool_size: int
    connect_timeout_s: int
    statement_timeout_s: float
    pool_timeout_s: float

    @classmethod
    def from_settings(cls, settings: "Settings") -> "PgOptions":
        store = settings.storage  # the store stage's own config
        return cls(pool_size=store.pg_pool_size, connect_timeout_s=store.pg_connect_timeout_s,
                   statement_timeout_s=store.pg_statement_timeout_s, pool_timeout_s=store.pg_pool_timeout_s)


class Cursor(Protocol):
    """The result of one statement: rows read by column name or by position."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """One open connection to a store (module docstring)."""

    location: str  # the store as messages name it (a URL without its password)
    param: str  # the placeholder of one bound value in this backend's SQL
    errors: tuple[type[Exception], ...]  # what a failed statement raises (StoreAccessError among them)

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> Cursor:
        """Run one statement (a write belongs inside `transaction()`: SQLite would otherwise
        leave it uncommitted, PostgreSQL commit it at once)."""
        ...

    def insert(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run an INSERT into a table with an ID column; return the new row's id."""
        ...

    def upsert(self, table: str, values: Mapping[str, Any], *, key: Sequence[str],
               update: Mapping[str, str]) -> None:
        """Insert `values`, or when a row with the same `key` columns exists, set its
        columns to the SQL expressions of `update` (`excluded.<column>` is the new value)."""
        ...

    def transaction(self) -> ContextManager[Any]:
        """One transaction: committed when the block ends, rolled back when it raises."""
        ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc_info: Any) -> Any: ...

    def schema_transaction(self) -> ContextManager[Any]:
        """A transaction holding the store's schema lock: two processes migrating one store
        at once take turns, and the second finds the work done."""
        ...

    def table_exists(self, name: str) -> bool: ...

    def columns(self, table: str) -> set[str]: ...

    def index_exists(self, name: str) -> bool: ...

    def column_type(self, kind: str) -> str:
        """How this backend's DDL names a column kind (ID, INTEGER, REAL, TEXT)."""
        ...

    def prepare_writes(self) -> None:
        """Session settings for a store opened for writing (SQLite: WAL journal)."""
        ...

    def check_integrity(self) -> None:
        """StoreAccessError unless the store's own check finds it sound (SQLite's
        quick_check; a PostgreSQL server checks its own pages)."""
        ...

    def failure(self, exc: Exception) -> StoreAccessError:
        """A StoreAccessError for `exc`, one of `errors` a statement raised, told as a
        failure of the store (what a failed write reports)."""
        ...

    def close(self) -> None: ...


class LockHeld(Exception):
    """Backend.lock(wait=False) found the lock held; `holder` says by whom, for a message."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


class Backend(Protocol):
    """A store's location and what is done to it as a whole (module docstring)."""

    name: str  # "sqlite" or "postgresql"
    location: str  # the store as messages name it
    shared: bool  # several processes or machines may use it at once (PostgreSQL)

    def prepare_open(self, *, must_exist: bool, readonly: bool) -> None:
        """Before connecting: StoreMissingError when `must_exist` and no store can be there
        (SQLite: no file, or an empty one; nothing is written); the file's folder made
        when opening for writing."""
        ...

    def connect(self, *, readonly: bool = False) -> Connection: ...

    def no_store(self) -> Exception:
        """The StoreMissingError for a database that holds no guiderag tables."""
        ...

    def open_failed(self, exc: Exception) -> Exception:
        """The error a failed open reports for `exc` (a StoreAccessError met opening it)."""
        ...

    def exists(self) -> bool:
        """True when there is a store to open without creating one."""
        ...

    def lock(self, purpose: str, *, wait: bool) -> ContextManager[None]:
        """Hold the store's lock named `purpose` ("scrape", "bootstrap") for a block: wait
        for it, or raise LockHeld at once. Released when its process ends, however it ends."""
        ...

    def held(self, purpose: str) -> bool:
        """Whether a live process holds the lock named `purpose` now, without taking it or
        writing anything."""
        ...


def marks(conn: Connection, count: int) -> str:
    """`count` placeholders, comma-separated: the values of an INSERT or an IN (...)."""
    return ", ".join([conn.param] * count)


def upsert_sql(conn: Connection, table: str, columns: Sequence[str], key: Sequence[str],
               update: Mapping[str, str]) -> str:
    """INSERT ... ON CONFLICT (key) DO UPDATE SET ...: what SQLite (3.24+) and PostgreSQL
    both read; each Connection.upsert runs it with its own placeholders."""
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks(conn, len(columns))}) " \
          f"ON CONFLICT ({', '.join(key)}) DO "
    if not update:
        return sql + "NOTHING"
    return sql + "UPDATE SET " + ", ".join(f"{column} = {expr}" for column, expr in update.items())


def restate(exc: StoreAccessError, lead: str) -> StoreAccessError:
    """The same failure told from the caller's side: "<lead> (<reason>). <Advice>", of the
    same type (a StoreTimeoutError stays one, with which wait ran out)."""
    advice = exc.advice[:1].upper() + exc.advice[1:]
    told = copy.copy(exc)
    told.args = (f"{lead} ({exc.reason}). {advice}",)
    return told
