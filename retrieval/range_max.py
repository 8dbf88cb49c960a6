"""The maximum of a per-span value over each passage's range of spans (the best line span
of a window, retrieval.scoring's proximity factor), two ways:

- `SpanRanges`: every range's maximum read off a sparse table of the values (the maximum
  of every run of 2**k spans, k up to log2 of the longest range, its levels end to end
  in one array, `table`): the maximum over a range is that of the two runs of 2**k spans
  that cover it, k = floor(log2(its length)), read by two gathers whose places in the
  table are laid out once per index. For many ranges at once.
- `range_max`: the values of a few ranges gathered and reduced (reduceat), for few ranges
  or values asked for range by range.
Both give the same numbers (a maximum is exact in any order).
"""
from __future__ import annotations

from typing import Callable

import numpy as np


class SpanRanges:
    """The passages' span ranges first .. end (exclusive; a passage without spans has
    first == end and reads 0), and where each range's two runs lie in the sparse table of
    their spans' values (`table`), laid out once per index."""

    def __init__(self, first: np.ndarray, end: np.ndarray) -> None:
        self.first = first.astype(np.int64)
        self.end = end.astype(np.int64)
        lengths = np.maximum(self.end - self.first, 1)
        self.level = np.log2(lengths).astype(np.int64)  # floor(log2(length))
        self.top = int(self.level.max(initial=0))
        # per table length: each range's two runs' places in it (_lay_out)
        self._places: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def table(self, values: np.ndarray) -> np.ndarray:
        """The sparse table of `values`, its levels end to end: level k holds max(values[i ..
        i + 2**k - 1]) for every i, k = 0 .. top (level 0: the values), then one 0."""
        out = self.empty_table(len(values), values.dtype)
        out[:len(values)] = values
        return self.fill(out, len(values))

    def empty_table(self, n: int, dtype: np.dtype | type = np.float32) -> np.ndarray:
        """A table's memory for n values, to write them into its first n places (level 0)
        and `fill`: the values made there need no copy."""
        return np.empty(sum(self._sizes(n)) + 1, dtype=dtype)

    def _sizes(self, n: int) -> list[int]:
        """Each level's length in a table of n values: its runs of 2**k spans."""
        return [max(n - (1 << k) + 1, 0) for k in range(self.top + 1)]

    def fill(self, out: np.ndarray, n: int) -> np.ndarray:
        """The sparse table (`table`) of the n values in out's first places, made in `out`
        (from empty_table)."""
        sizes = self._sizes(n)
        out[-1] = 0
        at = 0
        for k in range(1, self.top + 1):
            half = 1 << (k - 1)
            runs = out[at:at + sizes[k - 1]]
            at += sizes[k - 1]
            np.maximum(runs[:-half], runs[half:], out=out[at:at + sizes[k]])
        if len(out) not in self._places:
            self._places[len(out)] = self._lay_out(sizes)
        return out

    def _lay_out(self, sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Per range, the places in a table of these level sizes of the run of 2**level spans
        that begins at its first span and of the one that ends at its last (both the
        table's final 0 for a range without spans)."""
        offset = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)[self.level]
        last = self.end - (np.int64(1) << self.level)  # the last run's first span
        none = np.int64(sum(sizes))
        empty = last < self.first
        return np.where(empty, none, offset + self.first), np.where(empty, none, offset + last)

    def best_all(self, table: np.ndarray) -> np.ndarray:
        """The maximum over every passage's range, from `table` (self.table); 0 for a
        passage without spans."""
        lead, tail = self._places[len(table)]
        return np.maximum(table.take(lead), table.take(tail))

    def best(self, table: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The maximum over the range of each passage of `rows`, from `table` (self.table)."""
        lead, tail = self._places[len(table)]
        return np.maximum(table.take(lead.take(rows)), table.take(tail.take(rows)))


def range_max(values: Callable[[np.ndarray], np.ndarray], first: np.ndarray, end: np.ndarray) -> np.ndarray:
    """max(values(i) for i in range(first[k], end[k])) for each k (every range non-empty):
    one reduceat over the ranges' values laid end to end, so the work is their total length."""
    lens = end - first
    starts = np.cumsum(lens) - lens
    idx = np.repeat(first - starts, lens) + np.arange(int(lens.sum()), dtype=np.int64)
    return np.maximum.reduceat(values(idx), starts)
