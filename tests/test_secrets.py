"""A password in a URL never leaves the process: not on stderr, not in the audit log, not
in `guiderag audit`'s export, not in the answer JSON, the run log or the URL workbook."""
from __future__ import annotations

import json
import os
import sqlite3
import zipfile
from pathlib import Path

import pytest

from guiderag.cli import main
from guiderag.redact import redact, redact_url
from openai_stub import OpenAIStub, Reply
from sitekit import Site, html_page, toc_html
from storekit import copy_store

SECRET = "S3cr3tPa55"
QUESTION = "胸腺腫瘍にはどのような治療法がありますか？"


@pytest.fixture
def store(scraped_sample: Path, fast_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(os.environ):
        if key.startswith("OPENAI_"):
            monkeypatch.delenv(key)
    return copy_store(scraped_sample, fast_env)


def _everything_written(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The audit table, the runs table, and the `guiderag audit` workbook, as one text."""
    with sqlite3.connect(db) as conn:
        dumped = "\n".join(conn.iterdump())
    out = tmp_path / "audit.xlsx"
    assert main(["audit", "--out", str(out)]) == 0
    capsys.readouterr()
    with zipfile.ZipFile(out) as book:
        sheets = "\n".join(book.read(name).decode("utf-8") for name in book.namelist())
    return dumped + sheets


def test_redact_takes_the_userinfo_out_of_every_url() -> None:
    assert redact_url("http://user:SECRET@127.0.0.1:9/v1") == "http://***@127.0.0.1:9/v1"
    assert redact_url("https://TOKEN@example.org/x?q=1#f") == "https://***@example.org/x?q=1#f"
    assert redact_url("http://example.org/a@b") == "http://example.org/a@b"  # "@" in the path only
    assert redact_url(None) == ""
    text = "cannot reach model 'm' at http://u:p@ss@host:8000/v1 (see https://k@h/x); mail a@b.jp"
    assert redact(text) == "cannot reach model 'm' at http://***@host:8000/v1 (see https://***@h/x); mail a@b.jp"
    assert redact("no URL here") == "no URL here"


def test_an_unreachable_model_url_with_a_password(store: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://user:{SECRET}@127.0.0.1:9/v1")
    monkeypatch.setenv("GUIDERAG_MODEL", "m")
    monkeypatch.setenv("GUIDERAG_MODEL_RETRIES", "0")
    assert main(["ask", QUESTION, "--mode", "generate"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach model 'm' at http://***@127.0.0.1:9/v1" in err
    assert SECRET not in err and "user:" not in err
    written = _everything_written(store, tmp_path, capsys)
    assert "http://***@127.0.0.1:9/v1" in written  # the error row is there ...
    assert SECRET not in written  # ... without the password


def test_a_failing_model_server_with_a_password_and_fallback(store: Path, tmp_path: Path, capsys,
                                                             monkeypatch) -> None:
    with OpenAIStub(default=Reply(status=500, content="boom")) as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url.replace("http://", f"http://user:{SECRET}@"))
        monkeypatch.setenv("GUIDERAG_ANSWER_MODEL", "m")
        monkeypatch.setenv("GUIDERAG_MODEL_RETRIES", "0")
        monkeypatch.setenv("GUIDERAG_FALLBACK_TO_EXTRACT", "1")
        assert main(["ask", QUESTION, "--mode", "lines", "--json"]) == 0
    captured = capsys.readouterr()
    answer = json.loads(captured.out)
    assert answer["mode"] == "extract" and "answered HTTP 500" in (answer["error"] or "")
    assert SECRET not in captured.out and SECRET not in captured.err
    assert SECRET not in _everything_written(store, tmp_path, capsys)


def test_a_toc_url_with_a_password(fast_env: Path, tmp_path: Path, capsys) -> None:
    site = Site()
    site.page("/guide/index.html", toc_html([("q1.html", "Q1")]))
    site.page("/guide/q1.html", html_page("Q1 治療", "<main><p>治療は手術が中心です。</p></main>"))
    site.page("/guide/empty.html", html_page("目次", "<p>リンクはありません。</p>"))
    with site.serve() as base:
        secret_base = base.replace("http://", f"http://user:{SECRET}@")
        assert main(["scrape", secret_base + "/guide/index.html", "--no-index"]) == 0
        ok = capsys.readouterr()
        assert main(["scrape", secret_base + "/guide/empty.html", "--no-index"]) == 2
        failed = capsys.readouterr()
    assert "has no links" in failed.err
    for text in (ok.out, ok.err, failed.out, failed.err):
        assert SECRET not in text
    assert SECRET not in _everything_written(fast_env, tmp_path, capsys)
    with zipfile.ZipFile(fast_env.with_name("cli.urls.xlsx")) as book:
        assert all(SECRET not in book.read(n).decode("utf-8") for n in book.namelist())
