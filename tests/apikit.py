"""Start `guiderag serve` as a real process (uvicorn) on a free loopback port, for the API tests
and the load benchmark's tests."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import requests

START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without stray GUIDERAG_* / OPENAI_* values, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUIDERAG_", "OPENAI_"))}
    env.update(GUIDERAG_PROGRESS="0", **extra)
    return env


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
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                if requests.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"guiderag serve did not start: {log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
