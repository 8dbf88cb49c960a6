"""The versioned page store: SQLite (WAL, one file) embedded by default, PostgreSQL when shared.

A scrape writes all of its results in one transaction, so a failure half-way leaves the
last good corpus as it was. Pages are never deleted: a page that disappears is marked
removed, and every changed text becomes a new version. A store holds one or more
guidelines, each page belonging to one; the schema is a list of numbered migrations
(store.schema). `Store` (store.pages) is the entry; the two databases implement the
protocols of store.backend (store.sqlite, store.pg).
"""
from . import schema
from .connection import configure
from .pages import (
    FetchedPage,
    Guideline,
    PageVersion,
    RunSummary,
    Store,
    content_hash,
    open_store,
    store_exists,
)

__all__ = ["FetchedPage", "Guideline", "PageVersion", "RunSummary", "Store", "configure", "content_hash",
           "open_store", "schema", "store_exists"]
