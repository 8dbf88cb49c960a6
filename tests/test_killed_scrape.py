"""A scrape killed with SIGKILL (the processes here are the test's own children): its run is
shown `aborted` from then on (the scrape lock says its process is gone), and the temporary
URL workbook it was about to install is removed by the next scrape, while a live one's is
left alone."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guiderag.cli import main
from guiderag.files import BesideFile, remove_dead_temporaries
from guiderag.processes import clean_env
from sitekit import Site, html_page, toc_html

TOC = "/guide/index.html"
WAIT_S = 60.0


def _site() -> Site:
    site = Site()
    site.page(TOC, toc_html([(f"q{i}.html", f"Q{i}") for i in range(1, 4)]))
    for i in range(1, 4):
        site.page(f"/guide/q{i}.html", html_page(f"Q{i} 治療 {i}", f"<main><h1>Q{i}</h1><p>治療{i}の説明です。</p></main>"))
    return site


def _start_scrape(db: Path | str, toc_url: str, log: Path, **env: str) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "guiderag", "scrape", toc_url, "--db", str(db), "--no-index"],
                                env=clean_env(**{"GUIDERAG_DELAY_S": "0", **env}), stdout=out, stderr=subprocess.STDOUT)


def _wait_for(what: str, test, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not test():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{what} never happened: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.02)


def _rows(db: Path | str, capsys) -> dict[str, dict]:
    capsys.readouterr()
    assert main(["guidelines", "--json", "--db", str(db)]) == 0
    return {r["id"]: r for r in json.loads(capsys.readouterr().out)["guidelines"]}


def _running(db: Path | str) -> bool:
    from guiderag.store import Store

    with Store(db, create=False) as store:
        run = store.last_run(status=None)
        return run is not None and run["status"] == "running"


def test_a_killed_scrape_is_shown_aborted_not_scraping(store_at, tmp_path: Path, capsys, no_settings_env,
                                                       monkeypatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))  # a PostgreSQL store's workbook goes there
    site = _site()
    with site.serve() as base:
        assert main(["scrape", base + TOC, "--db", str(store_at), "--no-index", "--no-progress", "--delay", "0"]) == 0
        # the next scrape hangs in a page that trickles: alive, holding the scrape lock
        site.routes["/guide/q2.html"].trickle_s = 5.0
        log = tmp_path / "scrape.log"
        proc = _start_scrape(store_at, base + TOC, log)
        try:
            _wait_for("the run to start", lambda: _running(store_at), proc, log)
            _wait_for("the slow page to be asked for", lambda: site.hits["/guide/q2.html"] >= 2, proc, log)
            row = _rows(store_at, capsys)["default"]
            assert row["status"] == "scraping" and row["last_run"]["status"] == "running"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        # PostgreSQL releases the dead session's advisory lock once it sees the connection close
        deadline = time.monotonic() + 10
        while (row := _rows(store_at, capsys)["default"])["status"] == "scraping" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert row["status"] == "aborted", row
        assert row["last_run"]["status"] == "aborted" and "process ended" in row["last_run"]["message"]
        assert row["pages"] == 3  # the corpus as it was
        site.routes["/guide/q2.html"].trickle_s = 0
        assert main(["scrape", base + TOC, "--db", str(store_at), "--no-index", "--no-progress", "--delay", "0"]) == 0
    assert "marked 1 unfinished earlier run(s) aborted" in capsys.readouterr().err
    assert _rows(store_at, capsys)["default"]["status"] == "ok"


def test_kill_9_during_the_commit_leaves_a_workbook_the_next_scrape_removes(fast_env: Path, tmp_path: Path,
                                                                            capsys) -> None:
    db = fast_env
    site = _site()
    workbook = db.with_name("cli.urls.xlsx")
    with site.serve() as base:
        assert main(["scrape", base + TOC, "--no-index"]) == 0
        first = workbook.read_bytes()
        log = tmp_path / "scrape.log"
        # the child scrapes slowly (0.3 s between pages), so the store is locked before it commits
        proc = _start_scrape(db, base + TOC, log, GUIDERAG_DELAY_S="0.3")
        blocker = sqlite3.connect(db, timeout=30, isolation_level=None)
        try:
            _wait_for("the run to start", lambda: _running(db), proc, log)
            blocker.execute("BEGIN IMMEDIATE")  # commit_run now waits for the store
            temporaries = lambda: sorted(db.parent.glob(".cli.urls.xlsx.*.tmp"))  # noqa: E731
            _wait_for("the temporary workbook", temporaries, proc, log)
            time.sleep(0.2)  # inside commit_run, waiting on the lock
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            blocker.execute("ROLLBACK") if blocker.in_transaction else None
            blocker.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        [left] = temporaries()
        assert left.stat().st_size > 0 and workbook.read_bytes() == first  # what #24 found: left behind
        capsys.readouterr()
        assert main(["scrape", base + TOC, "--no-index"]) == 0
    err = capsys.readouterr().err
    assert not left.exists() and temporaries() == []
    assert f"removed 1 temporary URL workbook(s) of scrapes that did not finish: {left.name}" in err
    assert workbook.exists()


def test_a_live_writers_temporary_file_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "book.xlsx"
    live = BesideFile(target)  # held by this process: alive
    dead = tmp_path / ".book.xlsx.abc123.tmp"
    dead.write_bytes(b"left by a killed process")
    other = tmp_path / ".other.xlsx.abc123.tmp"
    other.write_bytes(b"another target's")
    assert remove_dead_temporaries(target) == [dead.name]
    assert live.path.exists() and other.exists() and not dead.exists()
    live.path.write_bytes(b"new")
    live.install()
    assert target.read_bytes() == b"new" and not live.path.exists()
    assert remove_dead_temporaries(target) == []


@pytest.mark.parametrize("argv", [
    ["scrape", "http://127.0.0.1:9/guide/index.html", "--guideline", "gastric\n"],
    ["scrape", "--sample", "--guideline", "gastric\n"],
    ["index", "--guideline", "gastric\n"],
    ["ask", "胃がんの治療は？", "--guideline", "gastric\n"],
    ["guidelines", "--remove", "gastric\n"],
])
def test_a_guideline_id_with_a_trailing_newline_is_refused_and_creates_nothing(argv, fast_env: Path, capsys) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "'gastric\\n'" in err and ("cannot name a guideline" in err or "--guideline must be" in err)
    assert list(fast_env.parent.iterdir()) == []  # no store, index folder or workbook
