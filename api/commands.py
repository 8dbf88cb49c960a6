"""`guiderag serve`: the HTTP API on uvicorn, in one process or --workers N (api.workers)."""
from __future__ import annotations

import argparse
import sys

from guiderag.settings import Settings


def run_serve(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the API until interrupted. One worker: the index is loaded on the first request
    (or /readyz); several: loaded before they are forked (settings.api.api_preload), or by each."""
    import uvicorn

    from .app import create_app
    from .protocol import with_request_timeout

    app = create_app(settings)
    workers = settings.api.api_workers
    print(f"guiderag: serving {settings.store_name} on http://{args.host}:{args.port} "
          f"with {workers} worker{'s' if workers != 1 else ''} "
          f"(API key {'required' if settings.api.api_key else 'not set: open to anyone who can connect'})",
          file=sys.stderr)
    # loop "auto": uvloop (a dependency, pyproject.toml) where it is installed, else asyncio
    options = dict(log_level="warning", access_log=False, server_header=False, timeout_graceful_shutdown=10,
                   http=with_request_timeout(settings.api.api_request_timeout_s), loop="auto")
    if workers == 1:
        uvicorn.run(app, host=args.host, port=args.port, **options)  # type: ignore[arg-type]
        return 0
    from .workers import listen, supervise

    sock = listen(args.host, args.port)
    if settings.api.api_preload:
        ready, why = app.state.service.readiness()  # loads every guideline's index, once
        if not ready:
            print(f"guiderag: not ready yet ({why}); each worker loads the library when it can", file=sys.stderr)
    server = uvicorn.Server(uvicorn.Config(app, **options))  # type: ignore[arg-type]
    return supervise(workers, lambda: server.run(sockets=[sock]), before_fork=_before_fork)


def _before_fork() -> None:
    """What a worker must not share with this process: its store connections, the loaded
    libraries' own and every thread's (each worker opens its own), and PostgreSQL pools
    (their threads are not forked)."""
    from guiderag.chatbot.library_cache import release_connections

    release_connections()
    if "guiderag.store.pg" in sys.modules:
        from guiderag.store.pg import close_pools

        close_pools()


def run_loadbench(args: argparse.Namespace, settings: Settings) -> int:
    """k concurrent clients against 1 and 2 replicas (SQLite, and PostgreSQL with --pg)."""
    from .loadbench import print_report, run

    if args.pg:
        from guiderag.errors import InputError
        from guiderag.resources import check_postgres_url, is_postgres_url

        if not is_postgres_url(args.pg):
            raise InputError("--pg takes a postgresql:// URL")
        check_postgres_url(args.pg)  # one that libpq would misread: exit 2, quoting none of it
    preloads = {"on": (True,), "off": (False,), "both": (True, False)}[args.preload]
    report = run(settings, clients=_counts(args.clients, "--clients"), total=args.requests, seconds=args.seconds,
                 replica_counts=_counts(args.replicas, "--replicas"), pg_url=args.pg,
                 sqlite_db=str(args.sqlite) if args.sqlite else None, workdir=args.workdir,
                 worker_counts=_counts(args.worker_counts, "--workers"), preloads=preloads)
    print_report(report, bool(args.json))
    return 0


def _counts(text: object, flag: str) -> list[int]:
    """Comma-separated numbers (InputError naming the flag otherwise)."""
    from guiderag.errors import InputError

    try:
        return [int(c) for c in str(text).split(",") if c.strip()]
    except ValueError:
        raise InputError(f"{flag} must be comma-separated numbers, not {text!r}") from None


