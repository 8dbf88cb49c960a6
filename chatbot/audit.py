"""The audit log: one row per ask, in the page store (its `audit` table), written before answering.

A row records what an incident review needs: when, the question, keywords, mode (asked
for and used), model, retrieval scores and threshold, the page URLs, versions and line
numbers shown, the exact answer text, coverage, any error, what each model asked did
(declined, fell back, and why) and its raw reply. Each row is written in its
own transaction, so a failed write never loses earlier rows. `export_xlsx` writes the log
to a workbook atomically; `gaps` lists the questions the guideline did not cover. The
table is the store's (migration 3 of store.schema; its SQL is store.audit), on SQLite and
PostgreSQL alike.

An SQLite store has one writer at a time: a second connection's insert waits in SQLite's
busy handler, which sleeps and polls (1, 2, 5, 10 ... 100 ms), so under concurrent asks
an answer could wait tens of milliseconds after the lock was free. The threads of one
process therefore take the store file's writer lock here first (`writer_lock`, woken the
moment the previous insert committed); only writers of other processes meet SQLite's.
"""
from __future__ import annotations

import contextlib
import json
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from guiderag.clock import utc_now_ms
from guiderag.errors import StoreAccessError, StoreError, WorkbookError
from guiderag.files import save_workbook_atomic
from guiderag.redact import redact
from guiderag.store.audit import COLUMNS, AuditTable
from guiderag.store.backend import Connection
from guiderag.store.connection import restate
from guiderag.store.sqlite import GuardedConnection

from .answer import NOT_GOVERNED, Answer

ERROR = "error"  # coverage of a row for an ask that failed before an answer existed

# A raw model reply is kept up to this many characters (a runaway loop is not worth more).
REPLY_KEEP_CHARS = 8000


def normalize_question(text: str) -> str:
    """NFKC and collapsed whitespace: the same question typed twice groups together."""
    return " ".join(unicodedata.normalize("NFKC", text or "").split())


def _retrieval_columns(retrieval: dict[str, Any]) -> dict[str, Any]:
    """The audit columns read from an answer's retrieval JSON (also for errors)."""
    return {
        "pipeline": retrieval.get("pipeline"),
        "threshold": retrieval.get("threshold"),
        "top_score": retrieval.get("top_score"),
        "scores": json.dumps(retrieval.get("candidate_pages", []), ensure_ascii=False),
        "corpus_version": retrieval.get("corpus_version"),
    }


def _model_columns(model_use: dict[str, Any], model_replies: dict[str, str]) -> dict[str, Any]:
    """The audit columns of what the models did (None when no model was asked)."""
    return {
        "model_use": json.dumps(model_use, ensure_ascii=False) if model_use else None,
        "model_replies": json.dumps({k: v[:REPLY_KEEP_CHARS] for k, v in model_replies.items()},
                                    ensure_ascii=False) if model_replies else None,
    }


def _conversation_column(conversation: dict[str, Any] | None) -> dict[str, Any]:
    """The audit column of a follow-up: its history and what was carried (none when the
    question was asked alone, so a row of a question alone is as it always was)."""
    if conversation is None:
        return {}
    return {"conversation": json.dumps(conversation, ensure_ascii=False)}


@dataclass(frozen=True)
class Gap:
    """A not-covered question (normalised) and how often it was asked."""

    question: str
    count: int
    first_asked: str
    last_asked: str
    # the coverage decision of its last asking (chatbot.coverage_decision): P and why
    coverage_probability: float | None = None
    coverage_reasons: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"question": self.question, "count": self.count,
                "first_asked": self.first_asked, "last_asked": self.last_asked,
                "coverage_probability": self.coverage_probability,
                "coverage_reasons": list(self.coverage_reasons)}


_WRITERS: dict[str, threading.Lock] = {}
_WRITERS_LOCK = threading.Lock()


