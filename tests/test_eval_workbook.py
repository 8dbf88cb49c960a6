"""Question and results workbooks: round trips, header variants, reviewer drop-downs."""
from __future__ import annotations

import json
from pathlib import Path

import openpyxl
import pytest

from guiderag.chatbot.answer import Answer, ShownPassage
from guiderag.eval import metrics
from guiderag.eval.runner import failed_row, score
from guiderag.eval.workbook import (
    REVIEW_CHOICES,
    Question,
    read_questions,
    read_results,
    write_questions,
    write_results,
)
from guiderag.errors import WorkbookError

PAGE_LINES = {
    ("http://127.0.0.1:9/guide/q1.html", 2): ("胸腺腫瘍とは", "胸腺腫瘍の診断には CT 検査を行います。", "MRI 検査を行うこともあります。"),
}


def _lines(url: str, version: int | None):
    return PAGE_LINES.get((url, version or 0), ())


def _answer(question: str, text: str, governed: bool = True) -> Answer:
    passages = []
    if governed:
        passages = [ShownPassage(url="http://127.0.0.1:9/guide/q1.html", title="胸腺腫瘍とは", score=0.61,
                                 lines=[2, 3], text=text, version=2, fetched_at="2026-11-29T12:00:00Z",
                                 content_hash="sha256:abc")]
    return Answer(
        question=question, keywords=["胸腺腫瘍", "診断"], mode="extract",
        coverage="governed" if governed else "not_governed",
        answer=text if governed else "申し訳ありません。",
        passages=passages,
        retrieval={"threshold": 0.2, "candidates": len(passages), "top_score": 0.61 if governed else 0.0,
                   "reference_chars": len(text) if governed else 0,
                   "candidate_pages": [{"url": p.url, "title": p.title, "score": p.score} for p in passages]},
        audit_id=7,
    )


def test_question_workbook_round_trip(tmp_path: Path):
    qs = [
        Question("Q1", "胸腺腫瘍にはどのような診断方法がありますか？", "in_scope", "CT 検査", "guide/q1.html", ["CT 検査", "CT"]),
        Question("Q2", "=1+1 は何ですか", "out_of_scope"),  # a leading '=' must stay text, not a formula
    ]
    path = tmp_path / "q.xlsx"
    write_questions(qs, path)
    assert read_questions(path) == qs
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_header_variants_and_kind_spellings(tmp_path: Path):
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append([])  # a blank row above the header
    ws.append(["ID", "Question", "KIND", "Reference Answer", "Gold-URL", "note"])
    ws.append([1, "質問その一", "In Scope", "答え", "guide/a.html", "x"])
    ws.append([None, None, None])
    ws.append([2.0, "質問その二", "out-of-scope", None, None, None])
    ws.append([None] * 6)  # trailing blank rows are ignored silently
    path = tmp_path / "variants.xlsx"
    wb.save(path)
    warnings: list[str] = []
    qs = read_questions(path, warn=warnings.append)
    assert [(q.id, q.kind, q.reference_answer, q.gold_url) for q in qs] == [
        ("1", "in_scope", "答え", "guide/a.html"),
        ("2", "out_of_scope", None, None),
    ]
    assert len(warnings) == 1 and "row" in warnings[0] and "4" in warnings[0]


@pytest.mark.parametrize(
    "rows, fragment",
    [
        ([["id", "question"], ["1", "質問"]], "missing column(s) kind"),
        ([["id", "question", "kind"], ["1", "", "in_scope"]], "row 2 has an empty question"),
        ([["id", "question", "kind"], ["1", "質問", "maybe"]], "kind must be in_scope or out_of_scope"),
        ([["id", "question", "kind"], ["1", "a", "in_scope"], ["1", "b", "in_scope"]], "already used in row 2"),
        ([["id", "question", "kind"]], "no question rows"),
        ([], "is empty"),
    ],
)
def test_bad_question_workbooks(tmp_path: Path, rows, fragment):
    wb = openpyxl.Workbook()
    for r in rows:
        wb.active.append(r)
    path = tmp_path / "bad.xlsx"
    wb.save(path)
    with pytest.raises(WorkbookError) as exc:
        read_questions(path)
    assert fragment in str(exc.value)


