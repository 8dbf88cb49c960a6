"""The web-guideline scraper: TOC -> links -> classify -> fetch -> text as lines -> store.

`scrape(settings, toc_url, *, urls_xlsx=None) -> RunSummary` is the whole job.
"""
from .run import scrape, scrape_site

__all__ = ["scrape", "scrape_site"]
