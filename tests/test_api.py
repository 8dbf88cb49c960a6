"""The HTTP API of `guiderag serve`, asked through a real HTTP client.

The policy of the application (answers exactly as `guiderag ask --json` gives them, each
audited once; bad requests refused with a JSON error and the right status without changing
anything; the API key required when one is set; CORS only for the configured origins;
readiness; concurrent clients) is asked in this process through an ASGI client
(apikit.client). What needs the real server runs it as a process (apikit.serve): a body
streamed in pieces over the limit, the settings read from its environment, and a new
corpus scraped by another process picked up without failing requests in flight.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import pytest
import requests

from apikit import client, serve
from guiderag.cli import main
from sitekit import Site, html_page
from storekit import copy_store

THYMIC = "胸腺腫瘍にはどのような治療法がありますか？"
OUT_OF_SCOPE = "骨折したときのギプスの巻き方を教えてください"


def audit_rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'audit'").fetchone():
            return 0  # no answer yet: the table is made by the first one
        return int(conn.execute("SELECT COUNT(*) FROM audit").fetchone()[0])


@pytest.fixture(scope="module")
def api(scraped_sample: Path, tmp_path_factory):
    """The application over a copy of the sample store, in this process, for the read-mostly
    tests of this module: (TestClient, db)."""
    db = copy_store(scraped_sample, tmp_path_factory.mktemp("api") / "guide.db")
    with client(db) as http:
        yield http, db


def test_ask_answers_exactly_as_the_cli_and_audits_once(api, capsys, no_settings_env) -> None:
    http, db = api
    before = audit_rows(db)
    reply = http.post("/v1/ask", json={"question": THYMIC})
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("application/json")
    got = reply.json()
    assert audit_rows(db) == before + 1 and got["audit_id"] > 0
    assert main(["ask", THYMIC, "--json", "--db", str(db)]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert got["coverage"] == cli["coverage"] == "governed"
    assert got["answer"] == cli["answer"]
    assert got["passages"] == cli["passages"]
    assert set(cli) <= set(got)  # the same answer object, field for field
    refused = http.post("/v1/ask", json={"question": OUT_OF_SCOPE, "mode": "extract"}).json()
    assert refused["coverage"] == "not_governed" and refused["escalation"]


@pytest.mark.parametrize("body,status,code", [
    ({"question": ""}, 422, "invalid_request"),
    ({"question": 42}, 422, "invalid_request"),
    ({}, 422, "invalid_request"),
    ({"question": "治療は？", "mode": "poetry"}, 422, "invalid_request"),
    ({"question": "治療は？", "extra": 1}, 422, "invalid_request"),
    ({"question": "あ" * 10_001}, 422, "invalid_request"),
    ({"question": "\u200b\u200b"}, 400, "invalid_request"),
])
def test_bad_requests_get_a_json_error_and_change_nothing(api, body, status, code) -> None:
    http, db = api
    before = audit_rows(db)
    reply = http.post("/v1/ask", json=body)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["code"] == code and error["message"] and "Traceback" not in reply.text
    if status == 422:
        assert audit_rows(db) == before  # refused before the chatbot saw it
    else:
        assert audit_rows(db) <= before + 1  # the chatbot records the refused question, nothing else


def test_malformed_json_oversized_bodies_unknown_routes_and_methods(api) -> None:
    http, db = api
    before = audit_rows(db)
    bad = http.post("/v1/ask", content=b'{"question": ', headers={"Content-Type": "application/json"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_json"
    big = http.post("/v1/ask", content=b"x" * 70_000, headers={"Content-Type": "application/json"})
    assert big.status_code == 413 and big.json()["error"]["code"] == "request_too_large"
    assert int(big.request.headers["content-length"]) == 70_000  # refused by its declared length

    def chunks():
        for _ in range(80):
            yield b"x" * 1000

    streamed = http.post("/v1/ask", content=chunks(), headers={"Content-Type": "application/json"})
    assert "content-length" not in streamed.request.headers  # refused by what arrived
    assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "request_too_large"
    missing = http.get("/v1/nothing")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    wrong = http.get("/v1/ask")
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"
    assert audit_rows(db) == before


def test_health_readiness_pages_and_the_openapi_description(api) -> None:
    http, _ = api
    assert http.get("/healthz").json() == {"status": "ok"}
    ready = http.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    pages = http.get("/v1/pages").json()["pages"]
    assert len(pages) == 32 and {"url", "title", "version", "fetched_at", "content_hash", "lines"} <= set(pages[0])
    spec = http.get("/openapi.json").json()
    assert "/v1/ask" in spec["paths"] and "post" in spec["paths"]["/v1/ask"]
    assert "access-control-allow-origin" not in {k.lower() for k in http.options(
        "/v1/ask", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}).headers}


def test_a_mode_that_needs_a_model_without_one_is_503(api) -> None:
    http, _ = api
    reply = http.post("/v1/ask", json={"question": THYMIC, "mode": "lines"})
    assert reply.status_code == 503 and reply.json()["error"]["code"] == "model_not_configured"


def test_readyz_is_503_without_a_corpus(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    sqlite3.connect(db).close()
    with client(db) as http:
        assert http.get("/healthz").status_code == 200
        ready = http.get("/readyz")
        assert ready.status_code == 503 and ready.json()["error"]["code"] == "not_ready"
        ask = http.post("/v1/ask", json={"question": THYMIC})
        assert ask.status_code == 503 and ask.json()["error"]["code"] in ("no_corpus", "store_unavailable")


def test_the_api_key_is_required_when_set(scraped_sample: Path, tmp_path: Path) -> None:
    db = copy_store(scraped_sample, tmp_path / "guide.db")
    with client(db, GUIDERAG_API_KEY="s3cret-key") as http:
        before = audit_rows(db)
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret-key"},
                        {"Authorization": "Bearer s3cret-key-and-more"}):
            reply = http.post("/v1/ask", json={"question": THYMIC}, headers=headers)
            assert reply.status_code == 401 and reply.json()["error"]["code"] == "unauthorized"
            assert reply.headers["www-authenticate"] == "Bearer"
        assert http.get("/v1/pages").status_code == 401
        assert audit_rows(db) == before
        assert http.get("/healthz").status_code == 200
        ok = http.post("/v1/ask", json={"question": THYMIC}, headers={"Authorization": "Bearer s3cret-key"})
        assert ok.status_code == 200 and ok.json()["coverage"] == "governed"


def test_cors_only_for_configured_origins(scraped_sample: Path, tmp_path: Path) -> None:
    db = copy_store(scraped_sample, tmp_path / "guide.db")
    with client(db, GUIDERAG_API_CORS_ORIGINS="https://portal.example") as http:
        pre = {"Origin": "https://portal.example", "Access-Control-Request-Method": "POST"}
        ok = http.options("/v1/ask", headers=pre)
        assert ok.headers.get("access-control-allow-origin") == "https://portal.example"
        other = http.options("/v1/ask", headers={**pre, "Origin": "https://evil.example"})
        assert other.headers.get("access-control-allow-origin") is None


def test_the_real_server_reads_its_environment_and_refuses_a_body_streamed_over_the_limit(
        scraped_sample: Path, tmp_path: Path) -> None:
    """uvicorn hands a chunked body to the application in pieces, each under the limit here:
    the limit holds for what arrived in all of them."""
    db = copy_store(scraped_sample, tmp_path / "guide.db")
    with serve(db, tmp_path / "serve.log", GUIDERAG_API_KEY="s3cret-key", GUIDERAG_API_MAX_BODY_BYTES="4096") as url:
        key = {"Authorization": "Bearer s3cret-key"}
        before = audit_rows(db)
        assert requests.post(url + "/v1/ask", json={"question": THYMIC}, timeout=30).status_code == 401
        ok = requests.post(url + "/v1/ask", json={"question": THYMIC}, headers=key, timeout=60)
        assert ok.status_code == 200 and ok.json()["coverage"] == "governed"

        def chunks():
            for _ in range(40):  # 40 x 250 bytes, paced so that they arrive apart
                time.sleep(0.005)
                yield b" " * 250

        streamed = requests.post(url + "/v1/ask", data=chunks(), timeout=30,
                                 headers={**key, "Content-Type": "application/json"})
        assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "request_too_large"
        declared = requests.post(url + "/v1/ask", data=b" " * 5000, timeout=30,
                                 headers={**key, "Content-Type": "application/json"})
        assert declared.status_code == 413 and declared.json()["error"]["code"] == "request_too_large"
        assert audit_rows(db) == before + 1  # only the one answered question


def _guide_site(answer: str) -> Site:
    site = Site()
    site.page("/guide/index.html", html_page("目次", '<main><h1>目次</h1><ul><li><a href="q1.html">Q1</a></li>'
                                                  '<li><a href="q2.html">Q2</a></li></ul></main>'))
    site.page("/guide/q1.html", html_page("Q1 抗がん剤の副作用", "<main><h1>Q1 抗がん剤の副作用</h1>"
                                                            f"<p>抗がん剤の副作用には{answer}があります。</p></main>"))
    site.page("/guide/q2.html", html_page("Q2 手術の入院期間", "<main><h1>Q2 手術の入院期間</h1>"
                                                          "<p>手術の入院期間は通常一週間ほどです。</p></main>"))
    return site


def test_a_new_corpus_from_another_process_is_picked_up_without_failing_requests(
        tmp_path: Path, capsys, no_settings_env) -> None:
    """The server is a process of its own; the scrapes run in this one."""
    db = tmp_path / "guide.db"
    question = "抗がん剤の副作用には何がありますか？"
    site = _guide_site("吐き気や脱毛")
    with site.serve() as base:
        scrape = ["scrape", base + "/guide/index.html", "--db", str(db), "--delay", "0", "--no-progress"]
        assert main(scrape) == 0
        with serve(db, tmp_path / "serve.log") as url:
            first = requests.post(url + "/v1/ask", json={"question": question}, timeout=60).json()
            assert "吐き気や脱毛" in first["answer"]
            errors: list[str] = []
            stop = threading.Event()

            def patient() -> None:
                while not stop.is_set():
                    reply = requests.post(url + "/v1/ask", json={"question": question}, timeout=60)
                    if reply.status_code != 200:
                        errors.append(reply.text)

            threads = [threading.Thread(target=patient) for _ in range(3)]
            for t in threads:
                t.start()
            site.page("/guide/q1.html", html_page("Q1 抗がん剤の副作用", "<main><h1>Q1 抗がん剤の副作用</h1>"
                                                                    "<p>抗がん剤の副作用には口内炎やしびれがあります。</p></main>"))
            assert main(scrape) == 0, capsys.readouterr().err
            after = requests.post(url + "/v1/ask", json={"question": question}, timeout=60).json()
            for _ in range(50):  # the first request after the scrape may still be served by the old index
                if "口内炎" in after["answer"]:
                    break
                after = requests.post(url + "/v1/ask", json={"question": question}, timeout=60).json()
            stop.set()
            for t in threads:
                t.join()
            assert errors == []
            assert "口内炎やしびれ" in after["answer"] and "吐き気" not in after["answer"]
            assert after["retrieval"]["corpus_version"] != first["retrieval"]["corpus_version"]


def test_concurrent_clients_are_each_answered_and_audited_once(api) -> None:
    http, db = api
    before = audit_rows(db)
    questions = [THYMIC, OUT_OF_SCOPE, "胸腺腫の手術について知りたい", "放射線治療の副作用は？"]
    results: list[int] = []
    lock = threading.Lock()

    def patient(k: int) -> None:
        for i in range(5):
            reply = http.post("/v1/ask", json={"question": questions[(k + i) % 4]})
            with lock:
                results.append(reply.status_code)

    threads = [threading.Thread(target=patient, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [200] * 40
    assert audit_rows(db) == before + 40
