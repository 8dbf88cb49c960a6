"""`guiderag pages`, `guiderag check`, and the printed report of `guiderag scrape` (see
../shared/CONTRACT.md).

The scrape command itself (scrape, then rebuild the index) is guiderag.commands: it spans
two stages.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from guiderag.errors import InputError
from guiderag.settings import DEFAULT_GUIDELINE, Settings
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
    into = f" into guideline {report.guideline}" if report.guideline != DEFAULT_GUIDELINE else ""
    print(f"scraped {report.toc_url}{into}: {report.content_count} content pages of {len(report.links)} links")
    print(f"added {c['added']}, changed {c['changed']}, unchanged {c['unchanged']}, "
          f"removed {c['removed']}, failed {c['failed']}")
    if not s.corpus_changed:
        print("no page changed: no new version stored")


def run_pages(args: argparse.Namespace, settings: Settings) -> int:
    """List the stored pages (current version of each)."""
    with Store(settings.store, create=False) as store:
        gid = store.resolve_guideline(settings.guideline) if settings.guideline else None
        pages = store.current_pages(include_removed=bool(args.all), guideline=gid)
    rows: list[dict[str, Any]] = [p.summary() for p in pages]
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


def run_check(args: argparse.Namespace, settings: Settings) -> int:
    """Compare the live site of one guideline (or of each) with the store, writing nothing
    of the corpus: exit 0 in sync, 3 diverged or too old, 1 when a check failed."""
    from .check import DIVERGED, FAILED, IN_SYNC, TOO_OLD, check_guideline, write_status
    from .run import check_toc_url

    toc = getattr(args, "toc_url", None)
    if toc:
        check_toc_url(toc)  # a malformed URL is bad input (exit 2), an unreachable one a failed check
    with Store(settings.store, readonly=True) as store:
        ids = [store.resolve_guideline(settings.guideline)] if settings.guideline else [g.id for g in store.guidelines()]
        calibrations = _stale_calibrations(store, ids)
    if not ids:
        raise InputError(f"the store {settings.store_name} holds no guideline to check: scrape one first")
    if toc and len(ids) > 1:
        raise InputError(f"the store holds {len(ids)} guidelines: name the one {toc} belongs to with --guideline ID")
    results = []
    for gid in ids:
        target = settings.guideline_scope(gid)
        result = check_guideline(settings, target, toc)
        try:
            write_status(target, result)
        except OSError as exc:
            _say(f"guiderag: warning: could not record the check in {target.check_status_path} ({exc})")
        results.append(result)
    statuses = {r.status for r in results}
    code = 1 if FAILED in statuses else 3 if statuses & {DIVERGED, TOO_OLD} else 0
    if getattr(args, "json", False):
        overall = FAILED if code == 1 else IN_SYNC if code == 0 else DIVERGED
        print(json.dumps({"status": overall, "exit_code": code, "guidelines": [r.to_json() for r in results],
                          "stale_calibrations": calibrations}, ensure_ascii=False, indent=1))
        return code
    for r in results:
        print(_check_text(r))
        stale = calibrations.get(r.guideline)
        if stale:
            print(f"  coverage calibration stale: fitted {stale['fitted_at']} on an earlier corpus; run "
                  f"`guiderag calibrate QUESTIONS.xlsx --guideline {r.guideline}` again (or --reset)")
    return code


def _stale_calibrations(store: Store, ids: list[str]) -> dict[str, dict]:
    """The guidelines whose coverage calibration was fitted on a corpus that has since
    changed (store.calibration): still used, and flagged here."""
    from guiderag.store import calibration

    out = {}
    for gid in ids:
        cal = calibration.load(store, gid)
        if cal is not None and cal.stale(store.corpus_version(gid)):
            out[gid] = cal.to_json()
    return out


def _check_text(r: Any) -> str:
    age = f", {r.age_hours:.1f} h ago" if r.age_hours is not None else ""
    head = f"{r.guideline}: {r.status.replace('_', ' ')} (last scrape {r.last_scrape or 'never'}{age}"
    head += f"; max age {r.max_age_hours:g} h)" if r.max_age_hours else ")"
    lines = [head]
    if r.error:
        lines.append(f"  check failed: {r.error}")
        return "\n".join(lines)
    for what in ("changed", "added", "removed"):
        for item in getattr(r, what):
            lines.append(f"  {what}: {item['url']}" + (f" ({item['title']})" if item.get("title") else ""))
    for item in r.unreachable:
        lines.append(f"  unreachable: {item['url']}: {item['reason']}")
    lines.append(f"  {r.unchanged} of {r.stored_pages} stored pages unchanged")
    return "\n".join(lines)
