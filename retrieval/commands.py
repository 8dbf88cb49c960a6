"""CLI commands of the retrieval stage: `guiderag index` and `guiderag bench`."""
from __future__ import annotations

import argparse
import json
import sys

from guiderag.errors import InputError
from guiderag.progress import ProgressReporter
from guiderag.settings import GuidelineScope, Settings


def run_index(args: argparse.Namespace, settings: Settings) -> int:
    """(Re)build the retrieval index of one guideline (--guideline), or of each guideline
    of the store, from the stored corpus, and swap each in."""
    from guiderag.store import Store

    from .build import build_index

    with Store(settings.store, create=False) as store:
        if settings.storage.guideline:
            ids = [store.resolve_guideline(settings.storage.guideline)]
        else:
            counts = store.page_counts()
            ids = [g.id for g in store.guidelines() if counts.get(g.id)]
    targets: list[GuidelineScope | None] = [settings.guideline_scope(gid) for gid in ids]
    for target in targets or [None]:  # none: building the store's only one says why
        info = build_index(settings.retrieval, settings.storage, target,
                           progress=ProgressReporter(enabled=settings.cli.progress))
        print(info.describe(), file=sys.stderr)
    return 0


def parse_sizes(text: str) -> list[int]:
    """"100,1000,10000" -> [100, 1000, 10000]; InputError on anything else."""
    try:
        sizes = [int(s) for s in str(text).split(",") if s.strip()]
    except ValueError:
        raise InputError(f"--pages must be comma-separated whole numbers, not {text!r}") from None
    if not sizes or any(n < 2 for n in sizes):
        raise InputError(f"--pages needs corpus sizes of at least 2 pages, got {text!r}")
    return sorted(sizes)


def run_bench(args: argparse.Namespace, settings: Settings) -> int:
    """The retrieval benchmark on generated corpora; JSON on stdout with --json."""
    from .bench import run

    sizes = parse_sizes(getattr(args, "pages", "100,1000,10000"))
    queries = int(getattr(args, "queries", 200) or 0)
    if queries < 1:
        raise InputError(f"--queries must be at least 1, not {queries}")
    log = (lambda msg: print(msg, file=sys.stderr)) if settings.cli.progress else None
    report = run(sizes, queries, settings.retrieval, log=log)
    if getattr(args, "json", False):
        print(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        cols = ("pages", "query_p50_ms", "query_p95_ms", "protocol_query_p50_ms", "speedup_vs_protocol",
                "index_chars_per_s", "mecab_chars_per_s", "peak_rss_mb", "protocol_queries")
        print("\t".join(cols))
        for row in report["runs"]:
            print("\t".join(str(row[c]) for c in cols))
        for note in report["notes"]:
            print("# " + note)
    return 0
