"""POST /v1/ask runs answers that wait on no model on the process's answer threads, one
at a time by default (api/app.py), and every other answer in the request pool; an answer
that waited ANSWER_TURN_WAIT_S for its turn runs beside them. Asked in-process (TestClient)
of an application whose service records how many answers run at once."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from guiderag.api import app as api_app
from guiderag.chatbot.config import BotConfig
from guiderag.settings import Settings


class Recorder:
    """A service whose answers take `hold_s` (questions starting "slow": `slow_s`) and count
    how many run at once."""

    def __init__(self, hold_s: float = 0.05, slow_s: float = 0.0) -> None:
        self.hold_s, self.slow_s = hold_s, slow_s
        self.lock = threading.Lock()
        self.running = self.most = 0

    def ask(self, question: str, mode: str | None, guideline: str | None = None,
            history: list[str] | None = None) -> Any:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(self.slow_s if question.startswith("slow") else self.hold_s)
        finally:
            with self.lock:
                self.running -= 1
        return SimpleNamespace(to_json=lambda: {"question": question, "mode": mode})


def _app(tmp_path: Path, service: Recorder, **env: str) -> TestClient:
    settings = Settings.load(env=env, db=str(tmp_path / "unused.db"))
    return TestClient(api_app.create_app(settings, service=service))  # type: ignore[arg-type]


def _ask_at_once(http: TestClient, bodies: list[dict]) -> list[int]:
    with ThreadPoolExecutor(len(bodies)) as pool:
        return [r.status_code for r in pool.map(lambda b: http.post("/v1/ask", json=b), bodies)]


@pytest.fixture
def patient_turns(monkeypatch):
    """Answers wait for their turn as long as these tests take (no answer runs beside)."""
    monkeypatch.setattr(api_app, "ANSWER_TURN_WAIT_S", 60.0)


def test_answers_that_wait_on_no_model_run_one_at_a_time(tmp_path, patient_turns):
    service = Recorder()
    with _app(tmp_path, service) as http:
        assert _ask_at_once(http, [{"question": f"q{i}"} for i in range(8)]) == [200] * 8
    assert service.most == 1


def test_more_answer_threads_run_that_many_at_once(tmp_path, patient_turns):
    service = Recorder(hold_s=0.1)
    with _app(tmp_path, service, GUIDERAG_API_ANSWER_THREADS="2") as http:
        assert _ask_at_once(http, [{"question": f"q{i}"} for i in range(8)]) == [200] * 8
    assert service.most == 2


@pytest.mark.parametrize("env, body", [
    ({}, {"mode": "generate"}),  # a model mode (the answer model may be missing: the service says so)
    ({"GUIDERAG_KEYWORDS_MODEL": "kw", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, {}),  # model keywords
])
def test_answers_that_may_wait_on_a_model_run_side_by_side(tmp_path, env, body):
    service = Recorder(hold_s=0.2)
    with _app(tmp_path, service, **env) as http:
        assert _ask_at_once(http, [{"question": f"q{i}", **body} for i in range(6)]) == [200] * 6
    assert service.most > 1


def test_an_answer_held_up_lets_the_others_run_beside_it(tmp_path):
    """A turn held far longer than an answer takes (a store that stopped answering): the
    answers behind it wait ANSWER_TURN_WAIT_S, not until it ends."""
    service = Recorder(hold_s=0.01, slow_s=3.0)
    with _app(tmp_path, service) as http:
        with ThreadPoolExecutor(1) as slow_pool:
            slow = slow_pool.submit(http.post, "/v1/ask", json={"question": "slow one"})
            while service.running == 0:
                time.sleep(0.01)
            started = time.monotonic()
            assert _ask_at_once(http, [{"question": f"q{i}"} for i in range(4)]) == [200] * 4
            took = time.monotonic() - started
            assert not slow.done()
            assert slow.result().status_code == 200
    assert api_app.ANSWER_TURN_WAIT_S <= took < 2.0, took


def test_which_answers_may_wait_on_a_model():
    offline = BotConfig.of(Settings.load(env={}))
    assert not offline.waits_on_model(None) and not offline.waits_on_model("extract")
    assert offline.waits_on_model("lines") and offline.waits_on_model("generate")
    keywords = BotConfig.of(Settings.load(env={"GUIDERAG_KEYWORDS_MODEL": "kw", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}))
    assert keywords.waits_on_model("extract")
    lines_default = BotConfig.of(Settings.load(env={"GUIDERAG_MODE": "lines"}))
    assert lines_default.waits_on_model(None)
