"""`guiderag serve` under faults (issue #24), through real uvicorn processes on loopback:

- a PostgreSQL server stopped with SIGSTOP while 45 requests are in flight: /healthz still
  answers within a second, /readyz says "store not answering" within its own deadline, the
  requests end (an answer or a 503 JSON error) and the API recovers after SIGCONT;
- error bodies name no path of the machine and no credential, /readyz included;
- a client trickling its request (or sending none) gets 408 and is disconnected;
- an API key no HTTP client could send is refused at start-up.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest
import requests

from apikit import serve
from guiderag.cli import main
from guiderag.processes import free_port
from storekit import copy_store

pytestmark = pytest.mark.slow  # faults waited out: a stopped PostgreSQL, slow clients, each case a uvicorn process

THYMIC = "胸腺腫瘍にはどのような治療法がありますか？"
IN_FLIGHT = 45
SECRET = "Pg5ecretXq"


@pytest.fixture
def private_data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_settings_env) -> Path:
    """What a PostgreSQL store keeps on this machine (its index, its URL workbook) goes under
    tmp_path, for this process and the servers it starts, not under the user's data folder."""
    home = tmp_path / "xdg-data"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    return home


# --- a hung PostgreSQL ---------------------------------------------------------------------
# The store's bounded waits (h-store's settings), small so that the test is short.
PG_WAITS = {"GUIDERAG_PG_CONNECT_TIMEOUT_S": "2", "GUIDERAG_PG_STATEMENT_TIMEOUT_S": "3",
            "GUIDERAG_PG_POOL_TIMEOUT_S": "3"}
# Every request has ended by then: its thread (45 requests, 40 threads) then the pool or its
# statement; on a loaded 2-core machine, with room.
ALL_ENDED_S = 30.0


def _timed_get(url: str, timeout: float = 30.0) -> tuple[requests.Response, float]:
    started = time.monotonic()
    reply = requests.get(url, timeout=timeout)
    return reply, time.monotonic() - started


def test_a_stopped_postgresql_does_not_hang_the_api(tmp_path: Path, private_data_home: Path) -> None:
    """kill -STOP of the whole server with 45 requests in flight: /healthz within 1 s,
    /readyz "store not answering" within its 2 s, every request a 503 JSON error once the
    store's waits run out (before the server resumes), and the API answering again after
    SIGCONT."""
    from pgkit import paused, postgres_server

    with postgres_server() as pg:
        assert main(["scrape", "--sample", "--db", pg, "--no-progress", "--delay", "0"]) == 0
        with serve(pg, tmp_path / "serve.log", GUIDERAG_API_READY_TIMEOUT_S="2", **PG_WAITS) as api:
            assert requests.get(api + "/readyz", timeout=120).status_code == 200
            assert requests.post(api + "/v1/ask", json={"question": THYMIC}, timeout=60).status_code == 200
            results: list[tuple[int, dict, float]] = []
            lock = threading.Lock()

            def client() -> None:
                started = time.monotonic()
                try:
                    reply = requests.post(api + "/v1/ask", json={"question": THYMIC}, timeout=300)
                    outcome = (reply.status_code, reply.json(), time.monotonic() - started)
                except (requests.RequestException, ValueError) as exc:
                    outcome = (-1, {"exception": repr(exc)}, time.monotonic() - started)
                with lock:
                    results.append(outcome)

            with paused(pg):
                clients = [threading.Thread(target=client, daemon=True) for _ in range(IN_FLIGHT)]
                for t in clients:
                    t.start()
                end_by = time.monotonic() + ALL_ENDED_S
                time.sleep(1.0)  # every one of them is waiting by now: on a thread, the pool or the server
                for _ in range(5):
                    health, took = _timed_get(api + "/healthz")
                    assert health.status_code == 200 and took < 1.0, took
                ready, took = _timed_get(api + "/readyz")
                assert ready.status_code == 503 and took < 2.0 + 1.0, (ready.status_code, took)
                # which of two equal waits ends first decides the words: the readiness check's own
                # timeout ("store not answering") or the store's connect timeout it is inside
                # ("store unavailable: ... did not accept a connection within 2 s"); both say the store
                assert ready.json()["error"]["message"].startswith(("store not answering", "store unavailable")), \
                    ready.json()
                again, took = _timed_get(api + "/readyz")  # the check still waits: the same answer, as fast
                assert again.status_code == 503 and took < 2.0 + 1.0
                for t in clients:  # the server is still stopped
                    t.join(timeout=max(0.0, end_by - time.monotonic()))
                ended = list(results)
            assert len(ended) == IN_FLIGHT, f"{IN_FLIGHT - len(ended)} requests still waiting on the stopped server"
            for status, body, _ in ended:  # each a JSON error saying the store did not answer, never a hang
                assert status == 503 and body["error"]["code"] == "store_timeout", body
                assert " within " in body["error"]["message"] and "/tmp/" not in body["error"]["message"]
            deadline = time.monotonic() + 30
            while requests.get(api + "/readyz", timeout=30).status_code != 200:
                assert time.monotonic() < deadline, "the API did not recover after SIGCONT"
                time.sleep(0.2)
            after = requests.post(api + "/v1/ask", json={"question": THYMIC}, timeout=60)
            assert after.status_code == 200 and after.json()["coverage"] == "governed"


