"""The published protocol's question set on the sample guideline: 4 answered, 4 refused."""
from __future__ import annotations

import json
from pathlib import Path

from guiderag.eval.protocol_set import PROTOCOL_PATH, protocol_questions
from guiderag.eval.workbook import read_questions, read_results
from guiderag.cli import main
from storekit import copy_store


def test_shipped_workbook_is_the_generated_set():
    qs = read_questions(PROTOCOL_PATH)
    assert qs == protocol_questions()
    assert [q.kind for q in qs] == ["in_scope"] * 4 + ["out_of_scope"] * 4
    assert all("胸腺腫瘍" in q.question for q in qs[:4]) and all("小児の神経膠腫" in q.question for q in qs[4:])
    # the same four question templates for both subjects
    assert [q.question.replace("胸腺腫瘍", "X") for q in qs[:4]] == [q.question.replace("小児の神経膠腫", "X") for q in qs[4:]]


def test_protocol_set_on_the_sample_guideline(scraped_sample: Path, tmp_path: Path, capsys, no_settings_env):
    db = copy_store(scraped_sample, tmp_path / "sample.db")
    out = tmp_path / "protocol-results.xlsx"
    assert main(["eval", str(PROTOCOL_PATH), "--out", str(out), "--db", str(db), "--mode", "extract",
                 "--no-progress", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    rows, summary, meta = read_results(out)
    assert meta["status"] == "complete"
    by_kind = {k: [r for r in rows if r["kind"] == k] for k in ("in_scope", "out_of_scope")}
    answered = [r["id"] for r in by_kind["in_scope"] if r["coverage"] == "governed"]
    refused = [r["id"] for r in by_kind["out_of_scope"] if r["coverage"] == "not_governed"]
    assert answered == ["P-IN-1", "P-IN-2", "P-IN-3", "P-IN-4"], [(r["id"], r["answer"][:80]) for r in rows]
    assert refused == ["P-OUT-1", "P-OUT-2", "P-OUT-3", "P-OUT-4"], [(r["id"], r["answer"][:80]) for r in rows]
    assert all(r["verbatim"] is True for r in by_kind["in_scope"])
    assert all(r["json"]["passages"] and r["candidates"] for r in by_kind["in_scope"])
    # each answered from the page about it: diagnosis q29, pathology q30, treatment q31,
    # surgery q32 (not q29, whose title shares 方法 with the question)
    tops = [r["top_url"].rsplit("/", 1)[-1] for r in by_kind["in_scope"]]
    assert tops == ["q29.html", "q30.html", "q31.html", "q32.html"], tops
    assert summary["refusal_rate_out_of_scope"]["value"] == 1.0 and summary["coverage_in_scope"]["value"] == 1.0
    assert printed["summary"]["verbatim_rate"] == 1.0
