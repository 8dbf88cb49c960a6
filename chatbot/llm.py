"""The language-model client: any OpenAI-compatible endpoint, through the `openai` package only.

OPENAI_API_KEY and OPENAI_BASE_URL (settings.openai_api_key / openai_base_url) select the
server, so OpenAI, vLLM, Ollama and llama.cpp servers all work. Each role (keywords,
answer) has its own model name. Every failure becomes a `ModelError` saying what failed
and what to check; a reply is returned whole or not at all (no partial text).
"""
from __future__ import annotations

import re
from typing import Any

import openai
from openai.types.chat import ChatCompletionMessageParam

from guiderag.errors import ModelError, ModelNotConfiguredError
from guiderag.redact import redact, redact_url
from guiderag.settings import Settings

ROLES = ("keywords", "answer")
# Local servers (llama.cpp, vLLM, Ollama) ignore the key, but the client insists on one.
PLACEHOLDER_KEY = "not-needed"


class LLMClient:
    """`complete(system, user, role=..., **params) -> str` against the configured endpoint."""

    def __init__(self, settings: Settings, *, client: openai.OpenAI | None = None) -> None:
        self.settings = settings
        self._client = client

    # -- configuration ------------------------------------------------------------
    def model_for(self, role: str) -> str | None:
        """The model name configured for a role, or None."""
        if role not in ROLES:
            raise ValueError(f"unknown model role {role!r}; expected one of {ROLES}")
        return self.settings.keywords_model if role == "keywords" else self.settings.answer_model

    def configured(self, role: str = "answer") -> bool:
        """True when the role has a model and there is a key or a base URL to reach it."""
        s = self.settings
        return bool(self.model_for(role) and (s.openai_api_key or s.openai_base_url))

    def require(self, role: str) -> str:
        """The role's model name; ModelNotConfiguredError (exit 2) saying what to set if none."""
        model = self.model_for(role)
        s = self.settings
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
            s = self.settings
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
        return redact_url(self.settings.openai_base_url) or "the OpenAI API"

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
        model = self.require(role)
        messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": user}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        s = self.settings
        where = f"model {model!r} at {self.endpoint}"
        try:
            response = self.client.chat.completions.create(
                model=model,
                messages=messages,
                temperature=temperature,
                max_tokens=max_tokens,
                n=n,
                **params,
            )
        except openai.APITimeoutError as exc:
            raise ModelError(
                f"{where} did not answer within {s.model_timeout_s:g} s "
                f"({s.model_retries} retries): raise GUIDERAG_MODEL_TIMEOUT_S or check the server load"
            ) from exc
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
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise ModelError(f"{where} returned no choices")
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None) if message is not None else None
        if not isinstance(content, str) or not content.strip():
            raise ModelError(f"{where} returned an empty reply")
        return content


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
