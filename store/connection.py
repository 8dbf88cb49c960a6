"""The store's SQLite connection: every SQLite failure becomes one StoreAccessError.

A damaged file (`database disk image is malformed`), a full disk, a read-only file or a
lock held too long can surface at any call on any connection to the store: the page
store's reads and writes, the audit log, the app's status line, eval's page lines. The
connection made here (`connect`) and its cursors turn each into a StoreAccessError whose
one-line message names the file and what to do (`describe`), so no caller can forget to.
Errors that are bugs of ours (bad SQL, wrong bindings, a closed connection, a constraint)
are left as they are: they deserve a traceback.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Callable, TypeVar
from urllib.parse import quote

from guiderag.errors import StoreAccessError
from guiderag.redact import redact
from guiderag.resources import is_postgres_url

T = TypeVar("T")

# SQLite's primary result codes (https://sqlite.org/rescode.html).
SQLITE_ERROR, SQLITE_PERM, SQLITE_BUSY, SQLITE_LOCKED = 1, 3, 5, 6
SQLITE_NOMEM, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CORRUPT = 7, 8, 10, 11
SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_PROTOCOL, SQLITE_NOTADB = 13, 14, 15, 26

DAMAGED = frozenset({SQLITE_CORRUPT, SQLITE_NOTADB})
STORAGE = frozenset({SQLITE_IOERR, SQLITE_FULL, SQLITE_NOMEM})
ACCESS = frozenset({SQLITE_PERM, SQLITE_READONLY, SQLITE_CANTOPEN})
BUSY = frozenset({SQLITE_BUSY, SQLITE_LOCKED, SQLITE_PROTOCOL})
# SQLITE_ERROR is also what our own bad SQL gives; only these mean "not our schema".
FOREIGN_SCHEMA = ("no such table", "no such column")


# SQLite's messages for the codes, for an error raised without its code.
_MESSAGES = (("malformed", SQLITE_CORRUPT), ("not a database", SQLITE_NOTADB), ("disk is full", SQLITE_FULL),
             ("disk i/o", SQLITE_IOERR), ("readonly", SQLITE_READONLY), ("unable to open", SQLITE_CANTOPEN),
             ("is locked", SQLITE_BUSY))


def _code(exc: BaseException) -> int:
    """SQLite's primary result code of `exc` (from its message when it carries none)."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code:
        return code
    text = str(exc).lower()
    return next((c for needle, c in _MESSAGES if needle in text), 0)


def is_store_failure(exc: BaseException) -> bool:
    """True for SQLite errors that say something about the file, not about our code."""
    if isinstance(exc, StoreAccessError) or not isinstance(exc, sqlite3.DatabaseError):
        return False
    if isinstance(exc, (sqlite3.ProgrammingError, sqlite3.IntegrityError, sqlite3.InterfaceError)):
        return False
    code = _code(exc)
    if code in DAMAGED | STORAGE | ACCESS | BUSY:
        return True
    if code == SQLITE_ERROR:
        return str(exc).startswith(FOREIGN_SCHEMA)
    # No code (an older sqlite3 module): decide by class, as sqlite3 maps the codes.
    return code == 0 and type(exc) in (sqlite3.DatabaseError, sqlite3.OperationalError)


def describe(path: Path | str, exc: BaseException) -> StoreAccessError:
    """The one-line StoreAccessError for an SQLite failure on the store at `path`."""
    reason = redact(" ".join(str(exc).split())) or type(exc).__name__
    code = _code(exc)
    check = f"`sqlite3 {path} 'PRAGMA integrity_check'`"
    if code in STORAGE:
        what = f"reading or writing the page store {path} failed"
        advice = (f"free disk space and check the disk, then check the store with {check}; restore it "
                  "from a backup if that fails")
    elif code in ACCESS:
        what = f"cannot open or write the page store {path}"
        advice = "check the permissions of the file, of its -wal and -shm files and of its folder"
    elif code in BUSY:
        what = f"the page store {path} stayed locked by another process"
        advice = "try again when that process is done"
    elif code == SQLITE_ERROR:
        what = f"the page store {path} lacks guiderag's tables"
        advice = ("it is damaged or not a store written by guiderag: restore it from a backup, or point "
                  "--db / GUIDERAG_DB elsewhere")
    else:
        what = f"the page store {path} is damaged"
        advice = (f"restore it from a backup, or check it with {check} (`.recover` in the sqlite3 shell "
                  "saves what is still readable)")
    return StoreAccessError(f"{what} ({reason}): {advice}", path=str(path), reason=reason, advice=advice)


