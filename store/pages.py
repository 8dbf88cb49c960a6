"""The page store: `Store`, the one entry the other stages use, over an SQLite file or a
PostgreSQL database (store.backend, store.sqlite, store.pg).

A store holds one or more guidelines (the `default` one when none was named). Every page
and every scrape run belongs to one guideline, and a scrape of one guideline reads and
writes only that guideline's pages: another guideline's pages, versions and index are
never touched. A page (URL) belongs to one guideline at a time. The schema is
store.schema's numbered migrations, applied when the store is opened for writing.

`Store` is assembled from one part per reason to change: pages and their versions
(store.versions), scrape runs (store.runs), guidelines (store.guidelines); the audit log's
table is store.audit. This module opens and closes it and keeps the store's meta values.
"""
from __future__ import annotations

from pathlib import Path

from guiderag.errors import StoreAccessError

from . import schema
from .backend import Backend, Connection
from .connection import PgOptions, backend_for
from .guidelines import Guidelines
from .records import FetchedPage, Guideline, PageVersion, RunSummary, content_hash
from .runs import ScrapeRuns
from .sqlite import is_empty_file

__all__ = ["FetchedPage", "Guideline", "PageVersion", "RunSummary", "Store", "content_hash", "is_empty_file",
           "open_store", "store_exists"]

# Shared stores (PostgreSQL) this process has seen at the latest schema: later opens (one
# per API request) skip the check. (An upgrade of a shared store needs its replicas restarted.)
_CURRENT_SCHEMA: set[str] = set()


class Store(ScrapeRuns, Guidelines):
    """The page store: an SQLite file, or a PostgreSQL database (a postgresql:// URL, shared
    by several processes). Use as a context manager or call close()."""

    def __init__(self, path: Path | str, *, create: bool = True, readonly: bool = False,
                 options: PgOptions | None = None) -> None:
        """Open the store at `path`, creating it when `create` (and not `readonly`).

        Opened for writing, the schema is brought up to date (store.schema); `readonly`
        opens the file read-only and changes nothing, not even the schema, so the store
        must be at this guiderag's schema version already. A missing or empty SQLite file,
        or a database without guiderag's tables, is refused unless `create`, and nothing is
        written to it. `options`: a PostgreSQL store's pool and bounded waits (default:
        this process's, store.connection.configure)."""
        self.backend: Backend = backend_for(path, options)
        self.shared = self.backend.shared
        self.readonly = readonly
        self.path: Path | str = Path(path) if not self.shared else self.backend.location
        must_exist = readonly or not create
        self.backend.prepare_open(must_exist=must_exist, readonly=readonly)
        self.conn: Connection = self.backend.connect(readonly=readonly)
        key = str(path)
        if self.shared and key in _CURRENT_SCHEMA:
            return  # this process saw it at the latest schema already
        try:
            if must_exist and not self._has_tables():
                raise self.backend.no_store()
            if readonly:
                schema.require_current(self.conn, self.path)
            else:
                self.conn.prepare_writes()
                schema.migrate(self.conn, self.path)
        except StoreAccessError as exc:
            self.conn.close()
            raise self.backend.open_failed(exc) from exc
        except BaseException:
            self.conn.close()
            raise
        if self.shared:
            _CURRENT_SCHEMA.add(key)

    def _has_tables(self) -> bool:
        return self.conn.table_exists("pages")

    def check_integrity(self) -> None:
        """StoreAccessError unless the store's own check finds it sound (SQLite's
        quick_check): run before a scrape fetches a whole site only to find it cannot
        write it. (A PostgreSQL server checks its own pages.)"""
        self.conn.check_integrity()

    def state(self) -> str:
        """A token that changes whenever a corpus may have: a scrape committed (its run
        finished ok) or a guideline was removed. A scrape still running changes nothing
        yet, so a reader that reloads on a new token never loads a half-scraped corpus."""
        ok, removed = self.conn.execute(
            "SELECT (SELECT MAX(id) FROM runs WHERE status = 'ok'), "
            "(SELECT COUNT(*) FROM guidelines WHERE removed_at IS NOT NULL)").fetchone()
        return f"run {ok or 0}; removed {removed}"

    # -- meta -----------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute(f"SELECT value FROM meta WHERE key = {self.conn.param}", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.conn.transaction():
            self.conn.upsert("meta", {"key": key, "value": value}, key=("key",), update={"value": "excluded.value"})

    # -- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(path: Path | str, *, create: bool = True) -> Store:
    """Open (or create) the store at `path`."""
    return Store(path, create=create)


def store_exists(location: Path | str) -> bool:
    """True when there is a store at `location` to open without creating one: an SQLite
    file that is not empty, or a PostgreSQL database holding guiderag's tables."""
    return backend_for(location).exists()
