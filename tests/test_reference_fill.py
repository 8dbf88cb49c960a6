"""The reference the search fills (OursRetriever._reference) against the plain greedy fill:
passages best first, each one's heading and lines in order, a line taken when it is not
blank, not taken before and fits the budget with the newline joining it; a passage adding
nothing is a miss, and 20 misses in a row end the fill. The search skips a passage without
reading its lines when the budget left is below its page's shortest line: the same result."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from guiderag.retrieval.bench import generate_corpus
from guiderag.retrieval.build import build_data
from guiderag.retrieval.index import make_analyzer
from guiderag.retrieval.pipeline_ours import OursRetriever
from guiderag.settings import Settings


def plain_fill(retriever: OursRetriever, rows: np.ndarray, scores: np.ndarray, budget: int) -> list:
    d = retriever.data
    used_chars, misses = 0, 0
    taken: set[tuple[int, int]] = set()
    out = []
    for row, score in zip(rows.tolist(), scores.tolist()):
        if budget - used_chars < 2 or misses >= 20:
            break
        page = int(d.passage_page[row])
        heading = int(d.passage_heading[row])
        lines = list(range(int(d.passage_first[row]), int(d.passage_last[row]) + 1))
        picked = []
        for n in ([heading] if heading else []) + lines:
            text = retriever.pages[page].lines[n - 1]
            if not text.strip() or (page, n) in taken:
                continue
            cost = len(text) + (1 if used_chars else 0)
            if used_chars + cost > budget:
                continue
            used_chars += cost
            taken.add((page, n))
            picked.append(n)
        if picked:
            misses = 0
            out.append((page, tuple(sorted(picked)), score))
        else:
            misses += 1
    return out


@pytest.fixture(scope="module")
def built():
    corpus = generate_corpus(40, 1, seed=7)
    settings = Settings.load(env={}, progress=False, index_workers=1)
    analyzer = make_analyzer(settings.retrieval)
    return corpus, settings, analyzer, build_data(corpus.pages, "v", settings.retrieval, analyzer)


def _check(built, budget: int, rounds: int) -> None:
    corpus, settings, analyzer, data = built
    config = dataclasses.replace(settings.retrieval, reference_chars=budget)
    retriever = OursRetriever(config, corpus.pages, data, analyzer, guideline="default")
    rng = np.random.default_rng(budget)
    for _ in range(rounds):
        k = int(rng.integers(1, min(200, data.n_passages) + 1))
        rows = rng.choice(data.n_passages, size=k, replace=False)
        scores = rng.random(k).astype(np.float32)
        got = [(retriever.pages.index(p.page), p.lines, p.score) for p in retriever._reference(rows, scores)]
        assert got == plain_fill(retriever, rows, scores, budget), (budget, rows.tolist())


@pytest.mark.parametrize("budget", [1000, 4096])
def test_reference_is_the_plain_greedy_fill(built, budget):
    _check(built, budget, 60)


def test_every_small_budget_fits_exactly_what_the_plain_fill_fits(built):
    # budgets around the lengths of short lines: a line that fits to the last character
    # (alone, or after others with its newline) is taken, one character more is not
    for budget in range(1, 160):
        _check(built, budget, 6)
