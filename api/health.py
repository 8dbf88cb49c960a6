"""/readyz within its own deadline, whatever the store does.

The readiness check touches the store (its state) and may load the indexes; a store that
hangs (a PostgreSQL server stopped, a network partition) would hang the probe with it,
and a probe run on the request threads would wait behind every request stuck on the same
store. So the check runs on a thread of its own, one at a time (a probe arriving while
one runs waits for the same one), and the probe answers within settings.api.api_ready_timeout_s:
"store not answering" while the check still waits on the store, "loading the index" while
it loads, ready or the reason when it finished. /healthz needs none of this: it answers
on the event loop without touching the store (api/app.py).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading

from .service import Service

STORE, INDEX = "store", "index"


class Readiness:
    """The one readiness check of a process, with a deadline for each probe."""

    def __init__(self, service: Service, timeout_s: float) -> None:
        self.service = service
        self.timeout_s = timeout_s
        self._running: concurrent.futures.Future[tuple[bool, str]] | None = None
        self._lock = threading.Lock()
        self.stage = STORE  # what the running check waits on

    def _start(self) -> concurrent.futures.Future[tuple[bool, str]]:
        """The check on a daemon thread of its own (a thread stuck on a hung store must not
        keep the process from exiting, as a ThreadPoolExecutor's would)."""
        future: concurrent.futures.Future[tuple[bool, str]] = concurrent.futures.Future()

        def at(stage: str) -> None:
            self.stage = stage

        def run() -> None:
            try:
                future.set_result(self.service.readiness(at))
            except BaseException as exc:  # reported to the probe, which answers 503
                future.set_exception(exc)

        self.stage = STORE
        threading.Thread(target=run, name="guiderag-readyz", daemon=True).start()
        return future

    async def probe(self) -> tuple[bool, str]:
        """(ready, why) within timeout_s: the running check's answer, or what it waits on."""
        with self._lock:
            if self._running is None or self._running.done():
                self._running = self._start()
            running = self._running
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(running)), self.timeout_s)
        except asyncio.TimeoutError:
            if self.stage == STORE:
                return False, f"store not answering (no answer within {self.timeout_s:g} s)"
            return False, f"loading the index (not done within {self.timeout_s:g} s)"
