"""One loaded library per process and settings, keyed on Store.state() (chatbot.library_cache),
shared by the API, the chat and eval: a guideline removed (or a corpus scraped) by another
process is seen by every running one at its next question, and a reload never holds up or
breaks the requests answering meanwhile.

Real components: two loopback guideline sites (tests/library_sites.py), the scraper,
SQLite, MeCab, the real index; `guiderag guidelines --remove` in a process of its own; the
chat through ui.session in this process, the API as a real uvicorn process."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests

from apikit import serve
from guiderag.chatbot.config import BotConfig
from guiderag.api.service import Service
from guiderag.chatbot.library_cache import LOAD_LOCK, LibraryCache, shared_library
from guiderag.cli import main
from guiderag.processes import clean_env
from guiderag.settings import Settings
from guiderag.ui import session
from library_sites import gastric_site, thymus_site

GASTRIC_Q = "胃を切除した後の食事はどうすればよいですか？"


def remove_in_another_process(db: Path, gid: str) -> None:
    """`guiderag guidelines --remove GID`, as a maintainer runs it beside the server."""
    done = subprocess.run([sys.executable, "-m", "guiderag", "guidelines", "--remove", gid, "--db", str(db)],
                          env=clean_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def stores(fast_env: Path, tmp_path: Path):
    """Two stores: `two` holds the thymus guide (as thymus) and the gastric guide (as
    gastric); `one` holds the gastric guide alone, as the default guideline (as a first
    run's sample is). Yields {"two": db, "one": db, "gastric": its site's base URL}, the
    sites serving until the test ends."""
    two, one = fast_env, tmp_path / "one.db"
    with thymus_site().serve() as t_base, gastric_site().serve() as g_base:
        assert main(["scrape", t_base + "/thymus/index.html", "--guideline", "thymus"]) == 0
        assert main(["scrape", g_base + "/gastric/index.html", "--guideline", "gastric"]) == 0
        assert main(["scrape", g_base + "/gastric/index.html", "--db", str(one)]) == 0
        yield {"two": two, "one": one, "gastric": g_base}


def _from_gastric(answer) -> bool:
    return answer is not None and answer.governed and any("/gastric/" in p.url for p in answer.passages)


def test_the_chat_stops_answering_from_a_guideline_removed_by_another_process(stores) -> None:
    """main at 86e8ca5 kept answering from the removed default guideline (its key, the last
    run id, did not change), and routed among the removed one's live neighbours only
    because each answer re-read the guidelines."""
    settings = Settings.load(env={}, db=stores["two"])
    before = session.ask(GASTRIC_Q, "extract", settings)
    assert _from_gastric(before.answer) and before.answer.guideline["id"] == "gastric"
    remove_in_another_process(stores["two"], "gastric")
    after = session.ask(GASTRIC_Q, "extract", settings)
    assert after.answer is not None and not _from_gastric(after.answer)
    assert after.answer.routing["chosen"] == "thymus" and after.answer.routing["method"] == "only"

    only = Settings.load(env={}, db=stores["one"])
    before = session.ask(GASTRIC_Q, "extract", only)
    assert _from_gastric(before.answer) and before.answer.guideline["id"] == "default"
    remove_in_another_process(stores["one"], "default")
    after = session.ask(GASTRIC_Q, "extract", only)
    # nothing left to answer from: the app's error, not the removed guideline's lines
    assert after.answer is None and after.error_kind == "app"


@pytest.mark.slow  # a uvicorn process and a CLI process on one store
def test_the_api_stops_answering_from_a_guideline_removed_by_another_process(stores, tmp_path: Path) -> None:
    with serve(stores["two"], tmp_path / "two.log") as url:
        before = requests.post(url + "/v1/ask", json={"question": GASTRIC_Q}, timeout=60).json()
        assert before["guideline"]["id"] == "gastric" and before["coverage"] == "governed"
        remove_in_another_process(stores["two"], "gastric")
        after = requests.post(url + "/v1/ask", json={"question": GASTRIC_Q}, timeout=60).json()
        assert after["routing"]["chosen"] == "thymus"
        assert not any("/gastric/" in p["url"] for p in after["passages"])
    with serve(stores["one"], tmp_path / "one.log") as url:
        before = requests.post(url + "/v1/ask", json={"question": GASTRIC_Q}, timeout=60).json()
        assert before["coverage"] == "governed"
        remove_in_another_process(stores["one"], "default")
        after = requests.post(url + "/v1/ask", json={"question": GASTRIC_Q}, timeout=60)
        assert after.status_code == 503 and after.json()["error"]["code"] == "no_corpus"
        assert requests.get(url + "/readyz", timeout=60).status_code == 503


def test_the_api_the_chat_and_eval_share_one_library(stores) -> None:
    from guiderag.eval.runner import _Asker

    settings = Settings.load(env={}, db=stores["two"])
    library = shared_library(BotConfig.of(settings))
    assert Service(settings).library() is library
    assert session.get_library(settings) is library
    asker = _Asker(settings, "extract")
    try:
        assert asker.library is library
    finally:
        asker.close()
    assert shared_library(BotConfig.of(settings)) is library  # an eval run does not close the shared one
    remove_in_another_process(stores["two"], "gastric")
    reloaded = session.get_library(settings)
    assert reloaded is not library and reloaded.ids == ["thymus"]
    assert Service(settings).library() is reloaded


def test_a_reload_holds_up_no_request_and_retires_the_previous_library(stores) -> None:
    settings = Settings.load(env={}, db=stores["two"])
    cache = LibraryCache(BotConfig.of(settings))
    first = cache.library()
    assert first.ids == ["gastric", "thymus"] and cache.loaded_state == cache.state()
    remove_in_another_process(stores["two"], "gastric")
    # while a load (or an index build) runs in this process, a request answers from the
    # library it had instead of waiting
    with LOAD_LOCK:
        got: list = []
        waiter = threading.Thread(target=lambda: got.append(cache.library()))
        waiter.start()
        waiter.join(timeout=30)
        assert got == [first]
    second = cache.library()
    assert second is not first and second.ids == ["thymus"]
    # a request still in flight with the previous library finishes, audited: the library
    # stays open until the next reload
    answer = first.ask(GASTRIC_Q, "extract")
    assert answer.audit_id is not None and _from_gastric(answer)
    first.store.conn.execute("SELECT 1")
    # the gastric guide scraped again: a new state, a third library; the first is closed
    assert main(["scrape", stores["gastric"] + "/gastric/index.html", "--guideline", "gastric"]) == 0
    third = cache.library()
    assert third.ids == ["gastric", "thymus"] and _from_gastric(third.ask(GASTRIC_Q, "extract"))
    with pytest.raises(sqlite3.ProgrammingError):
        first.store.conn.execute("SELECT 1")
    second.store.conn.execute("SELECT 1")  # the one before the current: closed at the next reload
    cache.close()


def test_a_failed_load_leaves_the_previous_library_answering(stores) -> None:
    settings = Settings.load(env={}, db=stores["one"])
    cache = LibraryCache(BotConfig.of(settings))
    first = cache.library()
    remove_in_another_process(stores["one"], "default")
    from guiderag.errors import EmptyCorpusError

    with pytest.raises(EmptyCorpusError):
        cache.library()
    assert cache.loaded_state != cache.state()  # still the previous one, not a half-loaded one
    assert first.ask(GASTRIC_Q, "extract").governed  # requests in flight are not broken
    cache.close()
