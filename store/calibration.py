"""A guideline's coverage calibration, kept in the store beside its pages (table
`coverage_calibrations`, store.schema migration "coverage calibrations").

`guiderag calibrate` fits a guideline's coverage decision to the deployment's own labelled
questions (eval.calibrate); the result is one row per guideline: the model (JSON, the
operating point included), the corpus version it was fitted on, when, and a summary (the
question set, what was refitted, the curve). Every process that answers reads it from the
store, so the next `ask`, `serve` or `chat` answer uses it, on SQLite and PostgreSQL
alike; `calibrate --reset` deletes the row and the shipped model applies again. A row
fitted on a corpus version that has since changed is still used, and flagged
(`guiderag guidelines`, `guiderag check`).

Every save and removal also writes a new token to the store's meta row STAMP_KEY, in the
same transaction: `stamp(store)` reads that one row, so a process answering many
questions reads the token per ask and the calibration itself (its model's JSON) only when
the token changed (chatbot.gate).
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from guiderag.clock import utc_now

if TYPE_CHECKING:
    from .pages import Store

TABLE = "coverage_calibrations"
# The meta row whose value changes with every save and removal (a new random token).
STAMP_KEY = "coverage_calibrations_stamp"


@dataclass(frozen=True)
class Calibration:
    """One guideline's fitted coverage decision."""

    guideline: str
    corpus_version: str
    fitted_at: str
    model: dict[str, Any]  # chatbot.coverage_model.CoverageModel.to_json()
    summary: dict[str, Any]

    def stale(self, corpus_version: str) -> bool:
        """True when the guideline's corpus has changed since the fit."""
        return bool(corpus_version) and corpus_version != self.corpus_version

    def to_json(self) -> dict[str, Any]:
        return {"guideline": self.guideline, "corpus_version": self.corpus_version, "fitted_at": self.fitted_at,
                "operating_point": self.model.get("operating_point"), "summary": self.summary}


def save(store: Store, guideline: str, corpus_version: str, model: dict[str, Any], summary: dict[str, Any]) -> Calibration:
    """Store (or replace) the guideline's calibration, in one transaction."""
    cal = Calibration(guideline, corpus_version, utc_now(), dict(model), dict(summary))
    with store.conn.transaction():
        store.conn.upsert(TABLE, {"guideline_id": guideline, "corpus_version": corpus_version,
                                  "fitted_at": cal.fitted_at, "model": json.dumps(cal.model, ensure_ascii=False),
                                  "summary": json.dumps(cal.summary, ensure_ascii=False)},
                          key=("guideline_id",),
                          update={c: f"excluded.{c}" for c in ("corpus_version", "fitted_at", "model", "summary")})
        _new_stamp(store)
    return cal


def load(store: Store, guideline: str) -> Calibration | None:
    """The guideline's calibration, or None (the shipped model applies)."""
    if not store.conn.table_exists(TABLE):  # a store read before its migration (read-only opens)
        return None
    conn = store.conn
    row = conn.execute(f"SELECT guideline_id, corpus_version, fitted_at, model, summary FROM {TABLE} "
                       f"WHERE guideline_id = {conn.param}", (guideline,)).fetchone()
    if row is None:
        return None
    return Calibration(str(row[0]), str(row[1]), str(row[2]), json.loads(row[3]), json.loads(row[4]))


def remove(store: Store, guideline: str) -> bool:
    """Delete the guideline's calibration; True when there was one."""
    conn = store.conn
    with conn.transaction():
        cur = conn.execute(f"DELETE FROM {TABLE} WHERE guideline_id = {conn.param}", (guideline,))
        _new_stamp(store)
    return bool(cur.rowcount)


def stamp(store: Store) -> str:
    """A token that changes whenever any guideline's calibration is saved or removed, by
    any process: one row's read ("" for a store no calibration was ever written to with
    it). Equal tokens: the calibrations are what they were."""
    return store.get_meta(STAMP_KEY) or ""


def _new_stamp(store: Store) -> None:
    """A new token (inside the caller's transaction: it commits with the change)."""
    store.conn.upsert("meta", {"key": STAMP_KEY, "value": uuid.uuid4().hex}, key=("key",),
                      update={"value": "excluded.value"})


def all_calibrations(store: Store) -> dict[str, Calibration]:
    """Every guideline's calibration, by guideline id."""
    if not store.conn.table_exists(TABLE):
        return {}
    rows = store.conn.execute(f"SELECT guideline_id FROM {TABLE} ORDER BY guideline_id").fetchall()
    out = {}
    for (gid,) in rows:
        cal = load(store, str(gid))
        if cal is not None:
            out[cal.guideline] = cal
    return out
