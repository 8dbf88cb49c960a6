"""`guiderag serve --workers N`: N uvicorn processes answering on one listening socket.

One uvicorn process runs one request's Python at a time (the GIL), so one process uses
about one core. With N workers the kernel hands each new connection to whichever worker
accepts it first, and N cores answer at once.

With settings.api.api_preload (the default) this process loads the library first (every
guideline's index, built when stale: once, not once per worker) and then forks the
workers: they start ready, sharing what was loaded copy-on-write (the index's arrays
are never written, so their memory stays shared). Without it each worker loads its own
on its first request. Either way each worker then keeps its own library cache: a scrape
or a removed guideline is seen by each worker at its next request (chatbot.library_cache),
each answer is audited before it is returned, exactly as with one process.

This process only supervises: SIGTERM or SIGINT is passed on to the workers, which finish
the requests in flight and exit; a worker that dies is replaced (when workers keep dying
at once, the server gives up with exit 1 instead of forking forever).
"""
from __future__ import annotations

import os
import signal
import socket
import sys
import time
from typing import Callable

# A worker that dies within this many seconds of its start counts as failing to start.
START_FAILURE_S = 5.0
# Give up after this many such failures in a row.
START_FAILURES = 5
# Connections the listening socket queues before the workers accept them.
BACKLOG = 2048


def listen(host: str, port: int) -> socket.socket:
    """The listening socket the workers share (inheritable across fork)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, so that asyncio turns Nagle's algorithm off on each connection it
    # accepts (it does for TCP sockets only): else a response written in two parts waits
    # for the client's delayed ACK, 40 ms
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def supervise(workers: int, run_worker: Callable[[], None], *, before_fork: Callable[[], None] | None = None) -> int:
    """Fork `workers` processes running `run_worker()` and keep them running until this
    process gets SIGTERM or SIGINT; returns the exit code (0, or 1 when workers kept
    failing to start). `before_fork`: called before each fork (close what must not be
    shared: store connections, connection pools)."""
    children: dict[int, float] = {}  # pid -> when it was started
    stopping = False

    def fork() -> None:
        if before_fork is not None:
            before_fork()
        pid = os.fork()
        if pid == 0:  # the worker
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            code = 0
            try:
                run_worker()
            except BaseException:  # pragma: no cover - its traceback is in the server log
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        children[pid] = time.monotonic()

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    failures = 0
    code = 0
    try:
        for _ in range(workers):
            fork()
        while children:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            started = children.pop(pid, None)
            if started is None or stopping:
                continue
            quick = time.monotonic() - started < START_FAILURE_S
            failures = failures + 1 if quick else 0
            print(f"guiderag: worker {pid} ended ({_status(status)}); starting another", file=sys.stderr)
            if failures >= START_FAILURES:
                print(f"guiderag: {failures} workers in a row ended within {START_FAILURE_S:g} s of starting; "
                      "stopping (see the messages above)", file=sys.stderr)
                code = 1
                stop(signal.SIGTERM, None)
                continue
            fork()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return code


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"status {status}"
