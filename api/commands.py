"""`guiderag serve`: the HTTP API on uvicorn (one process; run several for replicas)."""
from __future__ import annotations

import argparse
import sys

from guiderag.settings import Settings


def run_serve(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the API until interrupted; the index is loaded on the first request (or /readyz)."""
    import uvicorn

    from .app import create_app
    from .protocol import with_request_timeout

    app = create_app(settings)
    print(f"guiderag: serving {settings.store_name} on http://{args.host}:{args.port} "
          f"(API key {'required' if settings.api_key else 'not set: open to anyone who can connect'})",
          file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False,
                server_header=False, timeout_graceful_shutdown=10,
                http=with_request_timeout(settings.api_request_timeout_s))
    return 0


def run_loadbench(args: argparse.Namespace, settings: Settings) -> int:
    """k concurrent clients against 1 and 2 replicas (SQLite, and PostgreSQL with --pg)."""
    from guiderag.errors import InputError

    from .loadbench import print_report, run

    try:
        counts = [int(c) for c in str(args.replicas).split(",") if c.strip()]
    except ValueError:
        raise InputError(f"--replicas must be comma-separated numbers, not {args.replicas!r}") from None
    if args.pg:
        from guiderag.resources import check_postgres_url, is_postgres_url

        if not is_postgres_url(args.pg):
            raise InputError("--pg takes a postgresql:// URL")
        check_postgres_url(args.pg)  # one that libpq would misread: exit 2, quoting none of it
    report = run(settings, clients=args.clients, total=args.requests, seconds=args.seconds,
                 replica_counts=counts, pg_url=args.pg, sqlite_db=str(args.sqlite) if args.sqlite else None,
                 workdir=args.workdir)
    print_report(report, bool(args.json))
    return 0
