"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions wire format.

Tests drive it through the real `openai` client (no mocks):

    with OpenAIStub(replies=["3, 5-7", Reply(status=500), Reply("slow", delay_s=5)]) as stub:
        settings = Settings.load(env={}, openai_base_url=stub.base_url, openai_api_key="test",
                                 answer_model="stub-model")
        ...
        stub.requests      # the JSON bodies received, in order
        stub.calls         # how many POST /v1/chat/completions were received

`replies` is consumed in order, one per POST /v1/chat/completions. Each item is either a
string (a 200 reply whose message content is that string) or a `Reply` (status, delay,
content, raw body, finish_reason). When the script runs out, `default` is used; if that is
None the server answers HTTP 500 with a message saying the script ran out, so a test that
calls the model more often than it expected fails loudly.

A request with `"stream": true` gets the reply as server-sent events, `chunk_chars`
characters per chunk, `chunk_delay_s` apart, then the finish_reason (None: the stream
just ends, as a server cutting it short would) and `[DONE]`. `stub.cut_streams` counts the
streams the client stopped reading before their end.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Sequence, Union


@dataclass
class Reply:
    """One scripted response."""

    content: str | None = ""
    status: int = 200
    delay_s: float = 0.0  # sleep before answering: longer than the client timeout = a timeout
    body: str | None = None  # raw body instead of the JSON built from `content`
    retry_after_ms: int | None = 1  # sent on errors so the client's retries are quick
    finish_reason: str | None = "stop"  # "length": cut at max_tokens; None: (stream) no finish at all
    chunk_chars: int = 8  # streamed replies: characters per chunk
    chunk_delay_s: float = 0.0  # streamed replies: pause before each chunk
    gate: threading.Event | None = None  # wait for this (at most delay_s) before answering


ReplyLike = Union[str, Reply]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a handler still sleeping (timeout test) must not block close
    allow_reuse_address = True


class OpenAIStub:
    """Loopback OpenAI-compatible server with scripted replies; a context manager."""

    def __init__(
        self,
        replies: Sequence[ReplyLike] = (),
        *,
        default: ReplyLike | None = None,
        model: str = "stub-model",
    ) -> None:
        self._script: list[ReplyLike] = list(replies)
        self.default = default
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.cut_streams = 0
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------
    def start(self) -> "OpenAIStub":
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    stub._send(self, 200, json.dumps(
                        {"object": "list", "data": [{"id": stub.model, "object": "model", "owned_by": "stub"}]}
                    ))
                else:
                    stub._send(self, 404, json.dumps({"error": {"message": f"no route {self.path}"}}))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    stub._send(self, 404, json.dumps({"error": {"message": f"no route {self.path}"}}))
                    return
                try:
                    body = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    stub._send(self, 400, json.dumps({"error": {"message": "body is not JSON"}}))
                    return
                with stub._lock:
                    stub.requests.append(body)
                    stub.headers.append({k.lower(): v for k, v in self.headers.items()})
                    reply = stub._script.pop(0) if stub._script else stub.default
                stub._answer(self, body, reply)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="openai-stub", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "OpenAIStub":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- information ----------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """The URL to pass as OPENAI_BASE_URL (ends in /v1)."""
        assert self._server is not None, "start the stub first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.requests)

    def add(self, *replies: ReplyLike) -> None:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(replies)

    @staticmethod
    def user_message(request: dict[str, Any]) -> str:
        """The text of the (last) user message of a recorded request."""
        users = [m for m in request.get("messages", []) if m.get("role") == "user"]
        return users[-1]["content"] if users else ""

    @staticmethod
    def system_message(request: dict[str, Any]) -> str:
        systems = [m for m in request.get("messages", []) if m.get("role") == "system"]
        return systems[0]["content"] if systems else ""

    # -- internals --------------------------------------------------------------------
    def _answer(self, handler: BaseHTTPRequestHandler, request: dict[str, Any], reply: ReplyLike | None) -> None:
        if reply is None:
            self._send(handler, 500, json.dumps(
                {"error": {"message": "OpenAIStub: no scripted reply left", "type": "stub_exhausted"}}
            ))
            return
        if isinstance(reply, str):
            reply = Reply(reply)
        if reply.gate is not None:
            deadline = time.monotonic() + (reply.delay_s or 60.0)
            while not reply.gate.wait(0.05):
                if self._closing.is_set() or time.monotonic() > deadline:
                    return  # closing, or never opened: drop the connection
        elif reply.delay_s > 0 and self._closing.wait(reply.delay_s):
            return  # the stub is closing: drop the connection
        if reply.body is not None:
            self._send(handler, reply.status, reply.body, retry_after_ms=reply.retry_after_ms)
            return
        if reply.status != 200:
            self._send(handler, reply.status, json.dumps(
                {"error": {"message": f"scripted HTTP {reply.status}", "type": "server_error"}}
            ), retry_after_ms=reply.retry_after_ms)
            return
        if request.get("stream"):
            self._stream(handler, request, reply)
            return
        body = {
            "id": f"chatcmpl-stub-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model") or self.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": reply.finish_reason or "stop",
            }],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
        self._send(handler, 200, json.dumps(body, ensure_ascii=False))

    def _stream(self, handler: BaseHTTPRequestHandler, request: dict[str, Any], reply: Reply) -> None:
        """The reply as server-sent events, as OpenAI's API streams a chat completion."""
        base = {"id": f"chatcmpl-stub-{len(self.requests)}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": request.get("model") or self.model}

        def event(delta: dict[str, Any], finish: str | None) -> bytes:
            body = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])
            return f"data: {json.dumps(body, ensure_ascii=False)}\n\n".encode("utf-8")

        text = reply.content or ""
        size = max(1, reply.chunk_chars)
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(event({"role": "assistant", "content": ""}, None))
            handler.wfile.flush()
            for i in range(0, len(text), size):
                if reply.chunk_delay_s > 0 and self._closing.wait(reply.chunk_delay_s):
                    return
                handler.wfile.write(event({"content": text[i:i + size]}, None))
                handler.wfile.flush()
            if reply.finish_reason is not None:
                handler.wfile.write(event({}, reply.finish_reason))
            handler.wfile.write(b"data: [DONE]\n\n")
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            with self._lock:
                self.cut_streams += 1
        handler.close_connection = True

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, text: str, *, retry_after_ms: int | None = None) -> None:
        data = text.encode("utf-8")
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json; charset=utf-8")
            handler.send_header("Content-Length", str(len(data)))
            if retry_after_ms is not None and status >= 400:
                handler.send_header("retry-after-ms", str(retry_after_ms))
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)
