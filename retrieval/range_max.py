"""The maximum of a per-span value over each passage's range of spans (the best line span
of a window, retrieval.scoring's proximity factor), two ways:

- `SpanRanges`: every range's maximum read off a sparse table of the values (the maximum
  of every run of 2**k spans, k up to log2 of the longest range, `runs`): the maximum over
  a range is that of the two runs of 2**k spans that cover it, k = floor(log2(its
  length)); which range takes which k is laid out once per index. For many ranges at once.
- `range_max`: the values of a few ranges gathered and reduced (reduceat), for few ranges
  or values asked for range by range.
Both give the same numbers (a maximum is exact in any order).
"""
from __future__ import annotations

from typing import Callable

import numpy as np


class SpanRanges:
    """The passages' span ranges first .. end (exclusive; a passage without spans has
    first == end and is never asked for), laid out for the sparse table."""

    def __init__(self, first: np.ndarray, end: np.ndarray) -> None:
        self.first = first.astype(np.int64)
        lengths = np.maximum(end.astype(np.int64) - self.first, 1)
        self.level = np.log2(lengths).astype(np.int8)  # floor(log2(length))
        self.last = end.astype(np.int64) - (np.int64(1) << self.level.astype(np.int64))  # the last run's first span
        self.top = int(self.level.max(initial=0))
        self._levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None

    def levels(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per k: the ranges of floor(log2(length)) k that hold spans, their first spans
        and their last runs' first spans (laid out on first use)."""
        if self._levels is None:
            spans = np.flatnonzero(self.last >= self.first)  # a range without spans has last < first
            level = self.level[spans]
            self._levels = []
            for k in range(self.top + 1):
                at = spans[level == k]
                self._levels.append((at, self.first[at], self.last[at]))
        return self._levels

    def runs(self, values: np.ndarray) -> list[np.ndarray]:
        """The sparse table of `values`: runs[k][i] = max(values[i .. i + 2**k - 1]), k = 0 .. top."""
        out = [values]
        for k in range(1, self.top + 1):
            half = 1 << (k - 1)
            out.append(np.maximum(out[-1][:-half], out[-1][half:]))
        return out

    def best_all(self, runs: list[np.ndarray]) -> np.ndarray:
        """The maximum over the range of every passage, from `runs` (self.runs); 0 for a
        passage without spans."""
        out = np.zeros(len(self.first), dtype=runs[0].dtype)
        for k, (at, first, last) in enumerate(self.levels()):
            if len(at):
                out[at] = np.maximum(runs[k][first], runs[k][last])
        return out

    def best(self, runs: list[np.ndarray], rows: np.ndarray) -> np.ndarray:
        """The maximum over the range of each passage of `rows`, from `runs` (self.runs)."""
        out = np.empty(len(rows), dtype=runs[0].dtype)
        level = self.level[rows]
        for k in range(self.top + 1):
            at = np.flatnonzero(level == k) if self.top else np.arange(len(rows))
            if len(at):
                picked = rows[at]
                out[at] = np.maximum(runs[k][self.first[picked]], runs[k][self.last[picked]])
        return out


def range_max(values: Callable[[np.ndarray], np.ndarray], first: np.ndarray, end: np.ndarray) -> np.ndarray:
    """max(values(i) for i in range(first[k], end[k])) for each k (every range non-empty):
    one reduceat over the ranges' values laid end to end, so the work is their total length."""
    lens = end - first
    starts = np.cumsum(lens) - lens
    idx = np.repeat(first - starts, lens) + np.arange(int(lens.sum()), dtype=np.int64)
    return np.maximum.reduceat(values(idx), starts)
