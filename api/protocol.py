"""The HTTP connection of `guiderag serve`: uvicorn's HTTP protocol with a deadline on reading
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

The parser is httptools (llhttp, in C), as uvicorn itself prefers when it is installed: 7%
fewer instructions per answered request than uvicorn's pure-Python h11 (callgrind, the
sample).
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# What the client reads when its request was too slow: the API's JSON error body.
_BODY = json.dumps({"error": {"code": "request_timeout",
                              "message": "the request did not arrive in time"}}).encode("ascii")
TIMEOUT_RESPONSE = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                    b"connection: close\r\ncontent-length: " + str(len(_BODY)).encode("ascii") + b"\r\n\r\n" + _BODY)


class DeadlineHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the request deadline: armed when the connection
    opens and when the first bytes of a request arrive on an idle connection, disarmed
    once the whole request is in (the parser's callbacks say where the request being read
    stands); when it fires first, 408 and close."""

    request_timeout_s = 30.0  # set on the subclass `with_request_timeout` makes

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._reading = "first"  # first (nothing yet), headers, body, in (all of it)

    # -- where the request being read stands -------------------------------------------
    def on_message_begin(self) -> None:
        self._reading = "headers"
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._reading = "body"
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._reading = "in"
        super().on_message_complete()

    # -- the deadline ---------------------------------------------------------------------
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
        if self._deadline is None and self._reading in ("first", "in"):
            self._arm()  # the first bytes of the next request on a kept-alive connection
        super().data_received(data)
        if self._reading == "in":
            self._disarm()  # the whole request is here

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self._reading == "in":
            return
        # before the body, self.cycle is the previous request's
        if self._reading != "body" or self.cycle is None or not self.cycle.response_started:
            self.transport.write(TIMEOUT_RESPONSE)
        self.transport.close()


def with_request_timeout(seconds: float) -> type[DeadlineHttpToolsProtocol]:
    """The protocol class for uvicorn's `http=`, with this deadline per request."""
    return type("DeadlineHttpToolsProtocol", (DeadlineHttpToolsProtocol,), {"request_timeout_s": float(seconds)})
