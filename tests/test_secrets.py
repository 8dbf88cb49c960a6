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


def test_an_unreachable_model_url_with_a_password(store: Path, tmp_path: Path, capsys, monkeypatch,
                                                 refused_port: int) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://user:{SECRET}@127.0.0.1:{refused_port}/v1")
    monkeypatch.setenv("GUIDERAG_MODEL", "m")
    monkeypatch.setenv("GUIDERAG_MODEL_RETRIES", "0")
    assert main(["ask", QUESTION, "--mode", "generate"]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach model 'm' at http://***@127.0.0.1:{refused_port}/v1" in err
    assert SECRET not in err and "user:" not in err
    written = _everything_written(store, tmp_path, capsys)
    assert f"http://***@127.0.0.1:{refused_port}/v1" in written  # the error row is there ...
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


@pytest.mark.parametrize("text,shown", [
    ("postgresql://guiderag@db:5432/g?password=S3cr3tPa55&sslmode=require",
     "postgresql://***@db:5432/g?password=***&sslmode=require"),
    ("postgresql://db/g?PassWord=S3cr3tPa55", "postgresql://db/g?PassWord=***"),
    ("postgresql://db/g?pass%77ord=S3cr3tPa55", "postgresql://db/g?pass%77ord=***"),  # libpq decodes the name
    ("postgresql://db/g?sslpassword=S3cr3tPa55;x&application_name=a", "postgresql://db/g?sslpassword=***&application_name=a"),
    ("postgresql://db/g?passfile=/srv/pgpass", "postgresql://db/g?passfile=/srv/pgpass"),  # a file's name, kept
    ("postgresql://u:S3cr/3tPa55@db/g", "postgresql://***@db/g"),  # an unencoded / in the password
    ("postgresql://u:12/3456@db/g", "postgresql://***@db/g"),
    ("http://h/v1?key=S3cr3tPa55", "http://h/v1?key=***"),
    ("http://h/v1?api-key=S3cr3tPa55&x=1", "http://h/v1?api-key=***&x=1"),
    ("http://h/v1?API_KEY=S3cr3tPa55", "http://h/v1?API_KEY=***"),
    ("http://h/v1?apikey=S3cr3tPa55", "http://h/v1?apikey=***"),
    ("http://h/v1?a=1;token=S3cr3tPa55", "http://h/v1?a=1;token=***"),
    ("http://h/v1?Access_Token=S3cr3tPa55", "http://h/v1?Access_Token=***"),
    ("https://h/cb#access_token=S3cr3tPa55&state=2", "https://h/cb#access_token=***&state=2"),
    ("http://h/x?subscription-key=S3cr3tPa55", "http://h/x?subscription-key=***"),
    ("host=db password=S3cr3tPa55 dbname=g", "host=db password=*** dbname=g"),
    ("host=db password='S3cr 3tPa55' dbname=g", "host=db password=*** dbname=g"),
    ("OPENAI key sk-proj-S3cr3tPa55S3cr3tPa55 refused", "OPENAI key sk-*** refused"),
    ("http://h/guide/q1.html?key_points=1&page=2", "http://h/guide/q1.html?key_points=1&page=2"),
    ("http://[::1]:8080/a@b", "http://[::1]:8080/a@b"),
])
def test_redact_masks_every_url_form(text: str, shown: str) -> None:
    assert redact(text) == shown
    assert redact(f"error: cannot reach {text}: refused") == f"error: cannot reach {shown}: refused"
    assert redact(shown) == shown  # idempotent


@pytest.mark.parametrize("text", [
    json.dumps({"question": "手術の後の食事は？", "candidates": [{"url": f"https://h/guide/q{i}.html"} for i in range(30)]},
               ensure_ascii=False),  # an answer's audit JSON: no "@", "?" or "#", not scanned
    "see https://h/a.html and https://h/b.html?key=S3cr3tPa55",
    "https://u:S3cr3tPa55@h/x https://h/y",
    "https://h/y#access_token=S3cr3tPa55 then https://h/z",
    "no url here? but a ? and @ and # anyway",
    "ftp://h/a@b?c#d, https://h/plain",
    "",
])
def test_redact_skips_only_texts_with_no_url_to_change(text: str) -> None:
    import guiderag.redact as r

    # the URL step as without its shortcut: every URL of the text scanned
    assert r._redact_urls(text) == r._URL.sub(r._redact_match, text)


@pytest.mark.parametrize("form", ["?key={s}", "?api-key={s}", "?api_key={s}", "?token={s}", "?access_token={s}",
                                  "?Key={s}&model=x"])
def test_a_model_url_with_a_key_in_its_query(form: str, store: Path, tmp_path: Path, capsys, monkeypatch,
                                             refused_port: int) -> None:
    base = f"http://127.0.0.1:{refused_port}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", base + form.format(s=SECRET))
    monkeypatch.setenv("GUIDERAG_MODEL", "m")
    monkeypatch.setenv("GUIDERAG_MODEL_RETRIES", "0")
    assert main(["ask", QUESTION, "--mode", "generate"]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach model 'm' at {base}?" in err and "=***" in err
    assert SECRET not in err
    written = _everything_written(store, tmp_path, capsys)
    assert f"{base}?" in written and SECRET not in written  # the audit row's error, masked


@pytest.mark.parametrize("url,why", [
    ("postgresql://guiderag:Ab3/Xy9@127.0.0.1:5432/g", "unencoded '/'"),
    ("postgresql://guiderag:Ab3?Xy9@127.0.0.1:5432/g", "unencoded '/'"),
    ("postgresql://guiderag:Ab3Xy9@127.0.0.1:54x2/g", "a port is not a number"),
    ("postgresql://guiderag:Ab3Xy9@127.0.0.1:99999/g", "a port is not a number"),
    ("postgresql://guiderag:Ab3%zzXy9@127.0.0.1:5432/g", "'%'"),
    ("postgresql://guiderag:Ab3Xy9@[::1/g", "malformed"),
])
@pytest.mark.parametrize("command", [["pages", "--db"], ["scrape", "--sample", "--db"], ["serve", "--port", "0", "--db"],
                                     ["chat", "--port", "0", "--db"], ["loadbench", "--pg"]])
def test_a_postgresql_url_libpq_would_misread_is_exit_2_quoting_none_of_it(url: str, why: str, command: list[str],
                                                                           fast_env: Path, capsys) -> None:
    code = main([*command, url])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("guiderag: error: the PostgreSQL URL") and why in err
    assert "Ab3" not in err and "Xy9" not in err and "guiderag:" not in err.split("error:", 1)[1]
    assert list(fast_env.parent.iterdir()) == []  # nothing created


def test_the_environment_url_is_checked_the_same_way(fast_env: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("GUIDERAG_DB", "postgresql://guiderag:Ab3/Xy9@127.0.0.1:5432/g")
    assert main(["guidelines"]) == 2
    err = capsys.readouterr().err
    assert "unencoded '/'" in err and "Ab3" not in err and "Xy9" not in err


def test_a_traceback_of_our_own_bug_is_redacted_too(fast_env: Path, capsys, monkeypatch) -> None:
    """Whatever reaches the CLI's stderr goes through redact, an unexpected exception included."""
    import guiderag.commands

    def broken(args, settings):
        raise RuntimeError(f"boom at postgresql://u:{SECRET}@db/g?password={SECRET}")

    monkeypatch.setattr(guiderag.commands, "run_guidelines", broken)
    assert main(["guidelines"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: boom at postgresql://***@db/g?password=***" in err
    assert SECRET not in err
