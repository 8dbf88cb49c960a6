"""Question workbooks in, results workbooks out (openpyxl).

Question workbook: the first sheet (or one named "Questions"), a header row, one row per
question. Columns, matched case-insensitively, with spaces, hyphens and underscores
treated alike: `id`, `question`, `kind` (in_scope / out_of_scope; "in scope", "In-Scope"
are accepted), optional `reference_answer` (also "reference"), optional `gold_url` (also
"url"), optional `gold_answers` (every accepted exact answer string: a JSON list, or one
per line; used for "gold in answer" and "answer in reference", while the reference answer
is scored with ROUGE-L and word precision/recall/F1). Japanese headers are accepted too
(番号, 質問, 種別, 模範解答, 正解URL, 正解).

Conversations: with optional `conversation` and `turn` columns (会話, ターン), the rows of
one conversation are the turns of a patient's chat: each is asked with the questions of
the conversation's earlier turns as its history, oldest first (`Question.history`; the
questions only, whatever was answered to them). A row with an empty conversation is a
question alone; a workbook without those columns is read exactly as before. A
conversation's turn numbers are positive whole numbers, each once.

Rows that are entirely blank are skipped (with a warning when they sit between
questions, since a blank line in a spreadsheet is harmless). A row that is only partly
filled (an id without a question, a question without a kind...) is rejected with its row
number, and so is a workbook with no question at all: WorkbookError, exit code 2.

Results workbook: a "Results" sheet (one row per question, see RESULT_COLUMNS; the
reviewer columns are left empty with drop-down lists of the published review
categories) and a "Summary" sheet. Written atomically (temporary file + os.replace), so
an interrupted run never leaves a broken workbook behind.
"""
from __future__ import annotations

import json
import re
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from guiderag.errors import WorkbookError
from guiderag.files import save_workbook_atomic
from guiderag.ranges import number_ranges

from .turns import check_turn, with_histories

IN_SCOPE = "in_scope"
OUT_OF_SCOPE = "out_of_scope"
KINDS = (IN_SCOPE, OUT_OF_SCOPE)

QUESTIONS_SHEET = "Questions"
RESULTS_SHEET = "Results"
SUMMARY_SHEET = "Summary"
EXCEL_CELL_MAX = 32_767  # characters in one cell

# The published review categories (drop-down lists of the empty reviewer columns).
REVIEW_CHOICES: dict[str, tuple[str, ...]] = {
    "hallucination": ("absent", "present"),
    "relevance": ("very relevant", "relevant", "irrelevant"),
    "completeness": ("major omission", "minor omission", "just right", "minor addition", "major addition"),
}

_HEADER_ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "question id", "qid", "番号", "質問id"),
    "question": ("question", "質問", "質問文"),
    "kind": ("kind", "scope", "type", "種別", "区分"),
    "reference_answer": ("reference answer", "reference", "模範解答", "参照回答"),
    "gold_url": ("gold url", "url", "正解url"),
    "gold_answers": ("gold answers", "正解"),
    "category": ("category", "カテゴリ", "カテゴリー", "分類"),
    "conversation": ("conversation", "conversation id", "会話", "会話id"),
    "turn": ("turn", "ターン", "turn number"),
}
REQUIRED = ("id", "question", "kind")


@dataclass
class Question:
    """One evaluation question. `gold_answers` are all accepted answer strings (if known)."""

    id: str
    question: str
    kind: str  # IN_SCOPE | OUT_OF_SCOPE
    reference_answer: str | None = None
    gold_url: str | None = None
    gold_answers: list[str] = field(default_factory=list)
    category: str = ""  # optional: what kind of question (lay, other_disease, ...), for per-category scores
    # a turn of a conversation: its id and number, and the questions of its earlier turns
    # (oldest first), which it is asked with
    conversation: str | None = None
    turn: int | None = None
    history: tuple[str, ...] = ()

    @property
    def golds(self) -> list[str]:
        """The accepted exact answer strings (gold_in_answer, answer_in_reference).

        Only the gold_answers column: a reference answer is a model answer, often in other
        words, scored by ROUGE-L and word P/R/F1, never by containment.
        """
        return list(self.gold_answers)


