"""`guiderag eval` on the command line: bad input exits 2 and writes nothing; Ctrl-C keeps a partial workbook."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import openpyxl
import pytest

from guiderag.eval.workbook import read_results
from guiderag.cli import main
from storekit import copy_store


def _xlsx(path: Path, rows: list[list]) -> Path:
    wb = openpyxl.Workbook()
    for r in rows:
        wb.active.append(r)
    wb.save(path)
    return path


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: _xlsx(p, [["id", "question"], ["1", "胸腺腫瘍とは？"]]), "missing column(s) kind"),
        (lambda p: _xlsx(p, [["id", "question", "kind"], ["1", "胸腺腫瘍とは？", "in_scope"], ["2", None, "in_scope"]]),
         "row 3 has an empty question"),
        (lambda p: _xlsx(p, [["id", "question", "kind"], [None, None, None]]), "no question rows"),
        (lambda p: p.write_bytes(b"PK\x03\x04 this is not really a zip") and p, "not a readable .xlsx"),
        (lambda p: p.write_text("id\tquestion\tkind\n", encoding="utf-8") and p, "not a readable .xlsx"),
    ],
    ids=["missing-column", "empty-cell", "empty-rows", "broken-zip", "text-file"],
)
def test_bad_workbooks_exit_2_and_write_nothing(tmp_path: Path, capsys, make, message):
    questions = tmp_path / "questions.xlsx"
    make(questions)
    out = tmp_path / "results.xlsx"
    assert main(["eval", str(questions), "--out", str(out), "--db", str(tmp_path / "none.db")]) == 2
    err = capsys.readouterr().err
    assert message in err and str(questions) in err
    assert not out.exists()
    assert not (tmp_path / "none.db").exists()


def test_usage_errors_exit_2(tmp_path: Path, capsys):
    q = _xlsx(tmp_path / "q.xlsx", [["id", "question", "kind"], ["1", "質問", "in_scope"]])
    assert main(["eval", str(q)]) == 2
    assert "--out" in capsys.readouterr().err
    assert main(["eval", str(q), "--out", str(tmp_path / "r.csv")]) == 2
    assert ".xlsx" in capsys.readouterr().err
    assert main(["eval", str(q), "--out", str(q)]) == 2
    assert "question workbook itself" in capsys.readouterr().err
    assert main(["eval", str(tmp_path / "missing.xlsx"), "--out", str(tmp_path / "r.xlsx")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["eval"]) == 2


@pytest.fixture(scope="module")
def sample_db(scraped_sample, tmp_path_factory) -> Path:
    """A copy of the session's scraped sample (conftest.scraped_sample): eval writes audit rows."""
    return copy_store(scraped_sample, tmp_path_factory.mktemp("sample") / "sample.db")


def test_ctrl_c_leaves_a_valid_partial_workbook(sample_db: Path, tmp_path: Path, capsys, sigint_raises,
                                                no_settings_env):
    """A real SIGINT during the third question: the first two are in a valid workbook."""
    from guiderag import retrieval

    from guiderag.eval.runner import run_questions
    from guiderag.eval.workbook import Question
    from guiderag.settings import Settings

    settings = Settings.load(db=sample_db, progress=False)
    inner = retrieval.load_retriever(settings.retrieval, settings.storage)

    class InterruptOnThird:
        calls = 0

        def search(self, *args, **kwargs):
            InterruptOnThird.calls += 1
            if InterruptOnThird.calls == 3:
                os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends
            return inner.search(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(inner, name)

    questions = [Question(f"Q{i}", q, "in_scope") for i, q in enumerate(
        ["胸腺腫瘍の治療法は？", "胸腺腫瘍の手術は？", "胸腺腫瘍の診断は？", "病理診断とは？"], 1)]
    out = tmp_path / "partial.xlsx"
    with pytest.raises(KeyboardInterrupt):
        run_questions(settings, questions, out, retriever=InterruptOnThird())
    rows, summary, meta = read_results(out)
    assert [r["id"] for r in rows] == ["Q1", "Q2"]
    assert str(meta["status"]).startswith("partial: 2 of 4")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_model_mode_without_a_model_exits_2_and_writes_nothing(sample_db: Path, tmp_path: Path, capsys,
                                                                no_settings_env):
    q = _xlsx(tmp_path / "q.xlsx", [["id", "question", "kind"], ["1", "胸腺腫瘍の治療法は？", "in_scope"]])
    out = tmp_path / "r.xlsx"
    assert main(["eval", str(q), "--out", str(out), "--mode", "lines", "--db", str(sample_db), "--no-progress"]) == 2
    assert "needs a language model" in capsys.readouterr().err
    assert not out.exists()


def test_devbench_checks_every_suites_folder_before_running_any(tmp_path: Path, capsys, no_settings_env) -> None:
    missing = tmp_path / "nowhere"
    # asked for by name: the error at once, nothing run (the patient suite would run first)
    assert main(["devbench", "--suite", "pdf", "--pdf-dir", str(missing), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"no PDF benchmark at {missing}" in err and "devbench patient" not in err