def writer_lock(conn: Connection) -> threading.Lock | None:
    """The lock this process's writers of the SQLite store behind `conn` share (by the
    store's location as opened: one file named two ways only meets SQLite's own lock),
    None for a PostgreSQL store (its inserts run side by side)."""
    if not isinstance(conn, GuardedConnection):
        return None
    where = conn.location
    with _WRITERS_LOCK:
        return _WRITERS.setdefault(where, threading.Lock())


class AuditLog:
    """The audit log of the store behind `conn` (a Store's `.conn`)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.table = AuditTable(conn)
        self._lock = threading.Lock()  # one connection may serve several app threads
        self._writer: contextlib.AbstractContextManager[Any] = writer_lock(conn) or contextlib.nullcontext()

    # -- writing --------------------------------------------------------------------
    def record(
        self, answer: Answer, *, requested_mode: str | None = None, keywords_model: str | None = None,
        conversation: dict[str, Any] | None = None,
    ) -> int:
        """Write one row for an answer (in its own transaction) and return its id.
        `conversation`: the history a follow-up was read with and how it was read
        (chatbot.conversation.Reading.audit_json), None for a question asked alone."""
        retrieval = answer.retrieval or {}
        shown = [
            {"url": p.url, "version": p.version, "lines": list(p.lines), "content_hash": p.content_hash,
             **({"pdf_page": p.pdf_page, "pdf_pages": list(p.pdf_pages or [])} if p.pdf_page is not None else {})}
            for p in answer.passages
        ]
        payload = answer.to_json()
        payload.pop("audit_id", None)
        return self._insert({
            "asked_at": utc_now_ms(),
            "question": answer.question,
            "question_norm": normalize_question(answer.question),
            "keywords": json.dumps(list(answer.keywords), ensure_ascii=False),
            "requested_mode": requested_mode or answer.mode,
            "mode": answer.mode,
            "model": answer.model,
            "keywords_model": keywords_model,
            **_retrieval_columns(retrieval),
            "shown": json.dumps(shown, ensure_ascii=False),
            "answer": answer.answer,
            "summary": answer.summary,
            "unsupported": json.dumps(list(answer.unsupported_sentences), ensure_ascii=False),
            "coverage": answer.coverage,
            "error": answer.error,
            "latency_ms": answer.latency_ms,
            "answer_json": json.dumps(payload, ensure_ascii=False),
            "guideline": (answer.guideline or {}).get("id"),
            "routing": json.dumps(answer.routing, ensure_ascii=False) if answer.routing is not None else None,
            **_model_columns(answer.model_use, answer.model_replies),
            **_conversation_column(conversation),
        })

    def record_error(
        self,
        question: str,
        error: str,
        *,
        keywords: Iterable[str] = (),
        mode: str | None = None,
        model: str | None = None,
        keywords_model: str | None = None,
        retrieval: dict[str, Any] | None = None,
        latency_ms: float | None = None,
        guideline: str | None = None,
        routing: dict[str, Any] | None = None,
        model_use: dict[str, Any] | None = None,
        model_replies: dict[str, str] | None = None,
        conversation: dict[str, Any] | None = None,
    ) -> int:
        """Write one row for an ask that ended in an error (nothing was shown)."""
        retrieval = retrieval or {}
        return self._insert({
            "asked_at": utc_now_ms(),
            "question": question,
            "question_norm": normalize_question(question),
            "keywords": json.dumps(list(keywords), ensure_ascii=False),
            "requested_mode": mode,
            "mode": mode,
            "model": model,
            "keywords_model": keywords_model,
            **_retrieval_columns(retrieval),
            "shown": "[]",
            "answer": None,
            "summary": None,
            "unsupported": "[]",
            "coverage": ERROR,
            "error": error,
            "latency_ms": latency_ms,
            "answer_json": None,
            "guideline": guideline,
            "routing": json.dumps(routing, ensure_ascii=False) if routing is not None else None,
            **_model_columns(model_use or {}, model_replies or {}),
            **_conversation_column(conversation),
        })

    def _insert(self, row: dict[str, Any]) -> int:
        # An error message may quote a URL with credentials (a model endpoint): never stored.
        for key in ("error", "answer_json", "model_use", "model_replies", "conversation"):
            if isinstance(row.get(key), str):
                row[key] = redact(row[key])
        try:
            with self._lock, self._writer:
                return self.table.insert(row)
        except StoreAccessError as exc:
            raise restate(exc, "could not write the audit log, so the answer was not shown") from exc
        except self.conn.errors as exc:
            raise StoreError(
                f"could not write the audit log ({exc}); the answer was not shown. Earlier audit "
                "rows are intact. Check disk space and permissions of the database file."
            ) from exc

    # -- reading --------------------------------------------------------------------
    def rows(self) -> list[dict[str, Any]]:
        """Every row, oldest first."""
        with self._lock:
            return self.table.rows()

    def get(self, audit_id: int) -> dict[str, Any] | None:
        with self._lock:
            return self.table.get(audit_id)

    def count(self) -> int:
        with self._lock:
            return self.table.count()

    def gaps(self) -> list[Gap]:
        """Not-covered questions grouped by normalised text, most asked first."""
        with self._lock:
            groups = self.table.grouped(NOT_GOVERNED)
            decided = self._decisions()
        return [Gap(q, c, first, last, *decided.get(q, (None, ()))) for q, c, first, last in groups]

    def _decisions(self) -> dict[str, tuple[float | None, tuple[str, ...]]]:
        """The coverage probability and reasons of the last not-covered row of each question
        (from its answer JSON)."""
        cur = self.conn.execute(
            "SELECT question_norm, answer_json FROM audit WHERE id IN (SELECT MAX(id) FROM audit "
            f"WHERE coverage = {self.conn.param} GROUP BY question_norm)", (NOT_GOVERNED,))
        out: dict[str, tuple[float | None, tuple[str, ...]]] = {}
        for question, raw in cur.fetchall():
            try:
                data = json.loads(raw) if raw else {}
            except ValueError:
                data = {}
            p = data.get("coverage_probability")
            out[str(question)] = (float(p) if isinstance(p, (int, float)) else None,
                                  tuple(str(r) for r in data.get("coverage_reasons") or ()))
        return out

    # -- export -----------------------------------------------------------------------
    def export_xlsx(self, path: Path | str) -> int:
        """Write the log (sheet `audit`) and the gaps (sheet `gaps`) to a workbook, atomically.

        Returns the number of audit rows written. Text cells are always stored as text
        (a question starting with "=" must not become a formula).
        """
        from openpyxl import Workbook
        from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

        path = Path(path)
        if path.suffix.lower() != ".xlsx":
            raise WorkbookError(f"the audit export must be an .xlsx file, not {path.name!r}")
        if path.exists() and path.is_dir():
            raise WorkbookError(f"{path} is a directory; give a file name ending in .xlsx")
        rows = self.rows()
        wb = Workbook()
        ws = wb.active
        ws.title = "audit"
        _write_sheet(ws, list(COLUMNS), [[r[c] for c in COLUMNS] for r in rows], ILLEGAL_CHARACTERS_RE)
        gs = wb.create_sheet("gaps")
        _write_sheet(gs, ["question", "count", "first_asked", "last_asked", "coverage_probability", "coverage_reasons"],
                     [[g.question, g.count, g.first_asked, g.last_asked, g.coverage_probability,
                       "\n".join(g.coverage_reasons)] for g in self.gaps()],
                     ILLEGAL_CHARACTERS_RE)
        try:
            save_workbook_atomic(wb, path)
        except OSError as exc:
            raise WorkbookError(f"cannot write {path}: {exc}; any earlier file is unchanged") from exc
        return len(rows)


def _write_sheet(ws: Any, header: list[str], rows: list[list[Any]], illegal: Any) -> None:
    ws.append(header)
    for i, values in enumerate(rows):
        for c, value in enumerate(values, start=1):
            cell = ws.cell(row=i + 2, column=c)
            if isinstance(value, str):
                cell.value = illegal.sub("", value)
                cell.data_type = "s"  # never a formula
            else:
                cell.value = value
    ws.freeze_panes = "A2"