# --- reading questions -------------------------------------------------------

def _header_key(value: Any) -> str | None:
    if value is None:
        return None
    text = re.sub(r"[\s_\-]+", " ", str(value).strip().lower())
    for key, aliases in _HEADER_ALIASES.items():
        if text in aliases:
            return key
    return None


def _kind(value: str) -> str | None:
    text = re.sub(r"[\s_\-]+", "_", value.strip().lower())
    return text if text in KINDS else None


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _load(path: Path, *, read_only: bool) -> Any:
    import openpyxl
    from openpyxl.utils.exceptions import InvalidFileException

    path = Path(path)
    if not path.exists():
        raise WorkbookError(f"workbook not found: {path}")
    if path.is_dir():
        raise WorkbookError(f"{path} is a folder, not an .xlsx workbook")
    try:
        return openpyxl.load_workbook(path, read_only=read_only, data_only=True)
    except (InvalidFileException, zipfile.BadZipFile, KeyError, OSError, ValueError, TypeError) as exc:
        raise WorkbookError(
            f"{path} is not a readable .xlsx workbook ({type(exc).__name__}: {exc}); "
            "save it from Excel or LibreOffice as 'Excel 2007-365 (.xlsx)'"
        ) from exc


def read_questions(path: Path, *, warn: Any = None, require_id: bool = True) -> list[Question]:
    """Read a question workbook; raise WorkbookError with a row number on bad input.
    Without `require_id` (calibrate) the id column may be left out: a row is then named by
    its number."""
    warn = warn or (lambda msg: print(f"guiderag: warning: {msg}", file=sys.stderr))
    wb = _load(path, read_only=True)
    try:
        ws = wb[QUESTIONS_SHEET] if QUESTIONS_SHEET in wb.sheetnames else wb.worksheets[0]
        rows = list(ws.iter_rows(values_only=True))
    finally:
        wb.close()
    header_at = next((i for i, r in enumerate(rows) if any(_cell_text(v) for v in r)), None)
    if header_at is None:
        raise WorkbookError(f"{path}: the sheet '{ws.title}' is empty (expected a header row: id, question, kind)")
    header = rows[header_at]
    columns: dict[str, int] = {}
    for j, value in enumerate(header):
        key = _header_key(value)
        if key and key not in columns:
            columns[key] = j
    missing = [c for c in REQUIRED if c not in columns and (require_id or c != "id")]
    if missing:
        found = ", ".join(_cell_text(v) for v in header if _cell_text(v)) or "none"
        raise WorkbookError(
            f"{path}: missing column(s) {', '.join(missing)} in the header row "
            f"(row {header_at + 1}; found: {found}). Required: id, question, kind; "
            "optional: reference_answer, gold_url, gold_answers"
        )

    def get(row: Sequence[Any], key: str) -> str:
        j = columns.get(key)
        return _cell_text(row[j]) if j is not None and j < len(row) else ""

    if ("conversation" in columns) != ("turn" in columns):
        have, lacks = ("conversation", "turn") if "conversation" in columns else ("turn", "conversation")
        raise WorkbookError(f"{path}: a '{have}' column needs a '{lacks}' column too (a conversation's "
                            "turns are numbered 1, 2, 3...)")
    questions: list[Question] = []
    seen: dict[str, int] = {}
    blank_rows: list[int] = []
    turns: dict[tuple[str, int], int] = {}
    for i, row in enumerate(rows[header_at + 1:], start=header_at + 2):
        if not any(_cell_text(v) for v in row):
            blank_rows.append(i)
            continue
        qid, text, kind_raw = get(row, "id"), get(row, "question"), get(row, "kind")
        if not qid and not require_id:
            qid = f"row {i}"
        empty = [name for name, v in (("id", qid), ("question", text), ("kind", kind_raw)) if not v]
        if empty:
            raise WorkbookError(f"{path}: row {i} has an empty {', '.join(empty)}: fill it in or delete the row")
        kind = _kind(kind_raw)
        if kind is None:
            raise WorkbookError(f"{path}: row {i}: kind must be in_scope or out_of_scope, not {kind_raw!r}")
        if qid in seen:
            raise WorkbookError(f"{path}: row {i}: id {qid!r} already used in row {seen[qid]}; ids must be unique")
        seen[qid] = i
        conversation, turn = check_turn(path, i, get(row, "conversation"), get(row, "turn"), turns)
        questions.append(
            Question(
                id=qid,
                question=text,
                kind=kind,
                reference_answer=get(row, "reference_answer") or None,
                gold_url=get(row, "gold_url") or None,
                gold_answers=_parse_list(get(row, "gold_answers")),
                category=get(row, "category"),
                conversation=conversation,
                turn=turn,
            )
        )
    if not questions:
        raise WorkbookError(f"{path}: no question rows under the header (row {header_at + 1})")
    last = seen[questions[-1].id]
    inner = [r for r in blank_rows if r < last]
    if inner:
        warn(f"{path}: skipped {len(inner)} blank row(s) between questions (rows {number_ranges(inner)})")
    return with_histories(questions)


