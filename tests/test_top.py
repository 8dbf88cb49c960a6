"""retrieval.top against the plain reference: the first k of a stable sort, largest first."""
from __future__ import annotations

import numpy as np
import pytest

from guiderag.retrieval.top import Ranking, best_first, best_runs


def _reference(values: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-values, kind="stable")[: max(k, 0)]


@pytest.mark.parametrize("seed", range(6))
def test_best_first_is_the_head_of_a_stable_sort(seed):
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n = int(rng.integers(0, 4000))
        k = int(rng.integers(0, 400))
        # few distinct values: ties everywhere, the k-th largest's among them
        values = (rng.integers(0, int(rng.integers(1, 60)), n) / 7).astype(np.float32)
        assert np.array_equal(best_first(values, k), _reference(values, k)), (n, k)


def test_ties_at_the_cut_keep_the_earliest():
    values = np.asarray([0.5] * 1000 + [0.9] * 3, dtype=np.float32)
    got = best_first(values, 5)
    assert got.tolist() == [1000, 1001, 1002, 0, 1]


def _runs_reference(keys: np.ndarray, values: np.ndarray, k: int) -> tuple[list[int], list[float], int]:
    """Every key's maximum, then the keys by it, largest first, equal ones by key."""
    best: dict[int, float] = {}
    for key, value in zip(keys.tolist(), values.tolist()):
        best[key] = max(best.get(key, value), value)
    ranked = sorted(best, key=lambda key: (-best[key], key))[: max(k, 0)]
    return ranked, [best[key] for key in ranked], len(best)


@pytest.mark.parametrize("seed", range(6))
def test_best_runs_are_the_keys_of_the_largest_maxima(seed):
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n = int(rng.integers(0, 3000))
        k = int(rng.integers(0, 120))
        # runs of 1..(up to 40) values per key, keys ascending with gaps; few distinct
        # values, so equal maxima (and equal values within a run) are everywhere
        keys = np.sort(rng.integers(0, max(1, n // int(rng.integers(1, 40))), n)).astype(np.int32)
        values = (rng.integers(0, int(rng.integers(1, 50)), n) / 7).astype(np.float32)
        ranking = Ranking(values)
        if rng.random() < 0.5:  # a head asked for before (the reference's) is cut, not redone
            ranking.head(int(rng.integers(0, 600)))
        got_keys, got_best, got_total = best_runs(keys, ranking, k)
        want_keys, want_best, want_total = _runs_reference(keys, values, k)
        assert (got_keys.tolist(), got_best.tolist(), got_total) == (want_keys, want_best, want_total), (n, k)


@pytest.mark.parametrize("seed", range(3))
def test_a_ranking_s_heads_are_those_of_best_first_in_any_order_asked(seed):
    rng = np.random.default_rng(seed)
    for _ in range(100):
        values = (rng.integers(0, int(rng.integers(1, 30)), int(rng.integers(0, 2000))) / 3).astype(np.float32)
        ranking = Ranking(values)
        for m in rng.integers(-2, 2500, 5).tolist():
            assert np.array_equal(ranking.head(m), _reference(values, m)), (len(values), m)
