"""Child processes: those serving HTTP on loopback (their environment, a free port, waiting
until one serves, stopping it), and whether and how workers are forked.

One place for what `guiderag loadbench` does with its `serve` replicas and what the tests do
with uvicorn, Streamlit and llama.cpp's server.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Callable

import requests

POLL_S = 0.2
SETTINGS_ENV_PREFIXES = ("GUIDERAG_", "OPENAI_")  # what guiderag.settings reads from the environment
# Whether worker processes are forked (they inherit what this one has built, without a
# copy): on Linux. Elsewhere they are spawned, and work that only a fork can share
# (retrieval.row_blocks.stack_both) stays in this process.
FORKS = sys.platform.startswith("linux")


def pool_worker_signals() -> None:
    """In a forked pool worker: Ctrl-C is the parent's to handle, and SIGTERM, with which a
    pool ends its workers, ends this one quietly (a fork inherits the CLI's handler, which
    would raise an interrupt in it and print its traceback)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now (the system's choice)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    """A child's environment: this one without its GUIDERAG_* / OPENAI_* settings, progress
    bars off, plus `extra` (the child's own settings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SETTINGS_ENV_PREFIXES)}
    env.update(GUIDERAG_PROGRESS="0", **extra)
    return env


def answers_200(url: str, timeout_s: float = 2.0) -> bool:
    """Whether a GET of `url` answers 200 now."""
    try:
        return requests.get(url, timeout=timeout_s).status_code == 200
    except requests.RequestException:
        return False


def wait_until_serving(
    proc: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    timeout_s: float,
    poll_s: float = POLL_S,
) -> bool:
    """Poll `ready()` until it is true (True), or until `proc` exits or `timeout_s` pass
    (False: the caller says why, with its log)."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(poll_s)
    return True


def stop_process(proc: subprocess.Popen[bytes], timeout_s: float = 15.0) -> None:
    """SIGTERM, then SIGKILL if it has not ended within `timeout_s`; reaped either way."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)
