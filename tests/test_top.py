"""retrieval.top against the plain reference: the first k of a stable sort, largest first."""
from __future__ import annotations

import numpy as np
import pytest

from guiderag.retrieval.top import best_first


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
