"""`guiderag serve`: the HTTP API on uvicorn (one process; run several for replicas)."""
from __future__ import annotations

import argparse
import sys

from guiderag.settings import Settings


def run_serve(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the API until interrupted; the index is loaded on the first request (or /readyz)."""
    import uvicorn

    from .app import create_app

    app = create_app(settings)
    print(f"guiderag: serving {settings.db} on http://{args.host}:{args.port} "
          f"(API key {'required' if settings.api_key else 'not set: open to anyone who can connect'})",
          file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False,
                server_header=False, timeout_graceful_shutdown=10)
    return 0
