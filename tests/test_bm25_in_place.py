"""The build's in-place, chunked BM25 arithmetic (retrieval.bm25) gives what the plain
formula gives, bit for bit: the build saturates its own matrices without copying them."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from guiderag.retrieval import bm25


def _counts(seed: int, rows: int = 40, cols: int = 30, *, dups: bool = False) -> sp.csr_matrix:
    """Random counts with empty rows (and, with `dups`, unsorted repeated ids in a row)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 9, size=rows)
    lengths[::7] = 0
    ids = rng.integers(0, cols, size=int(lengths.sum())).astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    data = (np.ones(len(ids)) if dups else rng.integers(1, 6, size=len(ids))).astype(np.float32)
    m = sp.csr_matrix((data, ids, indptr), shape=(rows, cols))
    if not dups:
        m.sum_duplicates()
    return m


def _plain_saturate(counts: sp.csr_matrix, k1: float, b: float) -> np.ndarray:
    """The formula, row by row in float64, stored as float32."""
    out = []
    lengths = np.asarray(counts.sum(axis=1)).ravel()
    avg = float(lengths.mean()) if lengths.mean() > 0 else 1.0
    for r in range(counts.shape[0]):
        norm = k1 * (1.0 - b + b * lengths[r] / avg)
        for tf in counts.data[counts.indptr[r]:counts.indptr[r + 1]]:
            out.append(np.float32(min(1.0, float(tf) / (float(tf) + norm))))
    return np.asarray(out, dtype=np.float32)


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
@pytest.mark.parametrize("seed", [1, 2])
def test_saturate_in_place_in_chunks_equals_the_plain_formula(seed: int, chunk: int, monkeypatch) -> None:
    monkeypatch.setattr(bm25, "_CHUNK", chunk)
    counts = _counts(seed)
    want = _plain_saturate(counts, bm25.K1, bm25.B)
    copied = bm25.saturate(counts, bm25.K1, bm25.B)
    assert np.array_equal(copied.data, want) and copied.data.dtype == np.float32
    assert not np.array_equal(counts.data, want)  # the default copies: its input is unchanged
    own = counts.copy()
    in_place = bm25.saturate(own, bm25.K1, bm25.B, copy=False)
    assert in_place.data is own.data  # no copy of the values
    assert np.array_equal(in_place.data, want)
    assert np.array_equal(in_place.indices, counts.indices) and np.array_equal(in_place.indptr, counts.indptr)


def test_saturate_of_float64_counts_computes_in_float64() -> None:
    counts = _counts(3).astype(np.float64)
    counts.data = counts.data + 0.1  # values a float32 copy would round
    want = _plain_saturate(counts, bm25.K1, bm25.B)
    got = bm25.saturate(counts, bm25.K1, bm25.B, copy=False)
    assert got.data.dtype == np.float32
    assert np.array_equal(got.data, want)


def test_presence_in_place_equals_the_copy() -> None:
    counts = _counts(4, dups=True)
    want = bm25.presence(counts)
    assert want.has_canonical_format and set(want.data.tolist()) <= {1.0}
    got = bm25.presence(counts.copy(), copy=False)
    assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
    assert np.array_equal(got.data, want.data) and got.data.dtype == np.float32
