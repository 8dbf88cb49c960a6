"""The language-model client: any OpenAI-compatible endpoint, through the `openai` package only.

OPENAI_API_KEY and OPENAI_BASE_URL (ModelConfig.openai_api_key / openai_base_url) select the
server, so OpenAI, vLLM, Ollama and llama.cpp servers all work. Each role (keywords,
answer) has its own model name. Every failure becomes a `ModelError` saying what failed
and what to check; a reply is returned whole or not at all (no partial text).

`chat()` can read the reply as a stream (config.model_stream): the caller hears how far
the model got (progress) and may stop reading as soon as the reply turns out unusable
(`stop_when`); the text so far is returned, marked stopped, for the caller to judge whole.
A process runs at most config.model_concurrency calls at once (a slot per endpoint);
a call waits at most config.model_queue_timeout_s for a slot (ModelBusyError).
"""
from __future__ import annotations

import contextlib
import re
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

from guiderag.errors import ModelBusyError, ModelError, ModelNotConfiguredError
from guiderag.redact import redact, redact_url
from guiderag.scopes import ModelConfig

if TYPE_CHECKING:  # imported when a model is first called: `import openai` costs about a second
    import openai
    from openai.types.chat import ChatCompletionMessageParam

ROLES = ("keywords", "answer")
# Local servers (llama.cpp, vLLM, Ollama) ignore the key, but the client insists on one.
PLACEHOLDER_KEY = "not-needed"
# finish_reason of a reply we stopped reading ourselves (stop_when said why).
STOPPED = "stopped"

# progress(stage, characters received so far): "queued" while waiting for a model slot,
# "writing" while the reply arrives.
Progress = Callable[[str, int], None]


@dataclass(frozen=True)
class Completion:
    """One reply: its text, how it ended, and how long it took."""

    text: str
    finish_reason: str | None  # "stop", "length" (max_tokens), STOPPED, None (a stream cut short)
    stopped: str | None = None  # why we stopped reading (stop_when's reason)
    seconds: float = 0.0  # from sending the request to the last word read
    queued_s: float = 0.0  # waiting for a model slot before that
    streamed: bool = False


# One semaphore per (endpoint, concurrency): every Chatbot of the process shares it.
_SLOTS: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


def _semaphore(endpoint: str, size: int) -> threading.BoundedSemaphore:
    with _SLOTS_LOCK:
        sem = _SLOTS.get((endpoint, size))
        if sem is None:
            sem = _SLOTS[(endpoint, size)] = threading.BoundedSemaphore(size)
        return sem


