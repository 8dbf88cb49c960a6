"""`guiderag loadbench` end to end on the sample (SQLite): real `serve` replicas, real clients.

The figures are printed by the command, not asserted; what is asserted is what the bench
promises: every request answered or counted as an error, one audit row per answer."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from guiderag.processes import clean_env

pytestmark = pytest.mark.slow


def test_loadbench_counts_requests_errors_and_audit_rows(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "guiderag", "loadbench", "--clients", "2", "--requests", "12", "--replicas", "1,2",
         "--workers", "1,2", "--seconds", "120", "--json", "--no-progress", "--workdir", str(tmp_path)],
        env=clean_env(XDG_DATA_HOME=str(tmp_path / "xdg")), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    rows = {(row["replicas"], row["workers"]): row for row in report["rows"] if row["store"] == "sqlite"}
    assert set(rows) == {(1, 1), (1, 2), (2, 1), (2, 2)}
    for row in rows.values():
        assert row["errors"] == 0, row["error_samples"]
        assert row["requests"] == 12 and row["audit_rows"] == 12
        assert 0 < row["p50_ms"] <= row["p95_ms"] and row["rps"] > 0
    assert report["cli_seconds_per_question"] > 0
    assert all(row["server_cpu_ms"] > 0 for row in rows.values())
    # in-process: only the question is analysed per ask (its parse and its keywords'), never
    # the reference lines (stored with the index): a handful of MeCab parses, not dozens
    own = report["in_process"]
    assert own["questions"] == 80 and own["cpu_ms_per_ask"] > 0
    assert 1 <= own["tokenize_per_ask"] <= 6, own
    assert {s["replica"] for s in report["startup"]} == {"builds its own index at start-up", "shared, prebuilt index"}


def test_loadbench_refuses_bad_counts_and_starts_nothing(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "guiderag", "loadbench", "--clients", "0", "--workdir", str(tmp_path)],
                          env=clean_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--clients" in done.stderr and "Traceback" not in done.stderr
    assert not list(tmp_path.glob("serve-*.log"))
