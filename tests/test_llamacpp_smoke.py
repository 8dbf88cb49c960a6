"""Smoke test against llama-cpp-python's OpenAI-compatible server, where it is installed.

Needs the `llama_cpp` package and a small GGUF chat model named by GUIDERAG_LLAMACPP_MODEL;
skipped cleanly otherwise (neither is part of the standard set-up). The server runs on
127.0.0.1 on a free port and is stopped at the end.
"""
from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guiderag.chatbot import Chatbot
from guiderag.chatbot.llm import LLMClient
from guiderag.settings import Settings
from chatbot_helpers import indexed_settings

MODEL = os.environ.get("GUIDERAG_LLAMACPP_MODEL", "")
START_TIMEOUT_S = 120.0

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python is not installed"),
    pytest.mark.skipif(not MODEL or not Path(MODEL).is_file(),
                       reason="set GUIDERAG_LLAMACPP_MODEL to a GGUF chat model to run this smoke test"),
    pytest.mark.slow,
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", MODEL, "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "4096"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("llama_cpp.server did not start in time")
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_llamacpp_server_answers_through_the_openai_client(server, tmp_path):
    settings = Settings.load(env={}, openai_base_url=server, answer_model="local", model_timeout_s=120.0,
                             model_retries=0)
    reply = LLMClient(settings).complete("短く答えてください。", "1たす1は？", max_tokens=16)
    assert reply.strip()


def test_lines_mode_with_a_local_model_shows_only_stored_lines(server, tmp_path):
    settings = indexed_settings(tmp_path, openai_base_url=server, answer_model="local",
                                model_timeout_s=120.0, model_retries=0)
    with Chatbot(settings) as bot:
        answer = bot.ask("胸腺腫にはどのような治療法がありますか？", "lines")
        stored = {line for p in bot.store.current_pages() for line in p.lines}
    assert answer.coverage in ("governed", "not_governed")
    if answer.governed:
        assert all(line in stored for line in answer.answer.split("\n"))
