"""The API under test, two ways:

- `client(db, **env)`: the application of `guiderag serve --db DB` in this process, asked
  through FastAPI's TestClient (an ASGI client: no server, no port, no process start). For
  what the application decides: authentication, CORS, body limits, validation, error shapes,
  readiness, answers and their audit rows, concurrent requests (its thread pool is the one
  uvicorn uses).
- `serve(db, log, **env)`: `guiderag serve` as a real process (uvicorn) on a free loopback
  port, for what needs one: replicas, a corpus reloaded from another process, the real
  server's handling of a body streamed in pieces, the load benchmark's tests.

`env` is the same for both: the GUIDERAG_* / OPENAI_* settings the server is started with.
"""
from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from guiderag.processes import answers_200, clean_env, free_port, stop_process, wait_until_serving

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

START_TIMEOUT_S = 60.0


@contextlib.contextmanager
def client(db: Path | str, **env: str) -> Iterator["TestClient"]:
    """The API over DB in this process, with only `env` as its environment (nothing of the
    shell's), until the block ends; yields a TestClient (`.get("/healthz")`, `.post(...)`).
    Errors are answered as the server answers them (500 JSON), not raised into the test."""
    from fastapi.testclient import TestClient

    from guiderag.api.app import create_app
    from guiderag.settings import Settings

    settings = Settings.load(env=env, db=str(db))  # what `serve --db DB` reads, with this environment
    with TestClient(create_app(settings), raise_server_exceptions=False) as http:
        yield http


@contextlib.contextmanager
def serve(db: Path | str, log: Path, **env: str) -> Iterator[str]:
    """`guiderag serve --db DB` until the block ends; yields its base URL."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "guiderag", "serve", "--db", str(db), "--port", str(port)],
            env=clean_env(**env), stdout=out, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_until_serving(proc, lambda: answers_200(url + "/healthz"), START_TIMEOUT_S, poll_s=0.1):
            raise AssertionError(f"guiderag serve did not start: {log.read_text(errors='replace')[-3000:]}")
        yield url
    finally:
        stop_process(proc)
