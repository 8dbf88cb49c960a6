"""`guiderag scrape` and `guiderag pages` (see ../shared/CONTRACT.md)."""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections import Counter

from guiderag.errors import GuiderageError, InputError
from guiderag.settings import Settings
from store.pages import Store

from .run import ScrapeReport, rebuild_index, scrape_site


def _say(text: str) -> None:
    print(text, file=sys.stderr)


def run_scrape(args: argparse.Namespace, settings: Settings) -> int:
    """Scrape a TOC URL (or the bundled sample), print the summary, rebuild the index."""
    if args.sample and args.toc_url:
        raise InputError("give either a table-of-contents URL or --sample, not both")
    if not args.sample and not args.toc_url:
        raise InputError("give the table-of-contents URL to scrape (or --sample for the bundled sample guideline)")
    if args.sample:
        sample = importlib.import_module("scraper.sample")
        if getattr(args, "delay", None) is None:
            settings = settings.replace(delay_s=0.0)  # our own loopback server: no one to be polite to
        with sample.serve_sample_site() as toc_url:
            report = scrape_site(settings, toc_url, urls_xlsx=args.urls_xlsx,
                                 public_site=settings.sample_site_url)
    else:
        report = scrape_site(settings, args.toc_url, urls_xlsx=args.urls_xlsx)
    _print_report(report)
    if report.summary.corpus_changed and not args.no_index:
        try:
            if rebuild_index(settings, _say):
                _say("retrieval index rebuilt")
        except GuiderageError as exc:
            _say(f"guiderag: error: the scrape was stored, but rebuilding the index failed: {exc}. "
                 "Run `guiderag index` to retry")
            return 1
    return 0


def _print_report(report: ScrapeReport) -> None:
    s = report.summary
    for note in report.notes:
        _say(note)
    counts = Counter(r.category for r in report.links)
    _say("links by category: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for url, reason in sorted(s.failed.items()):
        _say(f"failed: {url}: {reason}")
    c = s.counts()
    print(f"scraped {report.toc_url}: {report.content_count} content pages of {len(report.links)} links")
    print(f"added {c['added']}, changed {c['changed']}, unchanged {c['unchanged']}, "
          f"removed {c['removed']}, failed {c['failed']}")
    if not s.corpus_changed:
        print("no page changed: no new version stored")


def run_pages(args: argparse.Namespace, settings: Settings) -> int:
    """List the stored pages (current version of each)."""
    with Store(settings.db, create=False) as store:
        pages = store.current_pages(include_removed=bool(args.all))
    rows = [
        {"url": p.url, "title": p.title, "version": p.version, "fetched_at": p.fetched_at,
         "content_hash": p.content_hash, "lines": len(p.lines), "removed": p.removed}
        for p in pages
    ]
    if args.json:
        print(json.dumps({"pages": rows}, ensure_ascii=False, indent=1))
        return 0
    if not rows:
        print("no pages stored" + ("" if args.all else " (try --all for removed pages)"))
        return 0
    for r in rows:
        mark = " [removed]" if r["removed"] else ""
        print(f"{r['url']}\tv{r['version']}\t{r['lines']} lines\t{r['fetched_at']}\t"
              f"{r['content_hash'][:19]}\t{r['title']}{mark}")
    print(f"{len(rows)} pages", file=sys.stderr)
    return 0
