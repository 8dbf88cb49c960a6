"""What one ask costs the store, and what a serving process may not share (issue 23).

- a running Library reads a guideline's calibration again only when its stamp changed
  (store.calibration.stamp: one row), and a calibration saved or removed by another
  process is used from the next ask on (SQLite);
- the API's answer is the audited one: its audit row is committed when the response
  arrives, holding the very object the client read;
- a Library's own store connection is never used across fork: released before it (api's
  workers), or opened anew in the child.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from guiderag.chatbot.config import BotConfig
from guiderag.chatbot.library import Library
from guiderag.processes import clean_env
from guiderag.settings import Settings
from guiderag.store import calibration
from storekit import copy_store

THYMIC = "胸腺腫瘍にはどのような治療法がありますか？"

# Saves a calibration at operating point 0.6 (argv[2] "save") or removes it ("remove").
OTHER_PROCESS = """
import sys
from guiderag.chatbot.coverage_model import QA, shipped
from guiderag.store import Store, calibration
with Store(sys.argv[1]) as s:
    if sys.argv[2] == "save":
        model = shipped().for_form(QA).with_operating_point(0.6, 0.95, form=QA)
        calibration.save(s, "default", s.corpus_version("default"), model.to_json(), {"counts": {}})
    else:
        assert calibration.remove(s, "default")
"""


def in_another_process(db: Path, what: str) -> None:
    done = subprocess.run([sys.executable, "-c", OTHER_PROCESS, str(db), what], env=clean_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def library(scraped_sample: Path, tmp_path: Path, no_settings_env):
    db = copy_store(scraped_sample, tmp_path / "s.db")
    with Library(BotConfig.of(Settings.load(env={}, db=db))) as lib:
        yield lib, db


def test_a_calibration_from_another_process_is_used_by_the_next_ask_and_read_only_then(library, monkeypatch) -> None:
    lib, db = library
    loads: list[str] = []
    real_load = calibration.load
    monkeypatch.setattr(calibration, "load", lambda store, gid: loads.append(gid) or real_load(store, gid))

    def source() -> tuple[str, float]:
        block = lib.ask(THYMIC, "extract").retrieval["coverage_model"]
        return block["source"], block["operating_point"]

    first = source()
    assert first[0] == "shipped" and len(loads) == 1
    source()
    source()
    assert len(loads) == 1  # nothing changed: the decision kept, its calibration not read again
    in_another_process(db, "save")
    assert source() == ("calibrated", pytest.approx(0.6))
    assert len(loads) == 2
    source()
    assert len(loads) == 2
    in_another_process(db, "remove")
    assert source() == first  # the shipped decision again, at once
    # the stamp changes with every save, in this process too
    with sqlite3.connect(db) as conn:
        stamp = conn.execute("SELECT value FROM meta WHERE key = ?", (calibration.STAMP_KEY,)).fetchone()[0]
    in_another_process(db, "save")
    assert calibration.stamp(lib.store) not in ("", stamp)


def test_the_api_answer_is_the_audited_one_committed_before_it_arrives(scraped_sample: Path, tmp_path: Path,
                                                                       no_settings_env) -> None:
    from apikit import client

    db = copy_store(scraped_sample, tmp_path / "s.db")
    with client(db) as http:
        reply = http.post("/v1/ask", json={"question": THYMIC})
        assert reply.status_code == 200
        got = reply.json()
        # read at once through a connection of our own: the row is committed
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT answer_json FROM audit WHERE id = ?", (got["audit_id"],)).fetchone()
    assert row is not None
    stored = json.loads(row[0])
    assert stored == {k: v for k, v in got.items() if k != "audit_id"}
    assert got["coverage"] == "governed" and got["answer"]


def test_a_library_store_connection_is_never_shared_across_fork(library) -> None:
    lib, _db = library
    parent = lib.store
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a connection of its own, which works
        try:
            own = lib.store
            ok = own is not parent and own.conn is not parent.conn and bool(own.page_counts())
            os.write(write, b"ok" if ok else b"shared")
        except BaseException as exc:  # pragma: no cover - reported to the parent
            os.write(write, repr(exc).encode()[:200])
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 256) == b"ok"
    os.close(read)
    assert lib.store is parent  # the parent's own is untouched
    # before forking workers the connection is closed, and opened again when needed
    from guiderag.chatbot import library_cache

    cache = library_cache.cache_for(lib.config)
    served = cache.library()
    held = served.store
    library_cache.release_connections()
    with pytest.raises(sqlite3.ProgrammingError):
        held.conn.execute("SELECT 1")
    assert served.store is not held and served.store.page_counts()
    assert served.ask(THYMIC, "extract").audit_id is not None
    library_cache.clear()
