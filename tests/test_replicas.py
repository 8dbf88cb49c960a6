"""Replicas: several `guiderag serve` processes, and several Streamlit chat processes, over one
PostgreSQL store give the same answers, and every request is audited exactly once."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import psycopg
import pytest
import requests

from apikit import clean_env, free_port, serve

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
    done = subprocess.run([sys.executable, "-m", "guiderag", "scrape", "--sample", "--db", url],
                          env=clean_env(XDG_DATA_HOME=str(xdg)), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    # one audit row, so the table exists before the count below
    subprocess.run([sys.executable, "-m", "guiderag", "ask", QUESTIONS[0], "--db", url],
                   env=clean_env(XDG_DATA_HOME=str(xdg)), capture_output=True, timeout=300, check=True)
    yield url, xdg


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
def test_two_chat_processes_over_one_store_answer_alike(sample_pg, tmp_path: Path) -> None:
    """Two real Streamlit processes (the chat page), each asked the same question in Chromium."""
    from test_browser import START_TIMEOUT_S, _need_browser, last_message, open_chat, send

    _need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as ChromeService
    from selenium.webdriver.common.by import By

    from test_browser import CHROMEDRIVER, CHROMIUM

    url, xdg = sample_pg
    procs, bases = [], []
    repo = Path(__file__).resolve().parents[1]
    for i in range(2):
        port = free_port()
        log = open(tmp_path / f"streamlit-{i}.log", "wb")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
             "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false"],
            cwd=repo, env=clean_env(GUIDERAG_DB=url, XDG_DATA_HOME=str(xdg)), stdout=log, stderr=subprocess.STDOUT))
        log.close()
        bases.append(f"http://127.0.0.1:{port}/")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tmp_path / "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--lang=ja-JP", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=ChromeService(CHROMEDRIVER), options=options)
    try:
        for base in bases:
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                try:
                    if requests.get(base + "_stcore/health", timeout=2).status_code == 200:
                        break
                except requests.RequestException:
                    pass
                assert time.monotonic() < deadline, (tmp_path / "streamlit-0.log").read_text(errors="replace")
                time.sleep(0.2)
        before = audit_rows(url)
        shown = []
        for base in bases:
            open_chat(driver, base, 1280, 1200)
            send(driver, QUESTIONS[0])
            reply = last_message(driver)
            shown.append([q.text for q in reply.find_elements(By.CSS_SELECTOR, ".grag-quote")])
        assert shown[0] and shown[0] == shown[1]
        assert audit_rows(url) == before + 2
    finally:
        driver.quit()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
