"""The versioned page store: SQLite (WAL), embedded, one file.

A scrape writes all of its results in one transaction, so a failure half-way leaves the
last good corpus as it was. Pages are never deleted: a page that disappears is marked
removed, and every changed text becomes a new version. A store holds one or more
guidelines, each page belonging to one; the schema is a list of numbered migrations
(store.schema).
"""
from . import schema
from .pages import (
    FetchedPage,
    Guideline,
    PageVersion,
    RunSummary,
    Store,
    content_hash,
    open_store,
)

__all__ = ["FetchedPage", "Guideline", "PageVersion", "RunSummary", "Store", "content_hash", "open_store"]
