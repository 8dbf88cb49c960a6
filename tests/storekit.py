"""What a store holds, for tests that check that a failure left it as it was (reusable).

    before = state_of(db)
    ... a scrape, ask or index that must fail ...
    assert state_of(db) == before

The corpus (every page's current version, hash and removed mark), the retrieval index
(what CURRENT names, the version folders, the corpus it was built from) and the audit log
(every row). Read with plain sqlite3, not guiderag's Store, so that a broken Store cannot
hide a change.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any


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


def runs_of(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id, status, message FROM runs ORDER BY id").fetchall()


def copy_store(db: Path, target: Path) -> Path:
    """A copy of a closed store file and its index folder (its WAL was checkpointed on close)."""
    shutil.copyfile(db, target)
    shutil.copytree(db.with_name(db.name + ".index"), target.with_name(target.name + ".index"))
    return target
