"""Stores made by an older guiderag (tests/oldstores.py: schema version 2, the audit table
made the old way by the chatbot, or none) upgrade through migration 3 on SQLite and on a
real PostgreSQL server: every audit row is kept with its values, the columns a table
lacked are added, the next answer's row follows the old ones, and a read-only open (what
`guiderag check` does) changes nothing before the upgrade."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from guiderag.chatbot.audit import AuditLog
from guiderag.cli import main
from guiderag.errors import StoreVersionError
from guiderag.store import Store, schema
from guiderag.store.audit import COLUMNS
from oldstores import AUDIT_ROWS, AUDITS, make_old_store, raw_rows, raw_schema


def _digest(location: Path | str) -> object:
    if isinstance(location, Path):
        return hashlib.sha256(location.read_bytes()).hexdigest()
    return raw_schema(location), raw_rows(location, "schema_migrations", order="version")


@pytest.mark.parametrize("audit", AUDITS)
def test_an_old_store_upgrades_and_keeps_every_audit_row(store_at, audit: str) -> None:
    make_old_store(store_at, audit)
    before = raw_rows(store_at, "audit") if audit != "none" else []
    assert len(before) == (len(AUDIT_ROWS) if audit != "none" else 0)
    untouched = _digest(store_at)
    with pytest.raises(StoreVersionError, match="older than this guiderag"):
        Store(store_at, readonly=True)  # `guiderag check`: refused, and nothing written
    assert _digest(store_at) == untouched

    with Store(store_at, create=False) as store:
        assert schema.schema_version(store.conn) == schema.LATEST
        assert set(COLUMNS) <= store.conn.columns("audit") and store.conn.index_exists("audit_coverage")
        log = AuditLog(store.conn)
        kept = log.rows()
        assert [r["id"] for r in kept] == [r["id"] for r in before]
        for old, now in zip(before, kept):
            assert {k: now[k] for k in old} == old  # every value of every old column
            assert all(now[c] is None for c in COLUMNS if c not in old)
        new_id = log.record_error("胸腺腫の手術後の生活は？", "boom", keywords=["胸腺腫"], keywords_model="kw",
                                  guideline="default", model_use={"answer": {"outcome": "failed"}})
        assert new_id == max([r["id"] for r in before], default=0) + 1
        assert [g.question for g in log.gaps()] == (["糖尿病の食事療法を教えてください"] if before else [])
        assert len(store.current_pages()) == 2 and [g.id for g in store.guidelines()] == ["default"]
    with Store(store_at) as store:  # a second open applies nothing, the rows are all there
        assert schema.migrate(store.conn, store.path) == []
        rows = AuditLog(store.conn).rows()
        assert len(rows) == len(before) + 1 and rows[-1]["keywords_model"] == "kw"
        assert rows[-1]["model_use"] == '{"answer": {"outcome": "failed"}}'
    applied = [r["version"] for r in raw_rows(store_at, "schema_migrations", order="version")]
    assert applied == [m.version for m in schema.MIGRATIONS]


def test_the_cli_reads_an_upgraded_audit_log(store_at, tmp_path: Path, monkeypatch, capsys, no_settings_env) -> None:
    """`guiderag gaps` on a store the old way: it upgrades it and lists the old rows."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    make_old_store(store_at, "altered")
    assert main(["gaps", "--json", "--db", str(store_at)]) == 0
    gaps = json.loads(capsys.readouterr().out)["gaps"]
    assert [(g["question"], g["count"]) for g in gaps] == [("糖尿病の食事療法を教えてください", 2)]


def test_a_command_failing_before_it_audits_writes_nothing(scraped_sample: Path, fast_env: Path, capsys) -> None:
    """A store at the current schema already has its audit table: an ask refused for a
    guideline the store lacks leaves the file byte for byte as it was."""
    from storekit import copy_store

    db = copy_store(scraped_sample, fast_env)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    assert main(["ask", "胸腺腫とは？", "--guideline", "nosuch"]) == 2
    assert "no guideline 'nosuch'" in capsys.readouterr().err
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