# --- no path of the machine, no credential ----------------------------------------------
def _bodies(api: str) -> dict[str, requests.Response]:
    return {
        "readyz": requests.get(api + "/readyz", timeout=60),
        "ask": requests.post(api + "/v1/ask", json={"question": THYMIC}, timeout=60),
        "ask_unknown_guideline": requests.post(api + "/v1/ask", json={"question": THYMIC, "guideline": "nope"},
                                               timeout=60),
        "pages": requests.get(api + "/v1/pages", timeout=60),
        "guidelines": requests.get(api + "/v1/guidelines", timeout=60),
    }


def _assert_private(replies: dict[str, requests.Response], *secrets: str) -> None:
    for name, reply in replies.items():
        text = reply.text
        for secret in (*secrets, "/tmp/", str(Path.home()) + "/"):
            assert secret not in text, (name, reply.status_code, text)


@pytest.mark.parametrize("kind", ["missing", "empty_file", "no_pages", "damaged"])
def test_api_errors_name_no_path_of_the_machine(kind: str, tmp_path: Path, no_settings_env) -> None:
    folder = tmp_path / "srv-guiderag-private"
    folder.mkdir()
    db = folder / "api.db"
    if kind == "empty_file":
        db.touch()
    elif kind == "no_pages":
        from guiderag.store import Store

        Store(db).close()
    elif kind == "damaged":
        db.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    log = tmp_path / "serve.log"
    with serve(db, log) as api:
        replies = _bodies(api)
    assert replies["readyz"].status_code == 503 and replies["readyz"].json()["error"]["code"] == "not_ready"
    assert replies["ask"].status_code in (400, 503)
    for reply in replies.values():
        assert reply.headers["content-type"].startswith("application/json")
        assert reply.status_code == 200 or "error" in reply.json()
    _assert_private(replies, str(folder), "srv-guiderag-private")
    assert "the store" in replies["readyz"].json()["error"]["message"]
    assert str(db) in log.read_text()  # the server's log has it whole


def test_an_unknown_guideline_is_400_without_the_stores_path(scraped_sample: Path, tmp_path: Path,
                                                             no_settings_env) -> None:
    (tmp_path / "private-folder").mkdir()
    db = copy_store(scraped_sample, tmp_path / "private-folder" / "guide.db")
    with serve(db, tmp_path / "serve.log") as api:
        replies = _bodies(api)
    assert replies["readyz"].status_code == 200 and replies["ask"].status_code == 200
    bad = replies["ask_unknown_guideline"]
    assert bad.status_code == 400 and "no guideline 'nope' in the store" in bad.json()["error"]["message"]
    _assert_private(replies, "private-folder")