def test_not_an_xlsx(tmp_path: Path):
    path = tmp_path / "notes.xlsx"
    path.write_text("id,question,kind\n1,質問,in_scope\n", encoding="utf-8")
    with pytest.raises(WorkbookError, match="not a readable .xlsx"):
        read_questions(path)
    with pytest.raises(WorkbookError, match="not found"):
        read_questions(tmp_path / "missing.xlsx")


def test_results_round_trip_with_reviewer_dropdowns(tmp_path: Path):
    q1 = Question("Q1", "胸腺腫瘍の診断方法は？", "in_scope", "CT 検査", "http://127.0.0.1:9/guide/q1.html", ["CT 検査"])
    q2 = Question("Q2", "小児の神経膠腫の治療法は？", "out_of_scope")
    q3 = Question("Q3", "胸腺腫瘍の手術は？", "in_scope", "手術", None, ["手術"])
    q4 = Question("Q4", "胸腺腫瘍の検査は？", "in_scope", "CT 検査を行います")  # a reference answer but no gold strings
    text = "胸腺腫瘍の診断には CT 検査を行います。\nMRI 検査を行うこともあります。"
    rows = [
        score(q1, _answer(q1.question, text), None, 12.5, _lines),
        score(q2, _answer(q2.question, "", governed=False), None, 3.25, _lines),
        failed_row(q3, RuntimeError("model down"), 1.0),
        score(q4, _answer(q4.question, text), None, 5.0, _lines),
    ]
    r1 = rows[0]
    assert r1["verbatim"] is True and r1["gold_hit"] is True and r1["page_first"] is True
    assert r1["answer_in_reference"] is True and r1["answer_chars"] == len(text)
    assert rows[1]["refused"] is True and rows[1]["no_candidate"] is True and rows[1]["verbatim"] is None
    assert "gold_hit" not in rows[3] and rows[3]["rouge_l_f1"] > 0  # a reference answer is not a gold string

    summary = metrics.summarize(rows)
    path = tmp_path / "results.xlsx"
    write_results(path, rows, summary, [("mode", "extract"), ("status", "complete")], [("tokens", metrics.TOKENS_DESCRIPTION)])
    back, back_summary, meta = read_results(path)

    assert [r["id"] for r in back] == ["Q1", "Q2", "Q3", "Q4"]
    assert back[0]["json"] == _answer(q1.question, text).to_json()
    assert back[0]["answer"] == text and back[0]["candidates"].endswith("http://127.0.0.1:9/guide/q1.html")
    assert back[0]["verbatim"] is True and back[1]["refused"] is True and back[2]["failed"] is True
    assert back[0]["rouge_l_f1"] == pytest.approx(round(metrics.rouge_l(text, "CT 検査").f1, 4))
    for r in back:
        assert r["hallucination"] is None and r["relevance"] is None and r["completeness"] is None
    assert metrics.summarize(back)["gold_in_answer"]["value"] == pytest.approx(0.5)
    assert back_summary["refusal_rate_out_of_scope"]["value"] == pytest.approx(1.0)
    assert back_summary["gold_in_answer"]["n"] == 2
    assert meta["mode"] == "extract" and meta["status"] == "complete"

    wb = openpyxl.load_workbook(path)
    ws = wb["Results"]
    header = [c.value for c in ws[1]]
    lists = {}
    for dv in ws.data_validations.dataValidation:
        (rng,) = dv.sqref.ranges
        lists[header[rng.min_col - 1]] = (dv.formula1, rng.min_row, rng.max_row)
    assert lists["hallucination"][0] == '"absent,present"'
    assert lists["relevance"][0] == '"very relevant,relevant,irrelevant"'
    assert lists["completeness"][0] == '"major omission,minor omission,just right,minor addition,major addition"'
    assert set(lists) == set(REVIEW_CHOICES)
    assert all((lo, hi) == (2, 5) for _, lo, hi in lists.values())  # every data row has the drop-down
    assert "Summary" in wb.sheetnames


def test_huge_answer_json_stays_valid(tmp_path: Path):
    q = Question("Q1", "長い答え", "in_scope", "x")
    long_text = "胸腺腫瘍の診断には CT 検査を行います。" * 2000
    ans = _answer(q.question, long_text)
    row = score(q, ans, None, 1.0, _lines)
    path = tmp_path / "r.xlsx"
    write_results(path, [row], metrics.summarize([row]), [])
    back, _, _ = read_results(path)
    assert isinstance(back[0]["json"], dict) and "truncated" in back[0]["json"]
    assert json.dumps(back[0]["json"])  # still an object
