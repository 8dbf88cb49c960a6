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


def saturate(counts: sp.csr_matrix, k1: float, b: float) -> sp.csr_matrix:
    """BM25 term-frequency saturation, divided by (k1 + 1) and capped at 1."""
    m = counts.tocsr(copy=True)
    lengths = np.asarray(m.sum(axis=1)).ravel()
    avg = float(lengths.mean()) if len(lengths) and lengths.mean() > 0 else 1.0
    norm = k1 * (1.0 - b + b * lengths / avg)
    row_norm = np.repeat(norm, np.diff(m.indptr))
    tf = m.data
    m.data = np.minimum(1.0, tf / (tf + row_norm)).astype(np.float32)
    return m


def presence(counts: sp.csr_matrix) -> sp.csr_matrix:
    """1 where a term occurs (spans ask whether the terms are there together, not how often)."""
    m = counts.tocsr(copy=True)
    m.sum_duplicates()
    m.data = np.ones_like(m.data, dtype=np.float32)
    return m


def idf_vector(page_counts: sp.csr_matrix) -> np.ndarray:
    """BM25 idf from page document frequencies (a title repeated in every passage of
    its page counts once)."""
    n = page_counts.shape[0]
    df = np.bincount(page_counts.indices, minlength=page_counts.shape[1]).astype(np.float64)
    return np.log1p((n - df + 0.5) / (df + 0.5)).astype(np.float32)


def unseen_idf(n_pages: int) -> float:
    """The idf of a term that occurs in no page."""
    return float(math.log1p((n_pages + 0.5) / 0.5))
