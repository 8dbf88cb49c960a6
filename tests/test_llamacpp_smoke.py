"""The local model server itself, through the real `openai` client: it starts, speaks the
chat format Gemma needs, streams, and each role's call comes back bounded.

The server is tests/local_model.py's (the `local_model` session fixture), installed by the
`llm` extra that scripts/test.sh installs: these tests run in CI, they do not skip.
"""
from __future__ import annotations

import time

import pytest

from guiderag.chatbot.llm import LLMClient
from guiderag.retrieval.keywords import keyword_prompt
from local_model import model_settings

pytestmark = [pytest.mark.model, pytest.mark.slow]


def test_the_server_answers_through_the_openai_client(local_model):
    llm = LLMClient(model_settings(local_model).model)
    t0 = time.monotonic()
    completion = llm.chat("短く答えてください。", "胸腺腫の治療法は？", max_tokens=16, stream=False)
    print(f"\n16-token completion: {time.monotonic() - t0:.1f} s")
    assert completion.text.strip() and completion.finish_reason in ("stop", "length")
    # The gemma chat format, not llama-2's: no [INST] / <<SYS>> wrapping echoed back.
    assert "INST" not in completion.text and "<<SYS>>" not in completion.text


def test_a_stream_can_be_stopped_after_its_first_words(local_model):
    llm = LLMClient(model_settings(local_model).model)
    seen: list[int] = []
    t0 = time.monotonic()
    completion = llm.chat(None, "胸腺腫瘍の治療について説明してください。", max_tokens=256, stream=True,
                          progress=lambda stage, chars: seen.append(chars),
                          stop_when=lambda text: "enough" if len(text) >= 10 else None)
    print(f"\nstream stopped after {len(completion.text)} characters: {time.monotonic() - t0:.1f} s")
    assert completion.stopped == "enough" and completion.streamed and 10 <= len(completion.text) < 200
    assert seen and seen == sorted(seen)


def test_a_keywords_call_comes_back_within_its_budget(local_model):
    llm = LLMClient(model_settings(local_model).model)
    system, user = keyword_prompt("胸腺腫の治療法は？", 2)
    completion = llm.chat(system, user, role="keywords", max_tokens=64)
    assert completion.text.strip()
    assert completion.finish_reason in ("stop", "length", "stopped")
