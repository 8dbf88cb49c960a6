"""The audit table's SQL: one row per answer, each written in its own transaction, read
back in order, the not-covered questions grouped. Its schema is migration 3 of
store.schema (`schema.AUDIT`), so every store opened for writing has the table; what a
row says about an answer is chatbot.audit's business."""
from __future__ import annotations

from typing import Any, Mapping

from . import schema
from .backend import Connection, marks

# Every column, in order: the table of migration 4, then what later migrations added.
COLUMNS: tuple[str, ...] = tuple(schema.AUDIT.column_names) + schema.AUDIT_ADDED


class AuditTable:
    """The `audit` table of the store behind `conn` (a store.backend.Connection)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def insert(self, row: Mapping[str, Any]) -> int:
        """Write one row (columns by name, `id` left to the database) in a transaction of
        its own: committed whole or rolled back, never losing an earlier row. Its id."""
        unknown = set(row) - set(COLUMNS)
        if unknown:  # pragma: no cover - a developer's slip
            raise ValueError(f"no audit column {', '.join(sorted(unknown))}")
        with self.conn.transaction():
            return self.conn.insert(
                f"INSERT INTO audit ({', '.join(row)}) VALUES ({marks(self.conn, len(row))})", list(row.values()))

    def rows(self) -> list[dict[str, Any]]:
        """Every row, oldest first."""
        cur = self.conn.execute(f"SELECT {', '.join(COLUMNS)} FROM audit ORDER BY id")
        return [dict(zip(COLUMNS, r)) for r in cur.fetchall()]

    def get(self, audit_id: int) -> dict[str, Any] | None:
        r = self.conn.execute(f"SELECT {', '.join(COLUMNS)} FROM audit WHERE id = {self.conn.param}",
                              (audit_id,)).fetchone()
        return dict(zip(COLUMNS, r)) if r else None

    def count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM audit").fetchone()[0])

    def grouped(self, coverage: str) -> list[tuple[str, int, str, str]]:
        """(normalised question, times asked, first asked, last asked) of the rows with this
        coverage, most asked first."""
        cur = self.conn.execute(
            "SELECT question_norm, COUNT(*), MIN(asked_at), MAX(asked_at) FROM audit "
            f"WHERE coverage = {self.conn.param} GROUP BY question_norm ORDER BY COUNT(*) DESC, MAX(asked_at) DESC",
            (coverage,),
        )
        return [(str(q), int(c), str(first), str(last)) for q, c, first, last in cur.fetchall()]
