"""The HTTP connection of `guiderag serve`: uvicorn's h11 protocol with a deadline on reading
each request.

uvicorn closes a keep-alive connection that stays idle after a response
(`timeout_keep_alive`), but nothing bounds the time a client may take to send a request:
one that connects and sends nothing, or trickles its headers a byte at a time, holds the
connection (and its memory) for as long as it likes, and enough of them exhaust the
server's file descriptors. An ASGI middleware cannot help: the application is called only
once the headers are complete. So the deadline lives in the protocol: from the moment a
connection opens, or a new request on it begins, the whole request (headers and body) must
have arrived within `request_timeout_s`; else the client gets 408 (the usual JSON error
body) and the connection is closed.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

# What the client reads when its request was too slow: the API's JSON error body.
_BODY = json.dumps({"error": {"code": "request_timeout",
                              "message": "the request did not arrive in time"}}).encode("ascii")
TIMEOUT_RESPONSE = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                    b"connection: close\r\ncontent-length: " + str(len(_BODY)).encode("ascii") + b"\r\n\r\n" + _BODY)


class DeadlineH11Protocol(H11Protocol):
    """H11Protocol that closes a connection whose request takes longer than request_timeout_s."""

    request_timeout_s = 30.0  # set on the subclass `with_request_timeout` makes

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # the first request must arrive in time, too

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the first bytes of the next request on a kept-alive connection
        super().data_received(data)
        if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
            self._disarm()  # the whole request is here (or the connection is done)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
            return
        waiting_for_headers = self.conn.their_state is h11.IDLE  # self.cycle is the previous request's
        if waiting_for_headers or self.cycle is None or not self.cycle.response_started:
            self.transport.write(TIMEOUT_RESPONSE)
        self.transport.close()


def with_request_timeout(seconds: float) -> type[DeadlineH11Protocol]:
    """The protocol class for uvicorn's `http=`, with this deadline per request."""
    return type("DeadlineH11Protocol", (DeadlineH11Protocol,), {"request_timeout_s": float(seconds)})
