"""`guiderag pages`, and the printed report of `guiderag scrape` (see ../shared/CONTRACT.md).

The scrape command itself (scrape, then rebuild the index) is guiderag.commands: it spans
two stages.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from guiderag.settings import Settings
from guiderag.store.pages import Store

from .run import ScrapeReport


def _say(text: str) -> None:
    print(text, file=sys.stderr)


def print_report(report: ScrapeReport) -> None:
    """The scrape's notes and summary: notes on stderr, the two summary lines on stdout."""
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
    rows: list[dict[str, Any]] = [
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
