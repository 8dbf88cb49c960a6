"""Forked workers (the index build's, the process placing its second matrix, the
evaluation's) leave Ctrl-C to their parent and end quietly on SIGTERM, with which a pool
ends them, though the fork inherits the CLI's handler that turns SIGTERM into an interrupt
(and a traceback on stderr)."""
from __future__ import annotations

import multiprocessing
import os
import signal
import time

import numpy as np
import pytest

from guiderag import cli
from guiderag.retrieval import bm25, build, row_blocks
from guiderag.retrieval.index import make_analyzer
from guiderag.scopes import RetrievalConfig
from guiderag.settings import Settings


def _signalled_index_worker() -> None:
    build._start_worker(make_analyzer(RetrievalConfig()), 400, 40, [])
    os.kill(os.getpid(), signal.SIGINT)  # ignored: the parent handles Ctrl-C
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)  # not reached: SIGTERM ends the process


def _signalled_matrix_placer() -> None:
    """The process the build forks to place its second matrix (row_blocks.stack_both)."""
    empty = np.zeros(0, dtype=np.int32)
    row_blocks._place_in_child([], 0, bm25.K1, bm25.B, np.zeros(1, dtype=np.int64), empty, empty.astype(np.float32))
    os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)


def _signalled_eval_worker_handlers() -> None:
    from guiderag.eval import runner

    class _NoPipeline:
        def __init__(self, *args: object) -> None:
            pass

    runner._Asker = _NoPipeline  # type: ignore[assignment,misc]  # the signal set-up only
    runner._worker_init(Settings.load(), "extract")
    os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)


@pytest.mark.parametrize("target", [_signalled_index_worker, _signalled_matrix_placer, _signalled_eval_worker_handlers])
def test_a_forked_worker_ignores_ctrl_c_and_ends_quietly_on_sigterm(target, capfd):
    ctx = multiprocessing.get_context("fork")
    with cli._sigterm_as_interrupt():  # the CLI's handler, as a command's workers inherit it
        process = ctx.Process(target=target)
        process.start()
        process.join(60)
    assert process.exitcode == -signal.SIGTERM
    err = capfd.readouterr().err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
