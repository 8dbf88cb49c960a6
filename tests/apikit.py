"""Start `guiderag serve` as a real process (uvicorn) on a free loopback port, for the API tests
and the load benchmark's tests."""
from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Iterator

from guiderag.processes import answers_200, clean_env, free_port, stop_process, wait_until_serving

START_TIMEOUT_S = 60.0


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
