"""Commands that span stages: `guiderag scrape` (scrape, then rebuild the index),
`guiderag guidelines` (the store's guidelines with their last check; removing one drops
its index too) and `guiderag chat` (the Streamlit page). The CLI layer; every stage below
stays unaware of the stages above it."""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from .errors import GuideragError, InputError
from .progress import ProgressReporter
from .resources import SAMPLE_SITE_URL
from .settings import AUTO_GUIDELINE, DEFAULT_GUIDELINE, GuidelineScope, Settings


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
    if getattr(args, "guideline", None) == AUTO_GUIDELINE:
        raise InputError("--guideline auto is for asking; a scrape stores one named guideline (e.g. --guideline gastric)")
    scope = settings.guideline_scope(settings.storage.guideline or DEFAULT_GUIDELINE)
    title = getattr(args, "title", None)
    # The scraper stage is handed its own config, the store's and a progress reporter.
    progress = ProgressReporter(enabled=settings.cli.progress)
    if args.sample:
        if getattr(args, "delay", None) is None:
            settings = settings.replace(delay_s=0.0)  # our own loopback server: no one to be polite to
        with serve_sample_site() as toc_url:
            report = scrape_site(settings.scraper, settings.storage, toc_url, guideline=scope,
                                 urls_xlsx=args.urls_xlsx, public_site=SAMPLE_SITE_URL, progress=progress, title=title)
    else:
        report = scrape_site(settings.scraper, settings.storage, args.toc_url, guideline=scope,
                             urls_xlsx=args.urls_xlsx, progress=progress, title=title)
    print_report(report)
    from .retrieval.persist import remove_stale_builds

    stale = remove_stale_builds(scope.index_dir)  # left by index builds that were killed
    if stale:
        _say(f"removed {len(stale)} temporary index folder(s) of builds that did not finish: {', '.join(stale)}")
    if report.summary.corpus_changed and not args.no_index:
        try:
            build_index(settings.retrieval, settings.storage, scope, progress=settings.progress_reporter)
            _say("retrieval index rebuilt")
        except GuideragError as exc:
            _say(f"guiderag: error: the scrape was stored, but rebuilding the index failed: {exc}. "
                 "Run `guiderag index` to retry")
            return 1
    return 0


def guideline_rows(settings: Settings, *, include_removed: bool = False) -> list[dict[str, Any]]:
    """The `guidelines --json` rows: id, title, TOC URL, pages, last scrape, status, and
    the last `guiderag check` of each (None when never checked)."""
    from .scraper.run import DEAD_RUN_MESSAGE
    from .store import Store
    from .store.lock import scrape_running

    with Store(settings.store, create=False) as store:
        counts = store.page_counts()
        rows = []
        live_scrape: bool | None = None  # asked of the scrape lock once, when a run says running
        for g in store.guidelines(include_removed=include_removed):
            ok = store.last_run(guideline=g.id)
            latest = store.last_run(status=None, guideline=g.id)
            if latest is not None and latest["status"] == "running":
                if live_scrape is None:
                    live_scrape = scrape_running(settings.store)
                again = store.last_run(status=None, guideline=g.id)  # it may have finished meanwhile
                if not live_scrape and again is not None and again["id"] == latest["id"] \
                        and again["status"] == "running":
                    # its process died (killed): shown as the next scrape will record it
                    latest = dict(latest, status="aborted", message=DEAD_RUN_MESSAGE)
                else:
                    latest = again
            pages = counts.get(g.id, 0)
            if g.removed:
                status = "removed"
            elif latest is not None and latest["status"] == "running":
                status = "scraping"
            elif latest is not None and latest["status"] == "aborted":
                status = "aborted"
            elif latest is not None and latest["status"] == "failed":
                status = "last_scrape_failed"
            elif not pages:
                status = "empty"
            else:
                status = "ok"
            rows.append({
                "id": g.id, "title": g.title, "toc_url": g.toc_url, "pages": pages,
                "last_scrape": (ok.get("finished_at") or ok.get("started_at")) if ok else None,
                "status": status, "created_at": g.created_at, "removed_at": g.removed_at,
                "last_run": ({"id": latest["id"], "status": latest["status"], "message": latest["message"]}
                             if latest is not None else None),
                "check": _check_of(settings.guideline_scope(g.id), ok),
                "calibration": calibration_of(store, g.id),
            })
    return rows


def calibration_of(store: Any, gid: str) -> dict[str, Any] | None:
    """The guideline's coverage calibration (`guiderag calibrate`), with `stale`: True once
    its corpus has changed since the fit (None: the shipped coverage model applies)."""
    from .store import calibration

    cal = calibration.load(store, gid)
    if cal is None:
        return None
    return {**cal.to_json(), "stale": cal.stale(store.corpus_version(gid))}


def _check_of(guideline: GuidelineScope, ok: dict | None) -> dict[str, Any] | None:
    """The last `guiderag check` of a guideline, with `current`: False once a later scrape
    has replaced the corpus it compared."""
    from .scraper.check import read_status

    check = read_status(guideline)
    if check is not None:
        check["current"] = check.get("last_run_id") == (ok["id"] if ok else None)
    return check