def restate(exc: StoreAccessError, lead: str) -> StoreAccessError:
    """The same failure told from the caller's side: "<lead> (<reason>). <Advice>"."""
    advice = exc.advice[:1].upper() + exc.advice[1:]
    return StoreAccessError(f"{lead} ({exc.reason}). {advice}", path=exc.path, reason=exc.reason,
                            advice=exc.advice)


def _guarded(path: Path | str, call: Callable[..., T], *args: Any) -> T:
    try:
        return call(*args)
    except sqlite3.DatabaseError as exc:
        if is_store_failure(exc):
            raise describe(path, exc) from exc
        raise


class GuardedCursor(sqlite3.Cursor):
    """A cursor whose SQLite failures are StoreAccessErrors (also while iterating rows:
    a damaged page is often met half-way through a result)."""

    def _path(self) -> str:
        return getattr(self.connection, "store_path", "") or "the page store"

    def execute(self, sql: str, parameters: Any = (), /) -> "GuardedCursor":
        _guarded(self._path(), super().execute, sql, parameters)
        return self

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> "GuardedCursor":
        _guarded(self._path(), super().executemany, sql, seq_of_parameters)
        return self

    def executescript(self, sql_script: str, /) -> "GuardedCursor":
        _guarded(self._path(), super().executescript, sql_script)
        return self

    def fetchone(self) -> Any:
        return _guarded(self._path(), super().fetchone)

    def fetchmany(self, size: int | None = None) -> list[Any]:
        if size is None:
            return _guarded(self._path(), super().fetchmany)
        return _guarded(self._path(), super().fetchmany, size)

    def fetchall(self) -> list[Any]:
        return _guarded(self._path(), super().fetchall)

    def __next__(self) -> Any:
        return _guarded(self._path(), super().__next__)


class GuardedConnection(sqlite3.Connection):
    """sqlite3.Connection whose calls raise StoreAccessError for failures of the file."""

    store_path: str = ""
    dialect = "sqlite"

    def table_exists(self, name: str) -> bool:
        """True when the file holds a table `name`."""
        return table_exists(self, name)

    def columns(self, table: str) -> set[str]:
        """The column names of `table`."""
        return columns(self, table)

    def cursor(self, factory: Any = GuardedCursor) -> Any:
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> GuardedCursor:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> GuardedCursor:
        return self.cursor().executemany(sql, parameters)

    def executescript(self, sql_script: str, /) -> GuardedCursor:
        return self.cursor().executescript(sql_script)

    def commit(self) -> None:
        _guarded(self.store_path, super().commit)

    def __exit__(self, *exc_info: Any) -> Any:
        return _guarded(self.store_path, super().__exit__, *exc_info)


def table_exists(conn: Any, name: str) -> bool:
    """True when the store behind `conn` (sqlite3, or store.pg's connection) has table `name`."""
    if getattr(conn, "dialect", "sqlite") != "sqlite":
        return bool(conn.table_exists(name))
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
    return row is not None


def columns(conn: Any, table: str) -> set[str]:
    """The column names of `table` in the store behind `conn`."""
    if getattr(conn, "dialect", "sqlite") != "sqlite":
        return set(conn.columns(table))
    return {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}


# PostgreSQL: the advisory lock a schema change takes in its transaction (store.schema's
# migrations, the audit log's table): CREATE TABLE IF NOT EXISTS is not safe against another
# transaction doing the same at once there, as it is in SQLite (one writer at a time).
SCHEMA_LOCK_KEY = 0x67756964  # "guid"


def lock_schema(conn: Any) -> None:
    """Inside a transaction (`with conn:`): wait until no other process changes the schema."""
    if getattr(conn, "dialect", "sqlite") != "sqlite":
        conn.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK_KEY,)).fetchone()


def connect(path: Path | str, *, timeout: float = 30.0, readonly: bool = False) -> Any:
    """Open the store at `path`: an SQLite file (rows as sqlite3.Row) through
    GuardedConnection, or a postgresql:// URL through store.pg.PgConnection, which offers
    the same surface. `readonly` opens the file with mode=ro (SQLite then writes nothing to
    it), or the PostgreSQL session read-only."""
    if is_postgres_url(path):
        from .pg import PgConnection  # psycopg: only for a shared store

        return PgConnection(str(path), readonly=readonly, connect_timeout=timeout)
    target = "file:" + quote(str(Path(path).resolve())) + "?mode=ro" if readonly else str(path)
    try:
        conn = sqlite3.connect(target, timeout=timeout, check_same_thread=False, uri=readonly,
                               factory=GuardedConnection)
    except sqlite3.DatabaseError as exc:
        if is_store_failure(exc):
            raise describe(path, exc) from exc
        raise
    assert isinstance(conn, GuardedConnection)
    conn.store_path = str(path)
    conn.row_factory = sqlite3.Row
    return conn