def _parse_list(text: str) -> list[str]:
    if not text:
        return []
    if text.startswith("["):
        try:
            data = json.loads(text)
            if isinstance(data, list):
                return [str(x) for x in data if str(x)]
        except json.JSONDecodeError:
            pass
    return [line.strip() for line in text.splitlines() if line.strip()]


def write_questions(questions: Sequence[Question], path: Path) -> None:
    """Write a question workbook that `read_questions` reads back (atomically)."""
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = QUESTIONS_SHEET
    turns = any(q.conversation is not None for q in questions)  # columns only for conversations
    ws.append(["id", "question", "kind", "reference_answer", "gold_url", "gold_answers"]
              + (["conversation", "turn"] if turns else []))
    for q in questions:
        _append(ws, [q.id, q.question, q.kind, q.reference_answer, q.gold_url,
                     json.dumps(q.gold_answers, ensure_ascii=False) if q.gold_answers else None]
                + ([q.conversation, q.turn] if turns else []))
    for col, width in zip("ABCDEFGH", (14, 60, 14, 30, 40, 30, 14, 6)):
        ws.column_dimensions[col].width = width
    ws.freeze_panes = "A2"
    save_workbook_atomic(wb, path)


# --- results -----------------------------------------------------------------

# (key, width, kind) in sheet order; kind: text | bool | int | float | json | review
RESULT_COLUMNS: list[tuple[str, int, str]] = [
    ("id", 14, "text"),
    ("question", 40, "text"),
    ("kind", 12, "text"),
    ("answer", 60, "text"),
    ("hallucination", 14, "review"),
    ("relevance", 14, "review"),
    ("completeness", 16, "review"),
    ("reviewer_note", 24, "review"),
    ("coverage", 13, "text"),
    ("coverage_probability", 10, "float"),
    ("coverage_reasons", 40, "text"),
    ("reference_answer", 24, "text"),
    ("gold_url", 30, "text"),
    ("keywords", 20, "text"),
    ("candidates", 50, "text"),
    ("top_url", 30, "text"),
    ("reference_chars", 10, "int"),
    ("answer_chars", 10, "int"),
    ("latency_ms", 10, "float"),
    ("governed", 9, "bool"),
    ("refused", 9, "bool"),
    ("no_candidate", 9, "bool"),
    ("verbatim", 9, "bool"),
    ("gold_hit", 9, "bool"),
    ("page_first", 9, "bool"),
    ("answer_in_reference", 9, "bool"),
    ("rouge_l_p", 9, "float"),
    ("rouge_l_r", 9, "float"),
    ("rouge_l_f1", 9, "float"),
    ("token_p", 9, "float"),
    ("token_r", 9, "float"),
    ("token_f1", 9, "float"),
    ("failed", 9, "bool"),
    ("error", 30, "text"),
    ("model_outcome", 12, "text"),
    ("model_fell_back", 9, "bool"),
    ("model_declined", 9, "bool"),
    ("summary_repeats", 9, "bool"),
    ("gold_answers", 24, "json"),
    ("json", 60, "json"),
    ("guideline", 14, "text"),
    ("routed_right", 9, "bool"),
    ("conversation", 14, "text"),
    ("turn", 6, "int"),
    ("context", 40, "json"),
]
RESULT_KEYS = [c[0] for c in RESULT_COLUMNS]