class LLMClient:
    """`complete(system, user, role=..., **params) -> str` against the configured endpoint."""

    def __init__(self, config: ModelConfig, *, client: openai.OpenAI | None = None) -> None:
        self.config = config
        self._client = client

    # -- configuration ------------------------------------------------------------
    def model_for(self, role: str) -> str | None:
        """The model name configured for a role, or None."""
        if role not in ROLES:
            raise ValueError(f"unknown model role {role!r}; expected one of {ROLES}")
        return self.config.keywords_model if role == "keywords" else self.config.answer_model

    def configured(self, role: str = "answer") -> bool:
        """True when the role has a model and there is a key or a base URL to reach it."""
        s = self.config
        return bool(self.model_for(role) and (s.openai_api_key or s.openai_base_url))

    def require(self, role: str) -> str:
        """The role's model name; ModelNotConfiguredError (exit 2) saying what to set if none."""
        model = self.model_for(role)
        s = self.config
        if not model:
            var = "GUIDERAG_KEYWORDS_MODEL" if role == "keywords" else "GUIDERAG_ANSWER_MODEL"
            raise ModelNotConfiguredError(
                f"no {role} model is configured: set {var} (or GUIDERAG_MODEL for both roles), "
                "or use --mode extract, which needs no model"
            )
        if not (s.openai_api_key or s.openai_base_url):
            raise ModelNotConfiguredError(
                "no model endpoint is configured: set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL "
                "(a vLLM, Ollama or llama.cpp server), or use --mode extract"
            )
        return model

    @property
    def client(self) -> openai.OpenAI:
        if self._client is None:
            import openai

            s = self.config
            try:
                self._client = openai.OpenAI(
                    api_key=s.openai_api_key or PLACEHOLDER_KEY,
                    base_url=s.openai_base_url or None,
                    timeout=s.model_timeout_s,
                    max_retries=max(0, int(s.model_retries)),
                )
            except openai.OpenAIError as exc:
                raise ModelError(f"cannot set up the model client: {exc}") from exc
        return self._client

    @property
    def endpoint(self) -> str:
        """The server, as shown in messages (without any credentials in the URL)."""
        return redact_url(self.config.openai_base_url) or "the OpenAI API"

    # -- calls --------------------------------------------------------------------
    def complete(
        self,
        system: str | None,
        user: str,
        *,
        role: str = "answer",
        temperature: float = 0.1,
        max_tokens: int = 1024,
        n: int = 1,
        **params: Any,
    ) -> str:
        """One chat completion: a system message (if any) and one user message -> reply text.

        Raises ModelNotConfiguredError when the role has no model or endpoint, and
        ModelError on connection errors, HTTP errors, timeouts and empty replies.
        """
        return self.chat(system, user, role=role, temperature=temperature, max_tokens=max_tokens,
                         n=n, stream=False, **params).text

    def chat(
        self,
        system: str | None,
        user: str,
        *,
        role: str = "answer",
        temperature: float = 0.1,
        max_tokens: int = 1024,
        n: int = 1,
        stream: bool | None = None,
        progress: Progress | None = None,
        stop_when: Callable[[str], str | None] | None = None,
        queue_timeout_s: float | None = None,
        **params: Any,
    ) -> Completion:
        """One chat completion as a `Completion`. With `stream` (default config.model_stream)
        the reply is read as it is written: `progress("writing", chars)` hears of it, and
        `stop_when(text so far)` returning a reason stops the reading there (finish_reason
        STOPPED). The whole call, stream included, is bounded by config.model_timeout_s; the
        wait for a slot by `queue_timeout_s` (default config.model_queue_timeout_s).
        Errors as `complete`; a stopped reply may be empty, any other empty one is an error."""
        model = self.require(role)
        messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": user}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        stream = self.config.model_stream if stream is None else stream
        where = f"model {model!r} at {self.endpoint}"
        request = dict(model=model, messages=messages, temperature=temperature, max_tokens=max_tokens,
                       n=n, **params)
        with self._slot(where, progress, queue_timeout_s) as queued_s:
            started = time.monotonic()
            with self._errors(where):
                if stream:
                    text, finish, stopped = self._read_stream(request, where, progress, stop_when)
                else:
                    text, finish, stopped = self._read_whole(request, where)
            seconds = time.monotonic() - started
        if stopped is None and not text.strip():
            raise ModelError(f"{where} returned an empty reply")
        return Completion(text, finish, stopped, seconds, queued_s, bool(stream))

    # -- internals ----------------------------------------------------------------
    @contextlib.contextmanager
    def _slot(self, where: str, progress: Progress | None, wait: float | None = None) -> Iterator[float]:
        """Hold one of the process's model slots for this endpoint (config.model_concurrency)."""
        size = int(self.config.model_concurrency)
        if size <= 0:
            yield 0.0
            return
        sem = _semaphore(self.endpoint, size)
        t0 = time.monotonic()
        if not sem.acquire(blocking=False):
            wait = self.config.model_queue_timeout_s if wait is None else wait
            if wait > 0 and progress is not None:
                progress("queued", 0)
            if wait <= 0 or not sem.acquire(timeout=wait):
                raise ModelBusyError(
                    f"{where} stayed busy: {size} call(s) of this process were running and no slot "
                    f"came free within {max(wait, 0.0):g} s (GUIDERAG_MODEL_QUEUE_TIMEOUT_S; "
                    "GUIDERAG_MODEL_CONCURRENCY sets the slots)"
                )
        try:
            yield time.monotonic() - t0
        finally:
            sem.release()

    @contextlib.contextmanager
    def _errors(self, where: str) -> Iterator[None]:
        """Every failure of a call as a ModelError saying what to check."""
        import openai

        s = self.config
        try:
            yield
        except ModelError:
            raise
        except openai.APITimeoutError as exc:
            raise self._timeout(where) from exc
        except openai.APIConnectionError as exc:
            raise ModelError(
                f"cannot reach {where}: {redact(str(exc))}. Is the server running, and is OPENAI_BASE_URL right?"
            ) from exc
        except openai.APIStatusError as exc:
            raise ModelError(
                f"{where} answered HTTP {exc.status_code}: "
                + _short(re.sub(r"^Error code: \d+ - ", "", str(exc.message)))
                + (" (check OPENAI_API_KEY)" if exc.status_code in (401, 403) else "")
                + (" (is the model name right?)" if exc.status_code == 404 else "")
            ) from exc
        except openai.OpenAIError as exc:
            raise ModelError(f"{where} failed: {_short(str(exc))}") from exc
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            # e.g. a proxy's HTML page with a JSON content type: not an OpenAI reply
            raise ModelError(
                f"{where} sent a reply that is not an OpenAI chat completion ({type(exc).__name__}: "
                f"{_short(str(exc))}); is OPENAI_BASE_URL an OpenAI-compatible /v1 endpoint?"
            ) from exc

    def _timeout(self, where: str) -> ModelError:
        s = self.config
        return ModelError(
            f"{where} did not answer within {s.model_timeout_s:g} s "
            f"({s.model_retries} retries): raise GUIDERAG_MODEL_TIMEOUT_S or check the server load"
        )

    def _read_whole(self, request: dict[str, Any], where: str) -> tuple[str, str | None, str | None]:
        response = self.client.chat.completions.create(**request)
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ModelError(f"{where} returned no choices")
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None) if message is not None else None
        if not isinstance(content, str) or not content.strip():
            raise ModelError(f"{where} returned an empty reply")
        return content, getattr(choices[0], "finish_reason", None), None

    def _read_stream(
        self,
        request: dict[str, Any],
        where: str,
        progress: Progress | None,
        stop_when: Callable[[str], str | None] | None,
    ) -> tuple[str, str | None, str | None]:
        s = self.config
        deadline = time.monotonic() + s.model_timeout_s
        stream = self.client.chat.completions.create(**request, stream=True)
        # The client's timeout bounds each read, not the whole stream: a server sending a
        # token (or a keep-alive) now and then would hold us forever. Close it at the deadline.
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            with contextlib.suppress(Exception):
                stream.close()

        watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), expire)
        watchdog.daemon = True
        watchdog.start()
        parts: list[str] = []
        chars = 0
        finish: str | None = None
        stopped: str | None = None
        try:
            for chunk in stream:
                choices = getattr(chunk, "choices", None) or []
                if not choices:
                    continue
                delta = getattr(choices[0], "delta", None)
                piece = getattr(delta, "content", None) if delta is not None else None
                finish = getattr(choices[0], "finish_reason", None) or finish
                if piece:
                    parts.append(piece)
                    chars += len(piece)
                    if progress is not None:
                        progress("writing", chars)
                    if stop_when is not None:
                        stopped = stop_when("".join(parts))
                        if stopped:
                            finish = STOPPED
                            break
        except Exception as exc:
            if expired.is_set():  # our own close at the deadline broke the read
                raise self._timeout(where) from exc
            raise
        finally:
            watchdog.cancel()
            with contextlib.suppress(Exception):
                stream.close()
        if expired.is_set() and stopped is None and finish is None:
            raise self._timeout(where)
        return "".join(parts), finish, stopped


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
