"""The FastAPI application of `guiderag serve` (../shared/CONTRACT.md, "HTTP API").

- `POST /v1/ask` {"question", "mode"?, "guideline"?, "history"?} -> the answer object of
  `ask --json`, audited the same way (the audit row is committed before the reply);
  `history`: the conversation's earlier questions, oldest first (stateless: the caller
  keeps them; a follow-up is read with them, chatbot.conversation), at most
  settings.answer.history_max_turns texts of at most api_max_question_chars each: beyond, 422 and
  no audit row;
- `GET /v1/pages` (`?guideline=ID`), `GET /v1/guidelines`; `GET /healthz` (the process
  lives: answered on the event loop, never touching the store or the request threads);
  `GET /readyz` (store reachable and indexes loaded, else 503, within
  settings.api.api_ready_timeout_s whatever the store does: api/health.py); the OpenAPI
  description at /openapi.json (and /docs).
- Every error is JSON `{"error": {"code": ..., "message": ...}}`: 400/422 bad input, 401
  without the configured API key, 404/405 unknown route or method, 413 a body over
  settings.api.api_max_body_bytes, 503 a model, the store or the index unavailable, 500 anything
  else (the traceback goes to the server log, never to the client). A message names no
  credential and no path of this machine (api/public.py; the server log has it whole).
- With settings.api.api_key set, /v1 requires `Authorization: Bearer <key>` (constant-time
  comparison). CORS headers only for the origins in settings.api.api_cors_origins.

Routes that touch the store run in threads, never on the event loop: /v1/pages and
/v1/guidelines are plain functions, which FastAPI runs in its thread pool; /v1/ask hands
each answer to a thread itself (MeCab and the audit log take their own locks). An answer
that waits on no model (extract without a keywords model: BotConfig.waits_on_model) is
Python under the GIL from start to end, so it runs on the process's answer threads
(settings.api.api_answer_threads, one by default) and the requests beyond wait their turn
on the event loop, where waiting costs nothing: sixteen such answers at once in sixteen
pool threads cost about half as much CPU again each, in GIL hand-overs, as one after
another (README, "Speed and capacity"). One that waited ANSWER_TURN_WAIT_S for its turn
runs in the request pool instead (a hung store holds a turn until its own timeout). An
answer that waits seconds on a model runs in the request pool, many at once. What needs no store (the health probe, the key check,
the error handlers) is async: it runs on the event loop, so a pool whose every thread
waits on a hung store cannot hold it up.
"""
from __future__ import annotations

import hmac
import logging
from typing import Any, Literal

import anyio
import anyio.to_thread
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from guiderag.chatbot.config import BotConfig
from guiderag.chatbot.conversation import check_history
from guiderag.errors import (
    EmptyCorpusError,
    GuideragError,
    IndexCorruptError,
    IndexWriteError,
    InputError,
    ModelError,
    ModelNotConfiguredError,
    StoreError,
    StoreTimeoutError,
)
from guiderag.settings import EXTRACT, GENERATE, LINES, Settings

from .health import Readiness
from .public import public_message
from .service import Service

_log = logging.getLogger("guiderag.api")
Mode = Literal["extract", "lines", "generate"]
assert set(Mode.__args__) == {EXTRACT, LINES, GENERATE}  # type: ignore[attr-defined]


class AskRequest(BaseModel):
    """The body of POST /v1/ask."""

    model_config = ConfigDict(extra="forbid", strict=True)

    question: str = Field(min_length=1, description="the patient's question, in their words")
    mode: Mode | None = Field(default=None, description="extract (default), lines or generate")
    guideline: str | None = Field(default=None, description="a guideline id, or auto (the default)")
    history: list[str] | None = Field(
        default=None, description="the conversation's earlier questions, oldest first (at most "
        "GUIDERAG_HISTORY_MAX_TURNS): a follow-up is read with them")


# How long an answer that waits on no model waits for a turn on the answer threads before it
# runs beside them: far more than a queue of answers under load takes (a few ms each), far
# less than the store's own timeouts, so a store that stopped answering (each turn held
# until it times out) delays the others by this much at most.
ANSWER_TURN_WAIT_S = 0.25


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


# Our errors -> (HTTP status, code). First match wins: the more specific classes first.
ERROR_STATUS: tuple[tuple[type[GuideragError], int, str], ...] = (
    (ModelNotConfiguredError, 503, "model_not_configured"),
    (ModelError, 503, "model_unavailable"),
    (EmptyCorpusError, 503, "no_corpus"),
    (StoreTimeoutError, 503, "store_timeout"),  # a wait on the store ran out: hung or overloaded
    (StoreError, 503, "store_unavailable"),
    (IndexCorruptError, 503, "index_unavailable"),
    (IndexWriteError, 503, "index_unavailable"),
    (InputError, 400, "invalid_request"),
)


