"""One deadline for each request a Fetcher sends, from connecting to the last byte.

requests' timeout bounds each socket operation, not their sum, and the body's own deadline
(checked between reads, scraper.fetch) starts only once the headers are in: a server
sending its status line and headers a byte every few seconds held a scrape for as long as
it liked. `Deadline` runs a timer beside each request; when it fires, the request's socket
is shut down, which ends whatever read waits on it, and `expired` tells the caller that the
deadline, not the server, ended the response. Which connection a request uses is told by
the urllib3 connection classes of `DeadlineAdapter`, mounted on the Fetcher's session.
"""
from __future__ import annotations

import socket
import threading
from typing import Any

import requests.adapters
import urllib3.connection
import urllib3.connectionpool


class Deadline:
    """One request's deadline (module docstring): a timer that shuts the request's socket
    down when it fires; `expired` says it did."""

    _current = threading.local()

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self.connection: urllib3.connection.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> "Deadline":
        Deadline._current.deadline = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        Deadline._current.deadline = None

    @classmethod
    def watch(cls, connection: urllib3.connection.HTTPConnection) -> None:
        """The connection the running request of this thread uses (called as it sends)."""
        deadline = getattr(cls._current, "deadline", None)
        if deadline is not None:
            with deadline._lock:
                deadline.connection = connection
                late = deadline.expired
            if late:
                deadline._shut(connection)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            connection = self.connection
        if connection is not None:
            self._shut(connection)

    @staticmethod
    def _shut(connection: urllib3.connection.HTTPConnection) -> None:
        sock = getattr(connection, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # closed already


class _WatchedHTTPConnection(urllib3.connection.HTTPConnection):
    def request(self, *args: Any, **kwargs: Any) -> None:
        Deadline.watch(self)
        super().request(*args, **kwargs)


class _WatchedHTTPSConnection(urllib3.connection.HTTPSConnection):
    def request(self, *args: Any, **kwargs: Any) -> None:
        Deadline.watch(self)
        super().request(*args, **kwargs)


class _WatchedHTTPPool(urllib3.connectionpool.HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(urllib3.connectionpool.HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


_WATCHED_POOLS = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}


class DeadlineAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter whose connections tell the running Deadline which they are."""

    def init_poolmanager(self, *args: object, **kwargs: object) -> None:
        super().init_poolmanager(*args, **kwargs)  # type: ignore[arg-type]
        self.poolmanager.pool_classes_by_scheme = dict(_WATCHED_POOLS)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: object) -> object:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if hasattr(manager, "pool_classes_by_scheme"):
            manager.pool_classes_by_scheme = dict(_WATCHED_POOLS)
        return manager
