"""The best k of many scores, best first, ties in the order given (earlier first).

The search orders the passages above the threshold and the candidate pages this way. With
tens of thousands of passages above the threshold (common words at 10,000 pages) and a
few hundred wanted, the k largest are found among a few candidates: the least of the
maxima of k or more runs of the values bounds the k-th largest from below (each run's
maximum is one value at least that large), so only the values reaching it are
partitioned.
"""
from __future__ import annotations

import numpy as np

# A partition of fewer values than this many times k is not worth bounding first.
_BOUND_FROM = 4


def best_first(values: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k largest `values` (all of them when fewer), largest first; equal
    values in the order of their positions (the k-th largest's equals included from the
    first, as many as fit)."""
    n = len(values)
    if n > k > 0:
        kept = largest(values, k)
        return kept[np.argsort(-values[kept], kind="stable")]
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    return np.argsort(-values, kind="stable")


def largest(values: np.ndarray, k: int) -> np.ndarray:
    """Positions (ascending) of the k largest values, 0 < k < len(values); of values equal
    to the k-th largest, the earliest."""
    n = len(values)
    if n >= _BOUND_FROM * k:
        run = n // k  # n // run >= k runs
        floor = np.maximum.reduceat(values, np.arange(0, n, run)).min()
        at = np.flatnonzero(values >= floor)
    else:
        at = np.arange(n)
    sub = values[at]
    kth = np.partition(sub, len(sub) - k)[len(sub) - k]
    over = at[sub > kth]
    ties = at[sub == kth][: k - len(over)]
    return np.sort(np.concatenate([over, ties]))
