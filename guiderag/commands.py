"""Commands that span stages: `guiderag scrape` (scrape, then rebuild the index) and
`guiderag chat` (the Streamlit page). The CLI layer; every stage below stays unaware of
the stages above it."""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

from .errors import GuideragError, InputError
from .settings import Settings


def _say(text: str) -> None:
    print(text, file=sys.stderr)


def run_scrape(args: argparse.Namespace, settings: Settings) -> int:
    """Scrape a TOC URL (or the bundled sample), print the summary, rebuild the index."""
    from .retrieval import build_index
    from .scraper import scrape_site
    from .scraper.commands import print_report
    from .scraper.sample import serve_sample_site

    if args.sample and args.toc_url:
        raise InputError("give either a table-of-contents URL or --sample, not both")
    if not args.sample and not args.toc_url:
        raise InputError("give the table-of-contents URL to scrape (or --sample for the bundled sample guideline)")
    if args.sample:
        if getattr(args, "delay", None) is None:
            settings = settings.replace(delay_s=0.0)  # our own loopback server: no one to be polite to
        with serve_sample_site() as toc_url:
            report = scrape_site(settings, toc_url, urls_xlsx=args.urls_xlsx,
                                 public_site=settings.sample_site_url)
    else:
        report = scrape_site(settings, args.toc_url, urls_xlsx=args.urls_xlsx)
    print_report(report)
    from .retrieval.persist import remove_stale_builds

    stale = remove_stale_builds(settings.index_dir)  # left by index builds that were killed
    if stale:
        _say(f"removed {len(stale)} temporary index folder(s) of builds that did not finish: {', '.join(stale)}")
    if report.summary.corpus_changed and not args.no_index:
        try:
            build_index(settings)
            _say("retrieval index rebuilt")
        except GuideragError as exc:
            _say(f"guiderag: error: the scrape was stored, but rebuilding the index failed: {exc}. "
                 "Run `guiderag index` to retry")
            return 1
    return 0


def run_chat(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the chat page with Streamlit (replaces this process)."""
    spec = importlib.util.find_spec("guiderag.ui.page")  # ./ui in a checkout, guiderag/ui in a wheel
    if spec is None or not spec.origin:
        raise GuideragError("the chat page guiderag.ui.page is not installed: reinstall guiderag")
    page = Path(spec.origin)
    argv = [
        sys.executable, "-m", "streamlit", "run", str(page),
        "--server.headless", "true", "--server.address", args.host, "--server.port", str(args.port),
        "--browser.gatherUsageStats", "false", "--client.toolbarMode", "viewer",
    ]
    env = dict(os.environ, GUIDERAG_DB=str(settings.db))
    os.execve(sys.executable, argv, env)
    return 0  # pragma: no cover - execve does not return
