"""The best k of many scores, best first, ties in the order given (earlier first).

The search orders the passages above the threshold and the candidate pages this way. With
tens of thousands of passages above the threshold (common words at 10,000 pages) and a
few hundred wanted, the k largest are found among a few candidates: the k-th largest of
the maxima of 4k groups of the values bounds the k-th largest value from below (k groups
each hold a value at least that large), so only the values reaching it are partitioned.
Groups of interleaved values (every 4k-th) spread a page's run of high scores over many
groups: the bound is tighter than with contiguous runs, and one elementwise pass finds it.
"""
from __future__ import annotations

import numpy as np

# A partition of fewer values than this many times k is not worth bounding first; and the
# number of groups (times k) whose maxima bound the k-th largest.
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
        # the k-th largest of the maxima of _BOUND_FROM * k groups of the values: k groups
        # hold a value that large. Group g is every value at g + i * groups (the last few
        # values in no group): the maxima are one elementwise pass over rows of the values.
        groups = _BOUND_FROM * k
        maxima = values[:n // groups * groups].reshape(-1, groups).max(axis=0)
        floor = np.partition(maxima, groups - k)[groups - k]
        at = np.flatnonzero(values >= floor)
    else:
        at = np.arange(n)
    sub = values[at]
    kth = np.partition(sub, len(sub) - k)[len(sub) - k]
    over = at[sub > kth]
    ties = at[sub == kth][: k - len(over)]
    return np.sort(np.concatenate([over, ties]))


class Ranking:
    """The positions of `values`, largest first (best_first), found only as far as asked:
    the head of m positions is the first m of any longer head, so the longest asked for
    is kept and cut (the candidate pages and the reference read one ranking)."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        self._head = np.empty(0, dtype=np.int64)

    def head(self, m: int) -> np.ndarray:
        """Positions of the m largest values (all when fewer), largest first, ties earliest first."""
        if m > len(self._head) and len(self._head) < len(self.values):
            self._head = best_first(self.values, m)
        return self._head[:max(m, 0)]


# The best runs are first looked for among this many times k of the largest values.
_RUNS_PROBE = 4


def best_runs(keys: np.ndarray, ranking: Ranking, k: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The k keys whose best value is largest, best first (equal bests: the lower key
    first), their best values, and how many distinct keys there are; `keys` ascend, so
    each key's values (ranking.values) are one run (a page's passages). The largest
    values are read first, a few times k of them, more while they hold fewer than k
    keys: the first k distinct keys in the ranking are those of the best runs, each met
    at its best value. Only when the largest values are most of them is every run's
    maximum taken."""
    values = ranking.values
    if not len(keys):
        return keys[:0], values[:0], 0
    new = keys[1:] != keys[:-1]
    total = 1 + int(np.count_nonzero(new))
    if k <= 0:
        return keys[:0], values[:0], total
    m = _RUNS_PROBE * k
    while total > k and m * 2 <= len(values):
        order = ranking.head(m)
        met = keys[order]
        _, first = np.unique(met, return_index=True)
        if len(first) >= k:
            first = np.sort(first)[:k]
            return met[first], values[order[first]], total
        m *= _RUNS_PROBE
    starts = np.flatnonzero(np.concatenate(([True], new)))
    best = np.maximum.reduceat(values, starts)
    order = best_first(best, k)
    return keys[starts[order]], best[order], total
