"""A damaged, empty or foreign store file: every command says so in one line and writes
nothing into it; the index beside it stays as it was.

The damage is the probe's: 16 KiB of (seeded) random bytes written at offset 8192 of a
good store, the sample guideline scraped and indexed.
"""
from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from guiderag.chatbot.config import BotConfig
from guiderag.cli import main
from guiderag.errors import StoreAccessError, StoreError, StoreMissingError
from guiderag.settings import Settings
from guiderag.store import Store
from storekit import copy_store, index_of

QUESTION = "胸腺腫瘍にはどのような治療法がありますか？"


@pytest.fixture
def damaged(scraped_sample: Path, fast_env: Path) -> Path:
    db = copy_store(scraped_sample, fast_env)
    data = bytearray(db.read_bytes())
    assert len(data) > 8192 + 16384
    data[8192:8192 + 16384] = random.Random(20261201).randbytes(16384)
    db.write_bytes(bytes(data))
    return db


def _fails_in_one_line(argv: list[str], capsys: pytest.CaptureFixture[str], code: int = 1) -> str:
    assert main(argv) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and err.startswith("guiderag: error: "), err
    return err


@pytest.mark.parametrize("argv", [
    ["ask", QUESTION],
    ["ask", QUESTION, "--json"],
    ["pages"],
    ["pages", "--json", "--all"],
    ["index"],
    ["scrape", "--sample"],
])
def test_every_command_on_a_damaged_store_says_so_in_one_line(damaged: Path, capsys, argv: list[str]) -> None:
    before, index_before = damaged.read_bytes(), index_of(damaged)
    err = _fails_in_one_line(argv, capsys)
    assert f"the page store {damaged}" in err and "damaged" in err
    assert "restore it from a backup" in err and "PRAGMA integrity_check" in err
    assert damaged.read_bytes() == before  # nothing was written into the damaged file
    assert index_of(damaged) == index_before
    assert not damaged.with_name("cli.urls.xlsx").exists()  # the scrape stopped before writing it


def test_a_scrape_into_a_damaged_store_fetches_no_page(damaged: Path, capsys) -> None:
    from sitekit import Site, html_page, toc_html

    site = Site()
    site.page("/guide/index.html", toc_html([("q1.html", "Q1")]))
    site.page("/guide/q1.html", html_page("Q1", "<p>答えです。</p>"))
    with site.serve() as base:
        err = _fails_in_one_line(["scrape", base + "/guide/index.html"], capsys)
    assert "damaged" in err
    assert site.hits["/guide/q1.html"] == 0  # the store was checked before the site was fetched


def test_the_store_stages_raise_store_errors_not_sqlite_ones(damaged: Path) -> None:
    """Below the CLI too (the app, eval): one StoreAccessError naming the file."""
    from guiderag.eval.runner import _PageLines
    from guiderag.retrieval.corpus import read_corpus

    settings = Settings.load(env={}, db=damaged)
    for call in (lambda: read_corpus(settings.storage),
                 lambda: _PageLines(damaged).lines("http://sample-guide.guiderag.invalid/guide/q1.html", None)):
        with pytest.raises(StoreAccessError) as info:
            call()
        assert str(damaged) in str(info.value) and "\n" not in str(info.value)
        assert isinstance(info.value, StoreError) and isinstance(info.value, sqlite3.DatabaseError)


def test_the_apps_status_line_on_a_damaged_store(damaged: Path) -> None:
    from guiderag.ui.bootstrap import store_status

    with pytest.raises(StoreAccessError) as info:  # the app shows it under its own message
        store_status(Settings.load(env={}, db=damaged))
    assert str(damaged) in str(info.value) and "\n" not in str(info.value)


def test_a_failed_write_of_the_audit_log_is_one_store_error(scraped_sample: Path, fast_env: Path) -> None:
    """SQLite refuses the audit row (the connection is read-only): no answer without its
    audit row, and the error is one StoreError line saying what to check."""
    from guiderag.chatbot import Chatbot
    from storekit import audit_of

    db = copy_store(scraped_sample, fast_env)
    settings = Settings.load(env={}, db=db, progress=False)
    before = audit_of(db)
    with Store(db, create=False) as store, Chatbot(BotConfig.of(settings), store=store) as bot:
        store.conn.execute("PRAGMA query_only = 1")  # every write now fails inside SQLite
        with pytest.raises(StoreAccessError) as info:
            bot.ask(QUESTION)
    message = str(info.value)
    assert message.startswith("could not write the audit log, so the answer was not shown")
    assert "readonly" in message and "permissions" in message and "\n" not in message
    assert audit_of(db) == before


@pytest.mark.parametrize("argv,code", [
    (["ask", QUESTION], 2),
    (["pages"], 2),
    (["gaps"], 2),
    (["index"], 2),
])
def test_an_empty_file_is_no_store_and_stays_empty(fast_env: Path, capsys, argv: list[str], code: int) -> None:
    fast_env.touch()
    err = _fails_in_one_line(argv, capsys, code)
    assert "empty file (0 bytes)" in err and str(fast_env) in err
    assert fast_env.stat().st_size == 0  # no schema was written into it
    assert not fast_env.with_name(fast_env.name + "-wal").exists()


def test_an_empty_file_is_filled_by_a_scrape_and_by_the_apps_first_run(fast_env: Path, capsys, monkeypatch) -> None:
    from guiderag.resources import default_db
    from guiderag.ui.bootstrap import needs_bootstrap, store_status

    monkeypatch.setenv("XDG_DATA_HOME", str(fast_env.parent / "xdg"))  # the app fills only the default store
    db = default_db()
    db.parent.mkdir(parents=True)
    db.touch()
    monkeypatch.setenv("GUIDERAG_DB", str(db))
    settings = Settings.load(env={}, db=db)
    assert needs_bootstrap(settings) and store_status(settings).empty
    assert db.stat().st_size == 0  # looking changed nothing
    assert main(["scrape", "--sample", "--no-index"]) == 0
    assert not store_status(settings).empty


def test_an_sqlite_file_of_another_program_is_no_store(fast_env: Path, capsys) -> None:
    with sqlite3.connect(fast_env) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    before = fast_env.read_bytes()
    err = _fails_in_one_line(["ask", QUESTION], capsys, 2)
    assert "without guiderag's tables" in err and "nothing was written" in err
    assert fast_env.read_bytes() == before
    with pytest.raises(StoreMissingError):
        Store(fast_env, create=False)


def test_sqlite_errors_that_are_bugs_are_not_dressed_up(tmp_path: Path) -> None:
    """Bad SQL or a closed connection is our bug: it keeps its own type and traceback."""
    with Store(tmp_path / "g.db") as store:
        with pytest.raises(sqlite3.OperationalError) as info:
            store.conn.execute("SELEC 1")
        assert not isinstance(info.value, StoreError)
    with pytest.raises(sqlite3.ProgrammingError):
        store.conn.execute("SELECT 1")
