"""Processes that end early: killed (SIGKILL, SIGTERM), interrupted (Ctrl-C), or whose
reader went away (a closed pipe). What they leave is recognisable, and cleaned up by the
next run; nothing they report is untrue; a closed pipe does not change what is done.

Real processes (`python -m guiderag`) and real signals; each wait is bounded.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import openpyxl
import pytest

from guiderag.cli import main
from guiderag.eval.workbook import read_results
from guiderag.retrieval.persist import build_lock_path
from guiderag.store.pages import Store
from sitekit import Site, html_page, toc_html
from storekit import copy_store, corpus_of, index_of, runs_of

WAIT_S = 60  # the most any process here is waited for


def _guiderag(*args: str, **kwargs) -> subprocess.Popen:
    """`python -m guiderag ARGS` with SIGINT at its default (a background shell ignores it)."""
    return subprocess.Popen([sys.executable, "-m", "guiderag", *args], env=dict(os.environ),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kwargs)


def _until(condition, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _slow_site() -> Site:
    """Two pages; q2 trickles (a byte every 0.1 s) so that a scrape is caught mid-run."""
    site = Site()
    site.page("/guide/index.html", toc_html([("q1.html", "Q1"), ("q2.html", "Q2")]))
    site.page("/guide/q1.html", html_page("Q1 治療", "<main><p>治療は手術が中心です。</p></main>"))
    site.page("/guide/q2.html", html_page("Q2 検査", "<main><p>" + "検査にはCTを使います。" * 50 + "</p></main>"))
    return site


@pytest.mark.parametrize("sig,code", [(signal.SIGKILL, -signal.SIGKILL), (signal.SIGTERM, 128 + signal.SIGTERM)])
def test_a_run_whose_process_died_is_marked_aborted(fast_env: Path, capsys, sig: int, code: int) -> None:
    site = _slow_site()
    with site.serve() as base:
        toc = base + "/guide/index.html"
        assert main(["scrape", toc, "--no-index"]) == 0
        before = corpus_of(fast_env)
        site.page("/guide/q1.html", html_page("Q1 治療", "<main><p>治療は手術と放射線です。</p></main>"))
        site.routes["/guide/q2.html"].trickle_s = 0.1
        hits = site.hits["/guide/q2.html"]
        proc = _guiderag("scrape", toc, "--no-index", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _until(lambda: site.hits["/guide/q2.html"] > hits, "the scrape to reach the trickling page")
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=WAIT_S)
        assert proc.returncode == code
        assert corpus_of(fast_env) == before  # the half-done run changed nothing
        last = runs_of(fast_env)[-1]
        if sig == signal.SIGTERM:  # handled: the run says so at once, in one line
            assert last[1] == "aborted" and "SIGTERM" in last[2]
            assert err.strip() == "guiderag: interrupted (SIGTERM)"
        else:  # kill -9: nothing can run; the row stays `running` until the next scrape
            assert last[1] == "running"
        dead_run = last[0]
        site.routes["/guide/q2.html"].trickle_s = 0
        capsys.readouterr()
        assert main(["scrape", toc, "--no-index"]) == 0
    err = capsys.readouterr().err
    runs = {run_id: (status, message) for run_id, status, message in runs_of(fast_env)}
    assert runs[dead_run][0] == "aborted"
    assert "running" not in {status for status, _ in runs.values()}
    if sig == signal.SIGKILL:
        assert "process ended before it finished" in runs[dead_run][1]
        assert f"marked 1 unfinished earlier run(s) aborted (run {dead_run})" in err
    assert corpus_of(fast_env) != before  # and the new run went through


def test_a_live_scrape_keeps_its_run(fast_env: Path, capsys) -> None:
    """The lock says who is alive: a second scrape refused while one runs touches no run."""
    site = _slow_site()
    with site.serve() as base:
        toc = base + "/guide/index.html"
        assert main(["scrape", toc, "--no-index"]) == 0
        site.page("/guide/q2.html", html_page("Q2", "<main><p>" + "新しい検査の説明です。" * 50 + "</p></main>"))
        site.routes["/guide/q2.html"].trickle_s = 0.05
        hits = site.hits["/guide/q2.html"]
        proc = _guiderag("scrape", toc, "--no-index", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _until(lambda: site.hits["/guide/q2.html"] > hits, "the scrape to reach the trickling page")
            capsys.readouterr()
            assert main(["scrape", toc, "--no-index"]) == 1
            assert "another scrape is writing" in capsys.readouterr().err
            assert runs_of(fast_env)[-1][1] == "running"  # the live one, untouched
        finally:
            proc.kill()
            proc.wait(timeout=WAIT_S)


BUILDER = """
import sys, time
from pathlib import Path
from guiderag.retrieval.persist import build_lock_path
from guiderag.store.lock import file_lock
tmp = Path(sys.argv[1])
with file_lock(build_lock_path(tmp), wait=False):
    tmp.mkdir()
    (tmp / "terms.npz").write_bytes(b"0" * 4096)
    print("building", flush=True)
    time.sleep(120)