def _clean(text: str) -> str:
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

    return ILLEGAL_CHARACTERS_RE.sub("", text)


def _append(ws: Any, values: Iterable[Any]) -> None:
    """Append a row; strings are stored as text (a leading '=' is never a formula)."""
    from openpyxl.cell.cell import Cell

    row: list[Any] = []
    for value in values:
        if isinstance(value, str):
            cell = Cell(ws, value=_clean(value))
            cell.data_type = "s"
            row.append(cell)
        else:
            row.append(value)
    ws.append(row)


def _json_cell(value: Any) -> str | None:
    """Compact JSON that fits one Excel cell and stays a valid object.

    An Excel cell holds 32,767 characters. When the answer object is longer, passage
    texts are left out first (the citations remain), then long text fields are cut,
    and a `truncated` field says so.
    """
    if value is None:
        return None
    dump = lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":"))  # noqa: E731
    text = dump(value)
    if len(text) <= EXCEL_CELL_MAX or not isinstance(value, dict):
        return text if len(text) <= EXCEL_CELL_MAX else dump({"truncated": "value exceeded one Excel cell"})
    slim = dict(value, truncated="passage texts left out: the object exceeded one Excel cell")
    if isinstance(slim.get("passages"), list):
        slim["passages"] = [{k: v for k, v in p.items() if k != "text"} if isinstance(p, dict) else p
                            for p in slim["passages"]]
    text = dump(slim)
    if len(text) > EXCEL_CELL_MAX:
        slim["truncated"] = "passage texts left out and long text fields cut: the object exceeded one Excel cell"
        longest = sorted((k for k, v in slim.items() if isinstance(v, str)), key=lambda k: -len(slim[k]))
        for key in longest:
            excess = len(dump(slim)) - EXCEL_CELL_MAX
            if excess <= 0:
                break
            slim[key] = slim[key][: max(0, len(slim[key]) - excess - 16)] + "…"
        text = dump(slim)
    return text if len(text) <= EXCEL_CELL_MAX else dump({"truncated": "value exceeded one Excel cell"})


