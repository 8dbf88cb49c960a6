"""retrieval.range_max against the plain reference: max(values[first:end]) range by range."""
from __future__ import annotations

import numpy as np
import pytest

from guiderag.retrieval.range_max import SpanRanges, range_max


def _reference(values: np.ndarray, first: np.ndarray, end: np.ndarray) -> np.ndarray:
    return np.asarray([values[a:b].max() if b > a else 0 for a, b in zip(first, end)], dtype=values.dtype)


def _ranges(rng: np.random.Generator, n_spans: int, n_ranges: int, longest: int) -> tuple[np.ndarray, np.ndarray]:
    """Ranges over n_spans spans, some empty, of up to `longest` spans, in the index's int32."""
    first = np.sort(rng.integers(0, n_spans + 1, n_ranges))
    end = np.minimum(first + rng.integers(0, longest + 1, n_ranges), n_spans)
    return first.astype(np.int32), end.astype(np.int32)


@pytest.mark.parametrize("seed", range(6))
def test_span_ranges_read_every_range_maximum(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n_spans = int(rng.integers(0, 3000))
        longest = int(rng.integers(1, 70))
        first, end = _ranges(rng, n_spans, int(rng.integers(1, 500)), longest)
        # few distinct values: ties everywhere; zeros as a span without any query term
        values = (rng.integers(0, int(rng.integers(1, 30)), n_spans) / 7).astype(np.float32)
        ranges = SpanRanges(first, end)
        table = ranges.table(values)
        expected = _reference(values, first, end)
        assert ranges.best_all(table).tobytes() == expected.tobytes()
        rows = np.flatnonzero(end > first)
        picked = rng.permutation(rows)[: int(rng.integers(0, len(rows) + 1))]
        assert ranges.best(table, picked).tobytes() == expected[picked].tobytes()
        if len(rows):
            got = range_max(values.take, first[rows].astype(np.int64), end[rows].astype(np.int64))
            assert got.tobytes() == expected[rows].tobytes()


def test_one_table_serves_every_question_of_an_index():
    """The runs' places are laid out once; tables of other values read the same places."""
    first = np.asarray([0, 2, 5, 5], dtype=np.int32)
    end = np.asarray([3, 9, 5, 6], dtype=np.int32)
    ranges = SpanRanges(first, end)
    a = np.asarray([1, 0, 2, 0, 0, 0, 0, 5, 0], dtype=np.float32)
    b = a[::-1].copy()
    assert ranges.best_all(ranges.table(a)).tolist() == [2, 5, 0, 0]
    assert ranges.best_all(ranges.table(b)).tolist() == [5, 2, 0, 0]
    assert ranges.best(ranges.table(b), np.asarray([3, 0])).tolist() == [0, 5]
