"""`guiderag chat` itself (the real command: it execs a Streamlit child) on an SQLite store
named with --db and on a PostgreSQL store, asked in Chromium: the answer comes from that
store's guideline and its audit row lands in that store. Before #24 the chat of a
PostgreSQL store opened a local SQLite file instead, filled it with the bundled sample
and answered patients from the demo guideline.

The child gets the store's location (a URL with its password) in its environment, never
on its command line, which anyone on the machine can read.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterator

import pytest

from browserkit import browser_session, guiderag_chat, last_message, open_chat, send
from guiderag.cli import main
from guiderag.resources import shared_store_anchor
from guiderag.ui.text import TEXT
from library_sites import gastric_site

pytestmark = pytest.mark.browser

SECRET = "Ch4tS3cretPw"
QUESTION = "胃を切除した後の食事はどうすればよいですか？"
ANSWER_LINE = "食事を一日五回から六回に分けてゆっくり食べます。"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with browser_session() as driver:
        yield driver


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_settings_env) -> Path:
    """The user data folder (the default store, a PostgreSQL store's local index) in tmp_path."""
    home = tmp_path / "xdg-data"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    return home


def _with_password(url: str) -> str:
    """The test server trusts loopback: a password in the URL is accepted and ignored."""
    return url.replace("postgresql://guiderag@", f"postgresql://guiderag:{SECRET}@")


def _audit(location: str) -> list[tuple[str, str]]:
    """(question, guideline) of every audit row of the store."""
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location) as conn:
            return [tuple(r) for r in conn.execute("SELECT question, guideline FROM audit ORDER BY id")]
    with sqlite3.connect(location) as conn:
        return [tuple(r) for r in conn.execute("SELECT question, guideline FROM audit ORDER BY id")]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_guiderag_chat_answers_from_and_audits_into_its_store(backend: str, browser, data_home: Path,
                                                              tmp_path: Path, request, capsys) -> None:
    from selenium.webdriver.common.by import By

    location = (str(tmp_path / "hospital" / "guiderag.db") if backend == "sqlite"
                else _with_password(request.getfixturevalue("pg_database")))
    site = gastric_site()
    with site.serve() as base:
        assert main(["scrape", base + "/gastric/index.html", "--db", location, "--guideline", "gastric",
                     "--no-progress", "--delay", "0"]) == 0
    capsys.readouterr()
    with guiderag_chat(location, tmp_path / "chat.log") as (url, proc):
        # the child is Streamlit now (execve): its command line has no password, its environment the URL
        argv = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert b"streamlit" in argv and not any(SECRET.encode() in a for a in argv)
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
        assert f"GUIDERAG_DB={location}".encode() in environ
        open_chat(browser, url, 1280, 1200)
        send(browser, QUESTION)
        reply = last_message(browser)
        links = [a.get_attribute("href") for a in reply.find_elements(By.CSS_SELECTOR, ".grag-source a")]
        assert ANSWER_LINE in reply.text, reply.text
        assert links and all(href.startswith(base + "/gastric/") for href in links), links
    assert _audit(location) == [(QUESTION, "gastric")]
    assert SECRET not in (tmp_path / "chat.log").read_text(errors="replace")
    if backend == "postgresql":
        assert not shared_store_anchor(location).exists()  # no local SQLite store was made
    assert not (data_home / "guiderag" / "guiderag.db").exists()  # nor the default one filled


def test_guiderag_chat_on_an_empty_postgresql_store_shows_no_demo_guideline(browser, data_home: Path,
                                                                             tmp_path: Path, pg_database: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with guiderag_chat(pg_database, tmp_path / "chat.log") as (url, _):
        browser.set_window_size(1280, 1200)
        browser.get(url)
        notice = TEXT["no_guideline"].split("`")[0]
        WebDriverWait(browser, 60).until(lambda d: notice in d.find_element(By.TAG_NAME, "body").text)
        body = browser.find_element(By.TAG_NAME, "body").text
    assert TEXT["sidebar_sample"] not in body and TEXT["setup_running"] not in body  # no sample loaded instead
    assert not shared_store_anchor(pg_database).exists()
    import psycopg

    with psycopg.connect(pg_database) as conn:
        count = conn.execute("SELECT COUNT(*) FROM pg_catalog.pg_tables WHERE tablename = 'pages'").fetchone()[0]
    assert count == 0  # looking created nothing in the database either