def write_results(
    path: Path,
    rows: Sequence[dict],
    summary: dict[str, dict],
    meta: Sequence[tuple[str, Any]],
    notes: Sequence[tuple[str, str]] = (),
) -> None:
    """Write the results workbook (Results + Summary sheets) atomically."""
    import openpyxl
    from openpyxl.styles import Alignment, Font
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.datavalidation import DataValidation

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = RESULTS_SHEET
    ws.append(RESULT_KEYS)
    for cell in ws[1]:
        cell.font = Font(bold=True)
    for row in rows:
        values = []
        for key, _, kind in RESULT_COLUMNS:
            value = row.get(key)
            if kind == "json":
                value = _json_cell(value) if not isinstance(value, str) else value
            elif kind == "float" and value is not None:
                value = round(float(value), 4)
            elif kind == "text" and value is not None and not isinstance(value, str):
                value = str(value)
            if isinstance(value, str) and len(value) > EXCEL_CELL_MAX:
                value = value[:EXCEL_CELL_MAX]
            values.append(value)
        _append(ws, values)
    last = max(ws.max_row, 2)
    for j, (key, width, kind) in enumerate(RESULT_COLUMNS, start=1):
        letter = get_column_letter(j)
        ws.column_dimensions[letter].width = width
        if key in REVIEW_CHOICES:
            dv = DataValidation(
                type="list",
                formula1='"' + ",".join(REVIEW_CHOICES[key]) + '"',
                allow_blank=True,
                showErrorMessage=True,
                errorTitle=key,
                error="Choose one of: " + " / ".join(REVIEW_CHOICES[key]),
                promptTitle=key,
                prompt=" / ".join(REVIEW_CHOICES[key]),
            )
            dv.add(f"{letter}2:{letter}{last}")
            ws.add_data_validation(dv)
    for cell in ws["D"][1:]:
        cell.alignment = Alignment(wrap_text=True, vertical="top")
    ws.freeze_panes = "B2"
    ws.auto_filter.ref = f"A1:{get_column_letter(len(RESULT_COLUMNS))}{ws.max_row}"

    sm = wb.create_sheet(SUMMARY_SHEET)
    sm.append(["metric", "value", "n", "description"])
    for cell in sm[1]:
        cell.font = Font(bold=True)
    for name, info in summary.items():
        value = info.get("value")
        _append(sm, [name, None if value is None else round(float(value), 4), info.get("n"), info.get("description", "")])
    sm.append([])
    for key, value in meta:
        _append(sm, [key, value if isinstance(value, (int, float)) or value is None else str(value)])
    if notes:
        sm.append([])
        for key, text in notes:
            _append(sm, [key, text])
    for letter, width in zip("ABCD", (28, 14, 8, 80)):
        sm.column_dimensions[letter].width = width
    save_workbook_atomic(wb, path)


def read_results(path: Path) -> tuple[list[dict], dict[str, dict], dict[str, Any]]:
    """Read a results workbook: (rows, summary metrics, run metadata)."""
    wb = _load(path, read_only=True)
    try:
        if RESULTS_SHEET not in wb.sheetnames:
            raise WorkbookError(f"{path} has no '{RESULTS_SHEET}' sheet: is it a `guiderag eval` results workbook?")
        raw = list(wb[RESULTS_SHEET].iter_rows(values_only=True))
        summary_rows = list(wb[SUMMARY_SHEET].iter_rows(values_only=True)) if SUMMARY_SHEET in wb.sheetnames else []
    finally:
        wb.close()
    if not raw:
        raise WorkbookError(f"{path}: the '{RESULTS_SHEET}' sheet is empty")
    header = [str(h) if h is not None else "" for h in raw[0]]
    missing = [k for k in ("id", "kind") if k not in header]
    if missing:
        raise WorkbookError(f"{path}: the '{RESULTS_SHEET}' sheet lacks column(s) {', '.join(missing)}")
    kinds = {key: kind for key, _, kind in RESULT_COLUMNS}
    rows: list[dict] = []
    for values in raw[1:]:
        if not any(v is not None and v != "" for v in values):
            continue
        row: dict[str, Any] = {}
        for key, value in zip(header, values):
            if not key:
                continue
            if kinds.get(key) == "json" and isinstance(value, str) and value:
                try:
                    value = json.loads(value)
                except json.JSONDecodeError:
                    pass
            if key == "id" and value is not None:
                value = _cell_text(value)
            row[key] = value
        rows.append(row)
    summary: dict[str, dict] = {}
    meta: dict[str, Any] = {}
    section = "metrics"
    for values in summary_rows[1:]:
        if not values or all(v is None for v in values):
            section = "meta"
            continue
        name = values[0]
        if section == "metrics":
            summary[str(name)] = {"value": values[1], "n": values[2] if len(values) > 2 else None,
                                  "description": values[3] if len(values) > 3 else ""}
        elif name is not None:
            meta[str(name)] = values[1] if len(values) > 1 else None
    return rows, summary, meta
