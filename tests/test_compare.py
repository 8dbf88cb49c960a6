"""Paired bootstrap comparison of two results workbooks."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from guiderag.eval import metrics
from guiderag.eval.compare import compare_rows, paired_bootstrap
from guiderag.eval.workbook import write_results
from guiderag.cli import main


def _rows(hits: list[int], ids: list[str] | None = None) -> list[dict]:
    ids = ids or [f"q{i}" for i in range(len(hits))]
    return [{"id": i, "kind": "in_scope", "reference_answer": "x", "gold_answers": ["x"], "gold_hit": bool(h),
             "governed": True, "latency_ms": 10.0 * (k + 1)} for k, (i, h) in enumerate(zip(ids, hits))]


def test_bootstrap_tiny_case_hand_checked():
    # A - B per question is [1, 1, 1, 0]: the resampled mean difference takes values in
    # {0, .25, .5, .75, 1}; P(<= 0) = .25**4 = .004 < .025 < P(<= .25) = .051, and
    # P(1) = .75**4 = .32 > .025: the 95% interval is [.25, 1].
    a = np.array([1.0, 1.0, 1.0, 0.0])
    b = np.zeros(4)
    diff, low, high = paired_bootstrap(a, b, "mean", 2000, np.random.default_rng(1))
    assert diff == pytest.approx(0.75)
    assert (low, high) == pytest.approx((0.25, 1.0))


def test_identical_and_opposite_runs():
    same, paired, only_a, only_b = compare_rows(_rows([1, 0, 1]), _rows([1, 0, 1]), resamples=500, seed=3)
    d = {x.metric: x for x in same}
    assert (paired, only_a, only_b) == (3, 0, 0)
    assert (d["gold_in_answer"].diff, d["gold_in_answer"].low, d["gold_in_answer"].high) == (0.0, 0.0, 0.0)
    opposite, *_ = compare_rows(_rows([1, 1, 1]), _rows([0, 0, 0]), resamples=500, seed=3)
    g = {x.metric: x for x in opposite}["gold_in_answer"]
    assert (g.a, g.b, g.diff, g.low, g.high) == (1.0, 0.0, 1.0, 1.0, 1.0)


def test_pairs_by_id_not_by_row_order():
    a = _rows([1, 0, 0], ids=["x", "y", "z"])
    b = list(reversed(_rows([0, 0, 1, 1], ids=["z", "y", "x", "extra"])))  # x: 1, y: 0, z: 0 in reverse
    diffs, paired, only_a, only_b = compare_rows(a, b, resamples=300, seed=5)
    g = {x.metric: x for x in diffs}["gold_in_answer"]
    assert (paired, only_a, only_b) == (3, 0, 1)
    assert g.diff == 0.0 and (g.low, g.high) == (0.0, 0.0)


def test_compare_cli_table_and_json(tmp_path: Path, capsys):
    a, b = tmp_path / "a.xlsx", tmp_path / "b.xlsx"
    ra, rb = _rows([1, 1, 1, 0, 1, 1]), _rows([0, 1, 0, 0, 0, 1])
    write_results(a, ra, metrics.summarize(ra), [])
    write_results(b, rb, metrics.summarize(rb), [])
    assert main(["eval", "--compare", str(a), str(b), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    g = {m["metric"]: m for m in data["metrics"]}["gold_in_answer"]
    assert data["paired"] == 6 and data["resamples"] == 2000
    assert g["diff"] == pytest.approx(0.5) and g["low"] <= 0.5 <= g["high"]
    assert main(["eval", "--compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "gold_in_answer" in out and "95% interval" in out
    # the same inputs give the same intervals (fixed seed)
    assert main(["eval", "--compare", str(a), str(b), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == data


def test_compare_rejects_non_results_workbooks(tmp_path: Path, capsys):
    import openpyxl

    wb = openpyxl.Workbook()
    wb.active.append(["id", "question", "kind"])
    q = tmp_path / "questions.xlsx"
    wb.save(q)
    assert main(["eval", "--compare", str(q), str(q)]) == 2
    assert "Results" in capsys.readouterr().err
    r = tmp_path / "r.xlsx"
    write_results(r, _rows([1], ids=["only"]), {}, [])
    r2 = tmp_path / "r2.xlsx"
    write_results(r2, _rows([1], ids=["other"]), {}, [])
    assert main(["eval", "--compare", str(r), str(r2)]) == 2
    assert "no question id in common" in capsys.readouterr().err