def test_a_password_in_the_urls_query_never_reaches_a_client_or_the_log(pg_database: str, tmp_path: Path,
                                                                        capsys, private_data_home: Path) -> None:
    """libpq reads `?password=`: the store's URL carries it, as a deployment may (the tests'
    server trusts loopback, so it is accepted and ignored)."""
    url = f"{pg_database}?password={SECRET}&sslmode=disable"
    assert main(["scrape", "--sample", "--db", url, "--no-progress", "--delay", "0"]) == 0
    assert SECRET not in capsys.readouterr().err
    log = tmp_path / "serve.log"
    with serve(url, log) as api:
        replies = _bodies(api)
    assert replies["ask"].status_code == 200 and replies["ask_unknown_guideline"].status_code == 400
    _assert_private(replies, SECRET)
    started = log.read_text()
    assert "serving postgresql://" in started and "password=***" in started and SECRET not in started
    # the database down (nothing listens on its port): /readyz and the CLI say so, without it
    down = f"postgresql://guiderag:{SECRET}u@127.0.0.1:{free_port()}/guiderag?password={SECRET}&sslpassword={SECRET}"
    with serve(down, tmp_path / "down.log") as api:
        replies = _bodies(api)
    assert replies["readyz"].status_code == 503 and "store unavailable" in replies["readyz"].json()["error"]["message"]
    _assert_private(replies, SECRET)
    assert SECRET not in (tmp_path / "down.log").read_text()
    capsys.readouterr()
    assert main(["pages", "--db", down]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach the PostgreSQL store postgresql://***@127.0.0.1" in err
    assert SECRET not in err


# --- slow clients -------------------------------------------------------------------------
def _read_until_closed(sock: socket.socket, limit_s: float) -> tuple[bytes, float]:
    started = time.monotonic()
    sock.settimeout(0.2)
    got = b""
    while time.monotonic() - started < limit_s:
        try:
            chunk = sock.recv(4096)
        except socket.timeout:
            continue
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    return got, time.monotonic() - started


@pytest.fixture(scope="module")
def strict_api(scraped_sample: Path, tmp_path_factory) -> str:
    db = copy_store(scraped_sample, tmp_path_factory.mktemp("strict") / "guide.db")
    with serve(db, tmp_path_factory.mktemp("strict-log") / "serve.log", GUIDERAG_API_REQUEST_TIMEOUT_S="2") as api:
        yield api


@pytest.mark.parametrize("first,then", [
    (b"", b""),  # connects and says nothing
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ", b"a"),  # headers a byte at a time
    (b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{",
     b" "),  # the body a byte at a time
])
def test_a_client_that_sends_its_request_slowly_is_closed_with_408(strict_api: str, first: bytes,
                                                                   then: bytes) -> None:
    port = int(strict_api.rsplit(":", 1)[1])
    # timed from before the connection: the server's clock starts when it accepts it, which
    # can be a little before create_connection returns here (1.996 s was measured after it)
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(first)
        closed = False
        got = b""
        while time.monotonic() - started < 15 and not closed:
            if then:
                try:
                    sock.sendall(then)
                except OSError:
                    break
            chunk, _ = _read_until_closed(sock, 0.5)
            got += chunk
            closed = chunk.endswith(b"}") or b"408" in got
            if closed:
                rest, _ = _read_until_closed(sock, 2)
                got += rest
        elapsed = time.monotonic() - started
    assert got.startswith(b"HTTP/1.1 408 "), got
    assert json.loads(got.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"
    assert 2.0 - 0.01 <= elapsed < 5.0, elapsed  # asyncio may fire a timer within its clock's resolution early
    # the server still answers everyone else
    assert requests.get(strict_api + "/healthz", timeout=5).status_code == 200


def test_a_request_sent_whole_is_not_cut_and_keep_alive_still_works(strict_api: str) -> None:
    with requests.Session() as session:
        for _ in range(3):
            reply = session.post(strict_api + "/v1/ask", json={"question": THYMIC}, timeout=60)
            assert reply.status_code == 200
            time.sleep(1.0)  # idle within the keep-alive time: the next request reuses the connection


# --- start-up ------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["鍵のかかった扉", "key with spaces", "tab\tkey", "ｆｕｌｌｗｉｄｔｈ"])
def test_an_api_key_no_client_could_send_is_refused_at_start_up(key: str, scraped_sample: Path, tmp_path: Path,
                                                                capsys, monkeypatch, no_settings_env) -> None:
    db = copy_store(scraped_sample, tmp_path / "guide.db")
    monkeypatch.setenv("GUIDERAG_API_KEY", key)
    started = time.monotonic()
    code = main(["serve", "--db", str(db), "--port", str(free_port())])
    err = capsys.readouterr().err
    assert code == 2 and time.monotonic() - started < 10
    assert err.count("\n") == 1 and "GUIDERAG_API_KEY must be printable ASCII" in err
    assert key not in err