def run_guidelines(args: argparse.Namespace, settings: Settings) -> int:
    """List the stored guidelines (`--json`), or remove one (`--remove ID`)."""
    if getattr(args, "remove", None):
        return _remove_guideline(args.remove, settings)
    rows = guideline_rows(settings, include_removed=bool(getattr(args, "all", False)))
    if getattr(args, "json", False):
        print(json.dumps({"guidelines": rows}, ensure_ascii=False, indent=1))
        return 0
    if not rows:
        print("no guidelines stored: run `guiderag scrape TOC_URL [--guideline ID]`")
        return 0
    for r in rows:
        check = r["check"]
        checked = f"\tcheck {check['status']} {check['checked_at']}" if check else ""
        cal = r["calibration"]
        calibrated = "" if cal is None else (
            f"\tcalibration STALE (fitted {cal['fitted_at']} on an earlier corpus: run `guiderag calibrate` again)"
            if cal["stale"] else f"\tcalibrated {cal['fitted_at']}")
        print(f"{r['id']}\t{r['title'] or '-'}\t{r['toc_url'] or '-'}\t{r['pages']} pages\t"
              f"last scrape {r['last_scrape'] or '-'}\t{r['status']}{checked}{calibrated}")
    print(f"{len(rows)} guidelines", file=sys.stderr)
    return 0


def _remove_guideline(gid: str, settings: Settings) -> int:
    """Mark the guideline and its pages removed (versions and audit rows kept), then drop
    its index and its last check."""
    from .retrieval.persist import remove_index
    from .settings import check_guideline_id
    from .store import Store
    from .store.lock import scrape_lock

    check_guideline_id(gid)
    Store(settings.store, create=False).close()  # no store there: exit 2 before a lock file is made beside it
    with scrape_lock(settings.store), Store(settings.store, create=False) as store:
        pages = store.remove_guideline(gid)
    target = settings.guideline_scope(gid)
    remove_index(target.index_dir)
    target.check_status_path.unlink(missing_ok=True)
    _say(f"removed guideline {gid}: {pages} pages marked removed (their versions and the audit log are kept), "
         f"its index deleted; `guiderag scrape TOC_URL --guideline {gid}` brings it back")
    return 0


def chat_environment(args: argparse.Namespace, settings: Settings) -> dict[str, str]:
    """The Streamlit child's environment: this one, with the store's location (a
    PostgreSQL URL as given, password and all, or the SQLite file) and the flags of the
    command as the settings they set. The environment, not the command line: what is on a
    command line anyone on the machine can read (`ps`), a process's environment only its
    user and root."""
    from .registry import FLAG
    from .settings import BY_NAME

    env = dict(os.environ)
    for name, source in settings.sources.items():  # --pipeline, --threshold, ... as their variables
        value = settings.value(name) if name in BY_NAME else None  # read through its stage's config
        if source == FLAG and value is not None:
            env[BY_NAME[name].env] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    env[BY_NAME["db"].env] = str(settings.store)  # the PostgreSQL URL of a shared store, else the file
    return env


def run_chat(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the chat page with Streamlit (replaces this process) over the store of
    --db / GUIDERAG_DB (chat_environment)."""
    spec = importlib.util.find_spec("guiderag.ui.page")  # ./ui in a checkout, guiderag/ui in a wheel
    if spec is None or not spec.origin:
        raise GuideragError("the chat page guiderag.ui.page is not installed: reinstall guiderag")
    page = Path(spec.origin)
    argv = [
        sys.executable, "-m", "streamlit", "run", str(page),
        "--server.headless", "true", "--server.address", args.host, "--server.port", str(args.port),
        "--browser.gatherUsageStats", "false", "--client.toolbarMode", "viewer",
    ]
    os.execve(sys.executable, argv, chat_environment(args, settings))
    return 0  # pragma: no cover - execve does not return


def run_config(args: argparse.Namespace, settings: Settings) -> int:
    """Every setting with its current value, where it came from (default, environment,
    flag), its environment variable and help, secrets masked (`--json`: CONTRACT's
    shape); `--markdown`: the settings reference docs/settings.md is generated as."""
    from .settings import describe, reference_markdown

    if getattr(args, "markdown", False):
        sys.stdout.write(reference_markdown())
        return 0
    rows = describe(settings)
    if getattr(args, "json", False):
        print(json.dumps({"settings": rows}, ensure_ascii=False, indent=1))
        return 0
    width = max(len(r["name"]) for r in rows)
    stage = None
    for r in rows:
        if r["stage"] != stage:
            stage = r["stage"]
            print(("" if stage == rows[0]["stage"] else "\n") + f"[{stage}]")
        value = _shown(r["value"])
        origin = r["source"] if r["source"] == "default" else f"{r['source']}; default {_shown(r['default'])}"
        print(f"{r['name']:<{width}}  {value}  ({origin})  {r['env']}")
        print(f"{'':<{width}}  {r['help']}")
    return 0


def _shown(value: Any) -> str:
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value) if value != "" else '""'
