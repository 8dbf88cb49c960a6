"""What a store holds, for tests that check that a failure left it as it was (reusable).

    before = state_of(db)
    ... a scrape, ask or index that must fail ...
    assert state_of(db) == before

The corpus (every page's current version, hash and removed mark), the retrieval index
(what CURRENT names, the version folders, the corpus it was built from) and the audit log
(every row). And the central invariant, `assert_verbatim(db, answer)`: every line shown
as the answer is a stored line of the page version it cites. Read with plain sqlite3, not
guiderag's Store, so that a broken Store cannot hide a change or a line it never stored.
"""
from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any, Mapping


def state_of(db: Path) -> dict[str, Any]:
    return {"corpus": corpus_of(db), "index": index_of(db), "audit": audit_of(db)}


def corpus_of(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT p.url, p.current_version, v.content_hash, p.removed_at IS NOT NULL FROM pages p "
            "JOIN page_versions v ON v.page_id = p.id AND v.version = p.current_version ORDER BY p.url"
        ).fetchall()


def audit_of(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'audit'").fetchone():
            return []
        return conn.execute("SELECT * FROM audit ORDER BY id").fetchall()


def index_of(db: Path) -> dict[str, Any]:
    folder = db.with_name(db.name + ".index")
    if not (folder / "CURRENT").exists():
        return {}
    current = (folder / "CURRENT").read_text(encoding="utf-8").strip()
    manifest = json.loads((folder / current / "manifest.json").read_text(encoding="utf-8"))
    return {"current": current, "corpus_version": manifest["corpus_version"],
            "entries": sorted(p.name for p in folder.iterdir())}


def stored_version(db: Path, url: str, version: int) -> tuple[list[str], str] | None:
    """(lines, content_hash) of one stored page version, or None when it was never stored."""
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT v.lines, v.content_hash FROM pages p JOIN page_versions v ON v.page_id = p.id "
            "WHERE p.url = ? AND v.version = ?", (url, version)).fetchone()
    return (json.loads(row[0]), row[1]) if row else None


def assert_verbatim(db: Path, answer: Any) -> None:
    """Every line of the answer text is a stored line of a cited page version, at the cited
    line number (counted from 1), and every cited line is in the answer. `answer` is an
    Answer or its JSON (`ask --json`, the API's reply)."""
    data = _as_json(answer)
    assert sorted(data["answer"].split("\n")) == sorted(assert_passages_stored(db, data))


def assert_passages_stored(db: Path, answer: Any) -> list[str]:
    """Every cited passage is stored lines of its page version at its line numbers (what a
    generated answer shows beside its summary); returns the cited lines."""
    cited: list[str] = []
    for p in _as_json(answer)["passages"]:
        stored = stored_version(db, p["url"], p["version"])
        assert stored is not None, f"{p['url']} version {p['version']} is cited but not stored"
        lines, content_hash = stored
        assert content_hash == p["content_hash"], p["url"]
        assert all(1 <= n <= len(lines) for n in p["lines"]), (p["url"], p["lines"], len(lines))
        assert p["text"].split("\n") == [lines[n - 1] for n in p["lines"]], p["url"]
        cited += p["text"].split("\n")
    return cited


def _as_json(answer: Any) -> Mapping[str, Any]:
    return answer if isinstance(answer, Mapping) else answer.to_json()


def runs_of(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id, status, message FROM runs ORDER BY id").fetchall()


def copy_store(db: Path, target: Path) -> Path:
    """A consistent copy of a store file (SQLite's backup API, so also while a connection has
    it open) and of its index folder when it has one, for a test that changes its copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(db)) as source, contextlib.closing(sqlite3.connect(target)) as copy:
        source.backup(copy)
    index = db.with_name(db.name + ".index")
    if index.exists():
        shutil.copytree(index, target.with_name(target.name + ".index"))
    return target
