"""The BM25 arithmetic of the index: saturated term weights, presence, idf.

Matrix values are BM25's saturated term frequency divided by (k1 + 1), so in [0, 1]; a
query score (retrieval.scoring) is sum(idf * weight) / sum(idf over all query
terms), also in [0, 1]. tests/test_scorer_reference.py pins the whole score against a
plain implementation of the formula.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

# BM25's parameters of the saturated term weights stored in the index. Constants, not
# settings: the 0.2 threshold is calibrated on the scores they give (retrieval.pipeline_ours),
# so a deployment turning them would move every refusal. k1 is low, close to "is the term
# there", which separated out-of-scope questions best on JSQuAD (devbench); b is Lucene's.
# tests/test_scorer_reference.py varies them against the plain formula.
K1 = 0.5
B = 0.75


# Entries saturated at once: the float64 arithmetic's temporaries stay this small.
_CHUNK = 1 << 20


def saturate(counts: sp.csr_matrix, k1: float, b: float, *, copy: bool = True) -> sp.csr_matrix:
    """BM25 term-frequency saturation, divided by (k1 + 1) and capped at 1 (`copy`=False:
    in `counts` itself, float32 CSR, which the caller gives up)."""
    m = counts.tocsr(copy=copy)
    norm = length_norm(np.asarray(m.sum(axis=1)).ravel(), k1, b)
    tf = m.data
    out = tf if tf.dtype == np.float32 else np.empty(len(tf), dtype=np.float32)
    for lo in range(0, len(tf), _CHUNK):
        hi = min(len(tf), lo + _CHUNK)
        rows = np.searchsorted(m.indptr, np.arange(lo, hi), side="right") - 1
        out[lo:hi] = saturated(tf[lo:hi], norm[rows])
    m.data = out
    return m


def length_norm(lengths: np.ndarray, k1: float, b: float) -> np.ndarray:
    """Each row's k1 * (1 - b + b * length / average length), of its `lengths` (the rows'
    sums of counts, in the counts' dtype: float32 counts give float32 norms)."""
    avg = float(lengths.mean()) if len(lengths) and lengths.mean() > 0 else 1.0
    return k1 * (1.0 - b + b * lengths / avg)


def saturated(tf: np.ndarray, norm: np.ndarray) -> np.ndarray:
    """Saturated weights of the counts `tf` of rows of length norms `norm` (one per count), float32."""
    return np.minimum(1.0, tf / (tf + norm)).astype(np.float32)


def presence(counts: sp.csr_matrix, *, copy: bool = True) -> sp.csr_matrix:
    """1 where a term occurs (spans ask whether the terms are there together, not how often;
    `copy`=False: in `counts` itself, which the caller gives up)."""
    m = counts.tocsr(copy=copy)
    m.sum_duplicates()
    m.data = np.ones_like(m.data, dtype=np.float32)
    return m


def idf_vector(page_counts: sp.csr_matrix) -> np.ndarray:
    """BM25 idf from page document frequencies (a title repeated in every passage of
    its page counts once)."""
    return idf_of(np.bincount(page_counts.indices, minlength=page_counts.shape[1]), page_counts.shape[0])


def idf_of(df: np.ndarray, n: int) -> np.ndarray:
    """BM25 idf of document frequencies `df` among `n` pages."""
    df = df.astype(np.float64)
    return np.log1p((n - df + 0.5) / (df + 0.5)).astype(np.float32)


def unseen_idf(n_pages: int) -> float:
    """The idf of a term that occurs in no page."""
    return float(math.log1p((n_pages + 0.5) / 0.5))
