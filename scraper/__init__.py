"""The web-guideline scraper: TOC -> links -> classify -> fetch -> text as lines -> store.

`scrape(config, store, toc_url, *, urls_xlsx=None, guideline=None) -> RunSummary` is the
whole job (config: the stage's ScraperConfig; store: the StoreConfig saying where the
corpus is; guideline: a GuidelineScope, else the store's default one). The names are
loaded on first use, so that the PDF worker (`python -m guiderag.scraper.pdf`) starts
without the fetching and storing half of the package.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .run import scrape, scrape_site

__all__ = ["scrape", "scrape_site"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
