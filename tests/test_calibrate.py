"""`guiderag calibrate` (issue 20) on a real store, SQLite and PostgreSQL, each command a real process.

- calibrating on a labelled workbook moves the operating point, stores it, and the next
  `ask` in another process uses it; `guidelines` shows it, stale once the corpus changes;
- the curve is printed, and written as a workbook with a PNG beside it;
- a one-sided or a 5-question workbook is refused with exit 2 and nothing stored;
- `--reset` restores the shipped decision.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import openpyxl
import pytest

from guiderag.chatbot.coverage_model import QA, shipped
from guiderag.processes import clean_env
from guiderag.resources import question_set
from guiderag.store import Store, calibration
from storekit import copy_store

THYMIC = "胸腺腫瘍にはどのような治療法がありますか？"


def cli(args: list[str], tmp_path: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = clean_env(GUIDERAG_DELAY_S="0", XDG_DATA_HOME=str(tmp_path / "xdg"))
    return subprocess.run([sys.executable, "-m", "guiderag", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def workbook(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["question", "kind", "category", "note"])  # no id column: calibrate does not need one
    for row in rows:
        ws.append([*row, "ignored"])
    wb.save(path)
    return path


def sample_rows() -> list[tuple[str, str, str]]:
    """The bundled sample_patient set (50 in scope, 30 out of scope), with categories."""
    wb = openpyxl.load_workbook(question_set("sample_patient.xlsx"), read_only=True)
    rows = list(wb.active.iter_rows(values_only=True))
    head = [str(h) for h in rows[0]]
    q, k = head.index("question"), head.index("kind")
    return [(r[q], r[k], "patient" if r[k] == "in_scope" else "outside") for r in rows[1:] if r[q]]


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path, scraped_sample: Path) -> str:
    """The scraped sample, in an SQLite file or in a PostgreSQL database."""
    if request.param == "sqlite":
        return str(copy_store(scraped_sample, tmp_path / "s.db"))
    url = request.getfixturevalue("pg_database")
    done = cli(["scrape", "--sample", "--db", url, "--no-progress"], tmp_path)
    assert done.returncode == 0, done.stderr
    return url


def _ask(store: str, tmp_path: Path) -> dict:
    done = cli(["ask", THYMIC, "--json", "--db", store], tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow  # CLI processes on both backends
def test_calibrate_moves_the_point_and_the_next_ask_in_another_process_uses_it(store: str, tmp_path: Path) -> None:
    before = _ask(store, tmp_path)
    assert before["retrieval"]["coverage_model"]["source"] == "shipped"
    shipped_point = shipped().for_form(QA).operating_point
    book = workbook(tmp_path / "q.xlsx", sample_rows())
    out = tmp_path / "curve.xlsx"
    done = cli(["calibrate", str(book), "--db", store, "--target-refusal", "0.99", "--out", str(out), "--json"],
               tmp_path)
    assert done.returncode == 0, done.stderr
    fit = json.loads(done.stdout)
    assert fit["counts"] == {"questions": 80, "in_scope": 50, "out_of_scope": 30}
    assert fit["operating_point"] != pytest.approx(shipped_point)  # the point moved
    assert fit["at_operating_point"]["out of scope"]["refused"] >= 0.99
    assert {"patient", "outside", "in scope", "out of scope"} <= set(fit["curve"][0])
    # stored in the store, per guideline, with the corpus version it was fitted on
    with Store(store, create=False) as s:
        cal = calibration.load(s, "default")
        assert cal is not None and cal.corpus_version == s.corpus_version("default")
        assert cal.model["operating_point"] == pytest.approx(fit["operating_point"], abs=1e-4)
    # the curve: a workbook and a PNG beside it
    assert out.is_file() and out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert openpyxl.load_workbook(out).sheetnames == ["curve", "questions", "about"]
    # the next ask, in another process, decides with the calibration
    after = _ask(store, tmp_path)
    block = after["retrieval"]["coverage_model"]
    assert block["source"] == "calibrated"
    assert block["operating_point"] == pytest.approx(fit["operating_point"], abs=1e-4)
    assert (after["coverage"] == "governed") == (after["coverage_probability"] >= block["operating_point"])
    listed = cli(["guidelines", "--json", "--db", store], tmp_path)
    [row] = json.loads(listed.stdout)["guidelines"]
    assert row["calibration"]["stale"] is False and row["calibration"]["fitted_at"] == fit["fitted_at"]
    # --reset: the shipped decision again
    reset = cli(["calibrate", "--reset", "--db", store], tmp_path)
    assert reset.returncode == 0, reset.stderr
    assert _ask(store, tmp_path)["retrieval"]["coverage_model"]["source"] == "shipped"
    with Store(store, create=False) as s:
        assert calibration.load(s, "default") is None


@pytest.mark.parametrize("rows", [
    [(f"胸腺腫瘍の治療 {i}", "in_scope", "") for i in range(20)],                       # one-sided
    [("胸腺腫瘍とは", "in_scope", ""), ("白血病とは", "out_of_scope", ""), ("手術の方法は", "in_scope", ""),
     ("天気は", "out_of_scope", ""), ("放射線治療とは", "in_scope", "")],                     # five questions
], ids=["one-sided", "five"])
def test_a_set_too_small_or_one_sided_is_refused_and_nothing_is_stored(scraped_sample: Path, tmp_path: Path,
                                                                       rows: list) -> None:
    db = copy_store(scraped_sample, tmp_path / "s.db")
    done = cli(["calibrate", str(workbook(tmp_path / "q.xlsx", rows)), "--db", str(db)], tmp_path)
    assert done.returncode == 2
    assert "at least" in done.stderr and "nothing was fitted or stored" in done.stderr
    assert "Traceback" not in done.stderr
    with Store(db, create=False) as s:
        assert calibration.load(s, "default") is None


def test_a_calibration_on_a_corpus_that_changed_is_flagged(scraped_sample: Path, tmp_path: Path) -> None:
    db = copy_store(scraped_sample, tmp_path / "s.db")
    with Store(db) as s:
        model = shipped().for_form(QA).with_operating_point(0.6, 0.95, form=QA)
        calibration.save(s, "default", "corpus:an-earlier-one", model.to_json(), {"counts": {}})
    listed = cli(["guidelines", "--db", str(db)], tmp_path)
    assert listed.returncode == 0 and "calibration STALE" in listed.stdout
    [row] = json.loads(cli(["guidelines", "--json", "--db", str(db)], tmp_path).stdout)["guidelines"]
    assert row["calibration"]["stale"] is True
    # still used: the deployment's own decision, flagged until it is fitted again
    assert _ask(str(db), tmp_path)["retrieval"]["coverage_model"]["operating_point"] == pytest.approx(0.6)
    # `guiderag check` flags it too (the part of check that reads the store)
    from guiderag.scraper.commands import _stale_calibrations

    with Store(db, readonly=True) as s:
        assert set(_stale_calibrations(s, ["default"])) == {"default"}


def _records(oos: list[float], ins: list[float]) -> tuple[list[dict], list[float]]:
    """Records of a set whose shipped P are given (every in-scope one answered right)."""
    rows = [{"site": "s", "in_scope": False, "category": "out", "features": {}, "threshold": {"gold": False, "shown": True}}
            for _ in oos]
    rows += [{"site": "s", "in_scope": True, "category": "in", "features": {}, "threshold": {"gold": True, "shown": True}}
             for _ in ins]
    return rows, [*oos, *ins]


def test_a_small_set_moves_the_cut_less_than_a_large_one_with_the_same_shares() -> None:
    """The set's refusal is read with the shipped training curve as a prior worth PRIOR_OUT
    questions: 20 out-of-scope questions all below 0.2 pull a shipped cut of 0.5 down less
    than 2,000 of the same."""
    from guiderag.eval import calibrate as cal

    prior = lambda cut: min(1.0, cut / 0.5 * 0.95)  # the training sites: 0.95 refused at the shipped 0.5
    small = _records([0.1] * 19 + [0.3], [0.9] * 20)
    large = _records([0.1] * 1900 + [0.3] * 100, [0.9] * 20)
    cut_small, _ = cal._at_target(*small, 0.95, True, prior)
    cut_large, _ = cal._at_target(*large, 0.95, True, prior)
    cut_alone, _ = cal._at_target(*small, 0.95, True, None)
    assert cut_alone < 0.11 and cut_alone < cut_large < cut_small <= 0.5


def test_a_cut_below_the_shipped_one_moves_only_as_far_as_it_pays() -> None:
    from guiderag.eval import calibrate as cal

    records, probs = _records([0.1, 0.2], [0.35, 0.8, 0.9])
    # no in-scope question between 0.25 and the shipped 0.3: the shipped cut stays
    assert cal._no_further(0.25, records, probs, True, shipped_cut=0.3) == 0.3
    # one at 0.35 below the shipped 0.5: the cut moves just far enough to answer it
    assert cal._no_further(0.25, records, probs, True, shipped_cut=0.5) == 0.35
    # the set asks for a higher cut than the shipped one: it gets it
    assert cal._no_further(0.6, records, probs, True, shipped_cut=0.5) == 0.6