"""


def _builder(tmp: Path) -> subprocess.Popen:
    """A process in the middle of writing an index version, as persist.save_data does."""
    proc = subprocess.Popen([sys.executable, "-c", BUILDER, str(tmp)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "building"
    return proc


def test_temporary_index_folders_of_dead_builds_go_and_live_ones_stay(scraped_sample: Path, fast_env: Path,
                                                                      capsys) -> None:
    copy_store(scraped_sample, fast_env)
    index_dir = fast_env.with_name(fast_env.name + ".index")
    live, dead, legacy = (index_dir / f"tmp-v-{name}" for name in ("live", "dead", "legacy"))
    live_builder = _builder(live)
    dead_builder = _builder(dead)
    dead_builder.kill()  # kill -9 half-way: its lock goes with it
    dead_builder.wait(timeout=WAIT_S)
    legacy.mkdir()  # left by a guiderag that held no lock
    try:
        assert main(["index"]) == 0
        assert live.is_dir() and build_lock_path(live).exists()  # another live process's build
        assert not dead.exists() and not build_lock_path(dead).exists()
        assert not legacy.exists()
    finally:
        live_builder.kill()
        live_builder.wait(timeout=WAIT_S)
    # The next scrape cleans up too, even when it changes nothing (so builds nothing).
    capsys.readouterr()
    assert main(["scrape", "--sample"]) == 0
    captured = capsys.readouterr()
    assert "no page changed" in captured.out
    assert "removed 1 temporary index folder(s) of builds that did not finish: tmp-v-live" in captured.err
    assert not live.exists() and not build_lock_path(live).exists()
    assert index_of(fast_env)  # the live index is still there


# --- eval: Ctrl-C -------------------------------------------------------------------------
def _questions(path: Path, n: int) -> Path:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["id", "question", "kind"])
    for i in range(n):
        ws.append([f"Q{i + 1}", ["胸腺腫瘍の治療法は？", "胸腺腫瘍の手術は？", "病理診断とは？"][i % 3], "in_scope"])
    wb.save(path)
    return path


@pytest.fixture
def earlier_results(scraped_sample: Path, fast_env: Path, tmp_path: Path, capsys) -> tuple[Path, Path, bytes]:
    """A sample store, a question set, and a complete results workbook of an earlier run."""
    copy_store(scraped_sample, fast_env)
    questions = _questions(tmp_path / "questions.xlsx", 3)
    out = tmp_path / "results.xlsx"
    assert main(["eval", str(questions), "--out", str(out)]) == 0
    assert str(read_results(out)[2]["status"]) == "complete"
    capsys.readouterr()
    return questions, out, out.read_bytes()


def test_ctrl_c_before_the_first_question_leaves_the_earlier_workbook_alone(
        earlier_results, capsys, monkeypatch, sigint_raises) -> None:
    from guiderag import retrieval
    from guiderag.chatbot import library_cache

    questions, out, before = earlier_results
    real = retrieval.load_retriever
    library_cache.clear()  # the earlier run's library stays loaded in this process: load anew

    def interrupted_while_loading(config, store, guideline=None, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the index loads
        return real(config, store, guideline, **kwargs)

    monkeypatch.setattr(retrieval, "load_retriever", interrupted_while_loading)
    assert main(["eval", str(questions), "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "interrupted before any question was answered: no results were written" in err
    assert f"{out} is an earlier run's and was left untouched" in err
    assert "done so far are in" not in err
    assert out.read_bytes() == before  # still the earlier, complete run's file


def test_ctrl_c_after_one_question_writes_it_marked_partial(earlier_results, capsys, monkeypatch,
                                                            sigint_raises) -> None:
    from guiderag.chatbot import Chatbot

    questions, out, before = earlier_results
    real = Chatbot.ask
    calls = []

    def interrupted_on_the_second(self, question, mode=None):
        calls.append(question)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return real(self, question, mode)

    monkeypatch.setattr(Chatbot, "ask", interrupted_on_the_second)
    assert main(["eval", str(questions), "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert f"the 1 of 3 questions done so far are in {out} (marked partial)" in err
    rows, _, meta = read_results(out)
    assert [r["id"] for r in rows] == ["Q1"] and str(meta["status"]).startswith("partial: 1 of 3")


def test_a_real_ctrl_c_never_points_at_a_workbook_that_is_not_this_runs(earlier_results, fast_env: Path) -> None:
    """SIGINT to a real `guiderag eval` as soon as it starts loading the index: whatever
    it had done, what it says is true of the file on disk."""
    questions, out, before = earlier_results
    shutil.rmtree(fast_env.with_name(fast_env.name + ".index"))  # so the eval starts by building it
    proc = _guiderag("eval", str(questions), "--out", str(out), stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    first = proc.stderr.readline()  # "... rebuilding it now": run_questions is under way
    assert "rebuilding it now" in first
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=WAIT_S)[1]
    assert proc.returncode in (0, 130), rest
    if proc.returncode == 0:  # it finished before the signal came: a complete run of its own
        assert str(read_results(out)[2]["status"]) == "complete"
    elif "no results were written" in rest:
        assert out.read_bytes() == before
    else:
        assert "(marked partial)" in rest, rest
        assert str(read_results(out)[2]["status"]).startswith("partial")


# --- a closed pipe -----------------------------------------------------------------------
def test_a_closed_pipe_does_not_skip_the_index(fast_env: Path) -> None:
    """`guiderag scrape --sample 2>&1 | head -1`: the reader leaves after one line."""
    proc = _guiderag("scrape", "--sample", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    assert proc.stdout.readline()
    proc.stdout.close()  # head -1 exits
    assert proc.wait(timeout=WAIT_S) == 0
    index = index_of(fast_env)
    with Store(fast_env, create=False) as store:
        assert index and index["corpus_version"] == store.corpus_version()  # the index was built


def test_a_closed_stdout_is_not_an_error_and_leaves_no_noise(scraped_sample: Path, fast_env: Path) -> None:
    copy_store(scraped_sample, fast_env)
    proc = _guiderag("pages", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before it writes a line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=WAIT_S) == 0
    assert "BrokenPipeError" not in err and "Exception ignored" not in err
