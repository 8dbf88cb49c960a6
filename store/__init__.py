"""The versioned page store: SQLite (WAL), embedded, one file.

A scrape writes all of its results in one transaction, so a failure half-way leaves the
last good corpus as it was. Pages are never deleted: a page that disappears is marked
removed, and every changed text becomes a new version.
"""
from .pages import (
    FetchedPage,
    PageVersion,
    RunSummary,
    Store,
    content_hash,
    open_store,
)

__all__ = ["FetchedPage", "PageVersion", "RunSummary", "Store", "content_hash", "open_store"]
