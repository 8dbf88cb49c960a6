"""SQLite as the store's backend (store.backend's protocols): one file, WAL, embedded.

A damaged file (`database disk image is malformed`), a full disk, a read-only file or a
lock held too long can surface at any call on any connection to the store: the page
store's reads and writes, the audit log, the app's status line, eval's page lines. The
connection made here and its cursors turn each into a StoreAccessError whose one-line
message names the file and what to do (`describe`), so no caller can forget to. Errors
that are bugs of ours (bad SQL, wrong bindings, a closed connection, a constraint) are
left as they are: they deserve a traceback.

The store-wide locks are flock on files beside the database (store.filelock): the system
releases them when their process ends.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar
from urllib.parse import quote

from guiderag.errors import StoreAccessError, StoreError, StoreMissingError
from guiderag.redact import redact

from .backend import ID, INTEGER, REAL, TEXT, LockHeld, restate, upsert_sql
from .filelock import file_lock, lock_path

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

# How long a statement waits for another connection's write lock before SQLITE_BUSY.
BUSY_TIMEOUT_S = 30.0
# The first and the longest pause between two tries of a switch to WAL (_switch_to_wal).
WAL_RETRY_FIRST_S, WAL_RETRY_MAX_S = 0.005, 0.1

# SQLite's messages for the codes, for an error raised without its code.
_MESSAGES = (("malformed", SQLITE_CORRUPT), ("not a database", SQLITE_NOTADB), ("disk is full", SQLITE_FULL),
             ("disk i/o", SQLITE_IOERR), ("readonly", SQLITE_READONLY), ("unable to open", SQLITE_CANTOPEN),
             ("is locked", SQLITE_BUSY))

# DDL names of the column kinds (store.backend.Column): an ID is the rowid.
COLUMN_TYPES = {ID: "INTEGER PRIMARY KEY", INTEGER: "INTEGER", REAL: "REAL", TEXT: "TEXT"}

# What a lock is called in a message, by purpose.
LOCK_NAMES = {"scrape": "the scrape lock", "bootstrap": "the first-run lock"}


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
        return getattr(self.connection, "location", "") or "the page store"

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
    """The SQLite store.backend.Connection: an sqlite3.Connection (rows as sqlite3.Row)
    whose calls raise StoreAccessError for failures of the file."""

    location: str = ""
    param = "?"
    errors: tuple[type[Exception], ...] = (sqlite3.DatabaseError,)

    def cursor(self, factory: Any = GuardedCursor) -> Any:
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = (), /) -> GuardedCursor:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> GuardedCursor:
        return self.cursor().executemany(sql, parameters)

    def executescript(self, sql_script: str, /) -> GuardedCursor:
        return self.cursor().executescript(sql_script)

    def commit(self) -> None:
        _guarded(self.location, super().commit)

    def __exit__(self, *exc_info: Any) -> Any:
        return _guarded(self.location, super().__exit__, *exc_info)

    # -- store.backend.Connection -------------------------------------------------------
    def insert(self, sql: str, params: Sequence[Any] = ()) -> int:
        cur = self.execute(sql, params)
        if cur.lastrowid is None:  # pragma: no cover - sqlite3 sets it after every INSERT
            raise StoreError(f"the page store {self.location} did not report the id of the row it wrote")
        return int(cur.lastrowid)

    def upsert(self, table: str, values: Mapping[str, Any], *, key: Sequence[str],
               update: Mapping[str, str]) -> None:
        self.execute(upsert_sql(self, table, list(values), key, update), list(values.values()))

    def transaction(self) -> "GuardedConnection":
        """sqlite3's own: a write begins a transaction, the block's end commits it."""
        return self

    @contextlib.contextmanager
    def schema_transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE: the write lock first, so a second process waits for the first's
        migration and then reads the version it left."""
        self.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.commit()
        except BaseException:
            self.rollback()
            raise

    def table_exists(self, name: str) -> bool:
        row = self.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
        return row is not None

    def columns(self, table: str) -> set[str]:
        return {str(r[1]) for r in self.execute(f"PRAGMA table_info({table})")}

    def index_exists(self, name: str) -> bool:
        row = self.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (name,)).fetchone()
        return row is not None

    def column_type(self, kind: str) -> str:
        return COLUMN_TYPES[kind]

    def prepare_writes(self) -> None:
        _guarded(self.location, self._switch_to_wal)
        self.execute("PRAGMA synchronous=NORMAL")

    def _switch_to_wal(self) -> None:
        """PRAGMA journal_mode=WAL, tried again while the file is busy, for up to
        BUSY_TIMEOUT_S like any statement. Switching a file that is not in WAL mode yet (an
        old store, a new one) reads its header and then asks for the write lock without
        SQLite's busy handler: while another connection writes to it, or switches it too
        (two processes opening it at once), the switch fails at once with "database is
        locked". SQLite's own errors are raised (prepare_writes describes them)."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        pause = WAL_RETRY_FIRST_S
        while True:
            cursor = sqlite3.Cursor(self)  # not GuardedCursor: the retry needs SQLite's code
            try:
                cursor.execute("PRAGMA journal_mode=WAL").fetchall()
                return
            except sqlite3.OperationalError as exc:
                if _code(exc) != SQLITE_BUSY or time.monotonic() + pause >= deadline:
                    raise
            finally:
                cursor.close()
            time.sleep(pause)
            pause = min(2 * pause, WAL_RETRY_MAX_S)

    def check_integrity(self) -> None:
        problems = [str(r[0]) for r in self.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            raise describe(self.location, sqlite3.DatabaseError("quick_check: " + "; ".join(problems)))


    def failure(self, exc: Exception) -> StoreAccessError:
        return exc if isinstance(exc, StoreAccessError) else describe(self.location, exc)


def is_empty_file(path: Path) -> bool:
    """A 0-byte file with no write-ahead log beside it: what `touch` leaves, not a store."""
    try:
        if path.stat().st_size:
            return False
        wal = path.with_name(path.name + "-wal")
        return not wal.exists() or wal.stat().st_size == 0
    except OSError:
        return False


class SqliteBackend:
    """The store in an SQLite file (store.backend.Backend)."""

    name = "sqlite"
    shared = False

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.location = str(path)

    def prepare_open(self, *, must_exist: bool, readonly: bool) -> None:
        if must_exist and (not self.path.exists() or is_empty_file(self.path)):
            # An empty file is no store either; opening it would write a schema into it.
            what = "no page store at" if not self.path.exists() else "an empty file (0 bytes), not a page store, at"
            raise StoreMissingError(
                f"{what} {self.path}: run `guiderag scrape TOC_URL` (or "
                "`guiderag scrape --sample`) first, or point --db / GUIDERAG_DB at an existing store"
            )
        if not readonly:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the folder of the page store {self.path} "
                                 f"({exc.strerror or exc}): check the path and its permissions") from exc

    def connect(self, *, readonly: bool = False) -> GuardedConnection:
        """The file opened (mode=ro when `readonly`: SQLite then writes nothing to it)."""
        target = "file:" + quote(str(self.path.resolve())) + "?mode=ro" if readonly else str(self.path)
        try:
            conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_S, check_same_thread=False, uri=readonly,
                                   factory=GuardedConnection)
        except sqlite3.DatabaseError as exc:
            if is_store_failure(exc):
                raise describe(self.location, exc) from exc
            raise
        assert isinstance(conn, GuardedConnection)
        conn.location = self.location
        conn.row_factory = sqlite3.Row
        try:
            conn.execute("PRAGMA foreign_keys=ON")
        except BaseException:
            conn.close()
            raise
        return conn

    def no_store(self) -> StoreMissingError:
        return StoreMissingError(
            f"{self.path} is an SQLite file without guiderag's tables, not a page store; nothing "
            "was written to it. Point --db / GUIDERAG_DB at a store written by `guiderag scrape`"
        )

    def open_failed(self, exc: Exception) -> Exception:
        if isinstance(exc, StoreAccessError):
            return restate(exc, f"cannot open the page store {self.path}")
        return exc

    def exists(self) -> bool:
        return self.path.exists() and not is_empty_file(self.path)

    def held(self, purpose: str) -> bool:
        """A shared flock tried on <db>.<purpose>.lock (and let go at once): refused while
        a live process holds the lock."""
        try:
            fd = os.open(lock_path(self.path, purpose), os.O_RDONLY)
        except FileNotFoundError:
            return False  # never taken here
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # lets go of the shared lock, if it was taken
        return False

    @contextlib.contextmanager
    def lock(self, purpose: str, *, wait: bool) -> Iterator[None]:
        """flock on <db>.<purpose>.lock; the file says who holds it, for the message."""
        path = lock_path(self.path, purpose)
        with contextlib.ExitStack() as stack:
            try:
                handle = stack.enter_context(file_lock(path, wait=wait, what=LOCK_NAMES.get(purpose, "the lock")))
            except BlockingIOError:
                holder = path.read_text(encoding="utf-8", errors="replace").strip() or "another process"
                raise LockHeld(holder) from None
            handle.seek(0)
            handle.truncate()
            started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            handle.write(f"pid {os.getpid()}, started {started}")
            handle.flush()
            try:
                yield
            finally:
                handle.seek(0)
                handle.truncate()
