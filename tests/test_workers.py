"""`guiderag serve --workers N` (api.workers): real worker processes over a real SQLite store.

What is asserted is what the pre-fork server promises: N worker processes answer on one
port, every answer is audited before it is returned (one row per 200), a worker that dies
is replaced, the index loaded before the fork is what the workers answer from (no worker
builds one), and SIGTERM stops every worker. (Each worker's reload on a changed store is
chatbot.library_cache's, the same code as one process: tests/test_api.)
"""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from guiderag.processes import answers_200, clean_env, free_port, stop_process, wait_until_serving
from storekit import copy_store

QUESTIONS = ("胸腺腫瘍にはどのような治療法がありますか？", "抗がん剤の副作用が心配です", "手術の後、いつから仕事に戻れますか",
             "骨折したときのギプスの巻き方を教えてください")


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        out |= {int(c) for c in (task / "children").read_text().split()}
    return out


def _audit_rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM audit").fetchone()[0])


def _wait(condition, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads worker processes from Linux /proc")
def test_two_workers_answer_audit_survive_a_dead_worker_and_stop_together(scraped_sample: Path, tmp_path: Path) -> None:
    db = copy_store(scraped_sample, tmp_path / "guide.db")
    index = db.with_name(db.name + ".index")
    built = sorted(p.name for p in index.rglob("manifest.json"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "guiderag", "serve", "--db", str(db), "--port", str(port),
                                 "--workers", "2"], env=clean_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        assert wait_until_serving(proc, lambda: answers_200(url + "/readyz"), 120, poll_s=0.1), log.read_text()
        assert "with 2 workers" in log.read_text()
        assert _wait(lambda: len(_children(proc.pid)) == 2), "two worker processes"
        workers = _children(proc.pid)
        before = _audit_rows(db)
        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(lambda q: requests.post(url + "/v1/ask", json={"question": q}, timeout=60),
                                    [QUESTIONS[i % len(QUESTIONS)] for i in range(24)]))
        assert [r.status_code for r in replies] == [200] * 24
        assert _audit_rows(db) - before == 24  # every answer audited before it was returned
        assert {r.json()["answer"] for r in replies[:4]} == {r.json()["answer"] for r in replies[4:8]}
        # the index loaded before the fork is the one answered from: no worker built another
        assert sorted(p.name for p in index.rglob("manifest.json")) == built
        # a worker that dies is replaced; the server keeps answering
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        assert _wait(lambda: len(_children(proc.pid)) == 2 and victim not in _children(proc.pid))
        assert requests.post(url + "/v1/ask", json={"question": QUESTIONS[0]}, timeout=60).status_code == 200
        assert "starting another" in log.read_text()
        # SIGTERM: the workers finish and exit with the supervisor
        last = _children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert not [p for p in last if Path(f"/proc/{p}").exists() and "zombie" not in
                    Path(f"/proc/{p}/status").read_text().lower()]
    finally:
        stop_process(proc)
