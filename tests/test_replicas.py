"""Replicas: several `guiderag serve` processes, and several Streamlit chat processes, over one
PostgreSQL store give the same answers, and every request is audited exactly once."""
from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Iterator

import psycopg
import pytest
import requests

from apikit import serve
from guiderag.cli import main
from guiderag.processes import SETTINGS_ENV_PREFIXES

QUESTIONS = ["胸腺腫瘍にはどのような治療法がありますか？", "抗がん剤の副作用が心配です",
             "骨折したときのギプスの巻き方を教えてください", "放射線治療の副作用は？"]


def audit_rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM audit").fetchone()[0])


@pytest.fixture(scope="module")
def sample_pg(postgres: str, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """The bundled sample scraped into a database of the session's server; (url, XDG folder)."""
    import uuid

    name = "replicas_" + uuid.uuid4().hex[:8]
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = postgres.rsplit("/", 1)[0] + "/" + name
    xdg = tmp_path_factory.mktemp("replicas-xdg")
    with pytest.MonkeyPatch.context() as env:  # in this process: the replicas are what is tested
        for key in [k for k in os.environ if k.startswith(SETTINGS_ENV_PREFIXES)]:
            env.delenv(key)
        env.setenv("XDG_DATA_HOME", str(xdg))  # where the index of a PostgreSQL store lives
        assert main(["scrape", "--sample", "--db", url, "--no-progress", "--delay", "0"]) == 0
        # one audit row, so the table exists before the count below
        assert main(["ask", QUESTIONS[0], "--db", url]) == 0
    yield url, xdg


@pytest.mark.slow  # two uvicorn replicas on one PostgreSQL
def test_two_api_replicas_answer_alike_and_audit_each_request_once(sample_pg, tmp_path: Path) -> None:
    url, xdg = sample_pg
    env = {"XDG_DATA_HOME": str(xdg)}
    with serve(url, tmp_path / "a.log", **env) as a, serve(url, tmp_path / "b.log", **env) as b:
        for replica in (a, b):
            assert requests.get(replica + "/readyz", timeout=120).status_code == 200
        before = audit_rows(url)
        statuses: list[int] = []
        answers: dict[tuple[str, str], set[str]] = {}
        lock = threading.Lock()

        def client(k: int) -> None:
            with requests.Session() as session:
                for i in range(10):
                    n = k * 10 + i
                    replica = (a, b)[n % 2]
                    question = QUESTIONS[n % len(QUESTIONS)]
                    reply = session.post(replica + "/v1/ask", json={"question": question}, timeout=120)
                    with lock:
                        statuses.append(reply.status_code)
                        if reply.status_code == 200:
                            body = reply.json()
                            key = (question, body["coverage"])
                            answers.setdefault(key, set()).add(body["answer"])

        threads = [threading.Thread(target=client, args=(k,)) for k in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert statuses == [200] * 100
    assert audit_rows(url) == before + 100
    assert {q for q, _ in answers} == set(QUESTIONS)
    assert all(len(texts) == 1 for texts in answers.values()), answers  # both replicas, one answer


@pytest.mark.browser
def test_two_chat_processes_over_one_store_answer_alike(sample_pg, tmp_path: Path,
                                                        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Two real Streamlit processes (the chat page), each asked the same question in Chromium."""
    from browserkit import chromium, last_message, need_browser, open_chat, send, streamlit_app

    need_browser()
    from selenium.webdriver.common.by import By

    url, xdg = sample_pg
    chat = contextlib.contextmanager(streamlit_app)
    with contextlib.ExitStack() as running:
        bases = [running.enter_context(chat(tmp_path_factory, {"GUIDERAG_DB": url, "XDG_DATA_HOME": str(xdg)}))
                 for _ in range(2)]
        driver = chromium(tmp_path / "chromium")
        running.callback(driver.quit)
        before = audit_rows(url)
        shown = []
        for base in bases:
            open_chat(driver, base, 1280, 1200)
            send(driver, QUESTIONS[0])
            reply = last_message(driver)
            shown.append([q.text for q in reply.find_elements(By.CSS_SELECTOR, ".grag-quote")])
        assert shown[0] and shown[0] == shown[1]
        assert audit_rows(url) == before + 2