class BodyLimit:
    """Refuse a request body over `limit` bytes (413) before the application sees any of it:
    by its Content-Length when it sends one, else while it streams in. The body (at most
    `limit` bytes) is read here and handed on whole."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._refuse(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body.extend(message.get("body", b""))
            if len(body) > self.limit:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        whole: list[Message] = [{"type": "http.request", "body": bytes(body), "more_body": False}]

        async def replay() -> Message:
            return whole.pop() if whole else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = _error(413, "request_too_large", f"the request body is over {self.limit} bytes")
        await response(scope, receive, send)


def check_api_key(key: str | None) -> None:
    """InputError, at start-up, for an API key no client could send: it travels in an HTTP
    header, where only printable ASCII arrives as written."""
    if key and not all("!" <= ch <= "~" for ch in key):
        raise InputError(
            "GUIDERAG_API_KEY must be printable ASCII without spaces (letters, digits, punctuation): "
            "clients send it in an HTTP header, where other characters cannot arrive as written, so "
            "no request could ever match it. Generate one with "
            "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`")


def create_app(settings: Settings, service: Service | None = None) -> FastAPI:
    """The application over settings.storage.db; one Service (one loaded index) per process.
    InputError for an API key no client could send (check_api_key)."""
    check_api_key(settings.api.api_key)
    service = service or Service(settings)
    readiness = Readiness(service, settings.api.api_ready_timeout_s)
    app = FastAPI(
        title="guiderag",
        version="1",
        description="Answers from a clinical guideline, in the guideline's own words (../shared/CONTRACT.md).",
    )
    app.state.service = service

    def public(message: str, what: str) -> str:
        return public_message(message, settings, log=_log, what=what)

    async def require_key(request: Request) -> None:
        if not settings.api.api_key:
            return
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), settings.api.api_key.encode()):
            raise _Unauthorized()

    @app.exception_handler(_Unauthorized)
    async def unauthorized(request: Request, exc: _Unauthorized) -> JSONResponse:
        return _error(401, "unauthorized", "send the API key as `Authorization: Bearer <key>`",
                      headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return _error(400, "invalid_json", "the request body is not valid JSON")
        parts = []
        for e in errors[:5]:
            where = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
            parts.append(f"{where}: {e.get('msg', 'invalid')}")
        return _error(422, "invalid_request", public("; ".join(parts), f"422 {request.url.path}"))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed"}
        return _error(exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail),
                      headers=getattr(exc, "headers", None))

    @app.exception_handler(GuideragError)
    async def ours(request: Request, exc: GuideragError) -> JSONResponse:
        for kind, status, code in ERROR_STATUS:
            if isinstance(exc, kind):
                return _error(status, code, public(str(exc), f"{status} {request.url.path}"))
        _log.error("error answering %s: %s", request.url.path, exc)
        return _error(500, "internal_error", public(str(exc), f"500 {request.url.path}"))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        _log.exception("unexpected error answering %s", request.url.path)
        return _error(500, "internal_error", "an unexpected error; the server log has the details")

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        """200 while the process lives (on the event loop: never waits on the store)."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], responses={503: {"description": "store or index unavailable"}})
    async def readyz() -> JSONResponse:
        """200 when the store answers and the index of its corpus is loaded, else 503; within
        settings.api.api_ready_timeout_s ("store not answering" when the store has not answered)."""
        ready, why = await readiness.probe()
        if not ready:
            return _error(503, "not_ready", public(why, "503 /readyz"))
        return JSONResponse({"status": "ready", "corpus_state": service.loaded_run_id})

    # The answer object is JSON already (Answer.to_json): it is sent as it is, not validated
    # against a response model and walked by jsonable_encoder again (the same bytes).
    bot_config = BotConfig.of(settings)
    turns: list[anyio.Semaphore] = []  # the answer threads' turns: made by the first request, in its worker's loop

    def answered(body: AskRequest) -> JSONResponse:
        return JSONResponse(service.ask(body.question, body.mode, body.guideline, body.history).to_json())

    async def in_turn(body: AskRequest) -> JSONResponse:
        """An answer that waits on no model, on one of the answer threads (settings.api.
        api_answer_threads) when its turn comes within ANSWER_TURN_WAIT_S, else beside them
        (a store that stopped answering holds a turn until its own timeout)."""
        if not turns:
            turns.append(anyio.Semaphore(settings.api.api_answer_threads))
        took = False
        with anyio.move_on_after(ANSWER_TURN_WAIT_S):
            await turns[0].acquire()
            took = True
        try:
            return await anyio.to_thread.run_sync(answered, body)
        finally:
            if took:
                turns[0].release()

    @app.post("/v1/ask", tags=["answers"], dependencies=[Depends(require_key)], response_model=dict[str, Any])
    async def ask(body: AskRequest) -> JSONResponse:
        """Answer one question: the answer object of `guiderag ask --json`, audited first."""
        if len(body.question) > settings.api.api_max_question_chars:
            raise _BadField("question", f"at most {settings.api.api_max_question_chars} characters")
        try:
            check_history(body.history, settings.answer, settings.api.api_max_question_chars)
        except InputError as exc:
            raise _BadField("history", str(exc)) from exc
        if bot_config.waits_on_model(body.mode):
            return await anyio.to_thread.run_sync(answered, body)  # the request pool, as a plain route
        return await in_turn(body)

    @app.exception_handler(_BadField)
    async def bad_field(request: Request, exc: _BadField) -> JSONResponse:
        return _error(422, "invalid_request", f"{exc.field}: {exc.message}")

    @app.get("/v1/pages", tags=["corpus"], dependencies=[Depends(require_key)])
    def pages(guideline: str | None = None) -> dict[str, Any]:
        """The stored content pages (of one guideline), as `guiderag pages --json` lists them."""
        return {"pages": service.pages(guideline)}

    @app.get("/v1/guidelines", tags=["corpus"], dependencies=[Depends(require_key)])
    def guidelines() -> dict[str, Any]:
        """The stored guidelines, as `guiderag guidelines --json` lists them."""
        return {"guidelines": service.guidelines()}

    asgi: Any = app
    if settings.api.api_cors_origins.strip():
        from starlette.middleware.cors import CORSMiddleware

        origins = [o.strip() for o in settings.api.api_cors_origins.split(",") if o.strip()]
        app.add_middleware(CORSMiddleware, allow_origins=origins, allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])
    app.add_middleware(BodyLimit, limit=settings.api.api_max_body_bytes)
    return asgi


class _Unauthorized(Exception):
    pass


class _BadField(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
