"""How a store is reached: the backend for its location, and the options of a shared one.

`backend_for(location)` is an SQLite file's backend (store/sqlite.py) or, for a
postgresql:// URL, PostgreSQL's (store/pg.py, imported only then): the one way a store is
reached (Store, `store_exists` and the locks use it; `connect(location)` is one connection
of it). Both implement store.backend's protocols.

A PostgreSQL store's pool size and bounded waits (`PgOptions`) are the process's: its
pool is shared by every Store it opens. Each entry point applies the store stage's config
it loaded (`configure(settings.storage)`: the CLI, the chat app, the API, eval's workers); a
process that never did (a script) reads it from the environment, so GUIDERAG_PG_* apply
wherever a PostgreSQL store is opened. The store stage is handed its own config
(guiderag.scopes.StoreConfig), never the whole Settings.
"""
from __future__ import annotations

from pathlib import Path

from guiderag.registry import config_from_env
from guiderag.resources import is_postgres_url
from guiderag.scopes import StoreConfig

from .backend import Backend, Connection, PgOptions, restate

_configured: PgOptions | None = None


def configure(config: StoreConfig) -> None:
    """Apply the store stage's config to every PostgreSQL store this process opens from now
    on (its pool size and bounded waits; a pool made with other options stays with its
    connections)."""
    global _configured
    _configured = PgOptions.from_config(config)


def pg_options() -> PgOptions:
    """This process's options: configured, else from the environment and the defaults."""
    if _configured is not None:
        return _configured
    return PgOptions.from_config(config_from_env(StoreConfig, "store"))


def backend_for(location: Path | str, options: PgOptions | None = None) -> Backend:
    """The backend of the store at `location`: a postgresql:// URL, else an SQLite file."""
    if is_postgres_url(location):
        from .pg import PgBackend  # psycopg: only for a shared store

        return PgBackend(str(location), options or pg_options())
    from .sqlite import SqliteBackend

    return SqliteBackend(location)


def connect(location: Path | str, *, readonly: bool = False, options: PgOptions | None = None) -> Connection:
    """Open the store at `location` (module docstring); `readonly` opens the SQLite file
    with mode=ro (SQLite then writes nothing to it), or the PostgreSQL session read-only."""
    return backend_for(location, options).connect(readonly=readonly)


__all__ = ["PgOptions", "backend_for", "configure", "connect", "pg_options", "restate"]
