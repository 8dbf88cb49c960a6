"""One channel's sums for one question, read from the query's columns of a CSC matrix.

retrieval.scoring's channel share of a row is a sum over the question's slots, in their
order, in float32: the single-alternative slots first (weight * w of their column, as
scipy's `matrix[:, cols] @ weights` adds them: column after column), then each slot with
several alternatives or a compound's words (Slot.parts), its best lambda * w per row.
`ChannelSums` computes exactly those numbers without scipy's slices, from the matrix's
own arrays (indptr, indices, data), in two parts of the ROW LAYOUT (retrieval.index):

- the head rows (passages and pages), every one at once: each query column's stored
  entries in those rows added in place by scipy's own sparse-product loop, run on views
  of the column (no copy, no matrix object): the same float32 additions in the same
  order as the sparse product;
- the span rows (line spans, presence only), on demand and only those asked for: the
  proximity factor wants the spans of the few passages that may clear the threshold,
  so each query column is searched (np.searchsorted) for those spans, instead of
  summing the column's hundreds of thousands of span entries at 10,000 pages. Asked for
  most spans, the span rows are summed like the head, once.

Within a CSC column the rows are sorted, so a column's head entries precede its span
entries: `Columns` finds where they part, once per column and index.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import scipy.sparse as sp

try:  # scipy's C loop of its sparse product (y += A @ x), called on one column's views
    from scipy.sparse._sparsetools import csc_matvec as _csc_matvec
except ImportError:  # pragma: no cover - a scipy without it: numpy's scatter, the same arithmetic
    _csc_matvec = None

# A request for more span rows than 1/SPAN_DENSE_SHARE of the query columns' span entries
# (times the columns searched) sums every span row at once instead.
SPAN_DENSE_SHARE = 8


@dataclass
class SlotSpec:
    """One slot of a channel: its mass, its alternatives' (column, lambda), and the columns
    of a compound's words found together (Slot.parts) with their weight."""

    mass: float
    cols: list[tuple[int, float]]
    parts: list[int] = field(default_factory=list)
    parts_weight: float = 0.0
    # per row of the ROW LAYOUT: whether one line span holds the parts said together
    together: np.ndarray | None = None


def add_column(out: np.ndarray, rows: np.ndarray, values: np.ndarray, weight: np.float32) -> None:
    """out[rows] += values * weight in float32, for the distinct rows of one column: the
    product and the sum of scipy's sparse product, entry by entry. `rows` must lie in `out`."""
    if _csc_matvec is not None and len(rows):
        _csc_matvec(len(out), 1, np.array([0, len(rows)], dtype=rows.dtype), rows, values,
                    np.array([weight], dtype=np.float32), out)
    elif len(rows):
        out[rows] += values * np.float32(weight)


class Columns:
    """A channel's matrix (the ROW LAYOUT, CSC, sorted rows) and what every question's
    sums read of it: where each column's entries of each level (passages, pages, line
    spans) lie (found on a column's first use, kept), and a run of ones as long as the
    longest column (presence is a column's entries read as 1). One per channel and index,
    shared by every question and by retrieval.evidence (the kept places are written once
    each, the same by any thread)."""

    def __init__(self, matrix: sp.csc_matrix, n_passages: int, n_pages: int) -> None:
        self.matrix = matrix
        self.head = n_passages + n_pages
        self.indptr = matrix.indptr
        self.indices = matrix.indices
        self.data = matrix.data
        # the two boundaries in the type of the row numbers: a column is searched as stored
        self._levels = np.array((n_passages, self.head), dtype=matrix.indices.dtype)
        # per column, where its page entries and its span entries begin (-1: not found yet)
        self._page_at = np.full(matrix.shape[1], -1, dtype=np.int64)
        self._span_at = np.full(matrix.shape[1], -1, dtype=np.int64)
        lengths = np.diff(matrix.indptr)
        self.ones = np.ones(int(lengths.max()) if len(lengths) else 0, dtype=matrix.dtype)

    def _find(self, c: int) -> int:
        """Find where column c's page entries and span entries begin; the latter."""
        lo, hi = int(self.indptr[c]), int(self.indptr[c + 1])
        pages, spans = (lo + np.searchsorted(self.indices[lo:hi], self._levels)).tolist()
        self._page_at[c] = pages
        self._span_at[c] = spans  # written last: a reader seeing it finds both
        return spans

    def cut(self, c: int) -> int:
        """Where column c's span entries begin (its head entries, passages and pages, end)."""
        at = int(self._span_at[c])
        return at if at >= 0 else self._find(c)

    def bounds(self, c: int, head: bool) -> tuple[int, int]:
        """Where column c's entries in the head rows (`head`) or in the span rows lie."""
        return (int(self.indptr[c]), self.cut(c)) if head else (self.cut(c), int(self.indptr[c + 1]))

    def page_bounds(self, c: int) -> tuple[int, int]:
        """Where column c's entries in the page rows lie."""
        spans = self.cut(c)
        return int(self._page_at[c]), spans


class ChannelSums:
    """The shares of the question's mass of one channel (the module docstring), read from
    the channel's `Columns`."""

    def __init__(self, columns: Columns, specs: Sequence[SlotSpec]) -> None:
        self.columns = columns
        self.head = columns.head
        self.n_rows = columns.matrix.shape[0]
        self.n_spans = self.n_rows - self.head
        self.mass = sum(x.mass for x in specs)
        self.lin_cols: list[int] = []
        lin_w: list[float] = []
        self.multi: list[SlotSpec] = []
        for x in specs:
            if len(x.cols) == 1 and not x.parts:
                self.lin_cols.append(x.cols[0][0])
                lin_w.append(x.mass * x.cols[0][1] / self.mass)
            elif x.cols or x.parts:
                self.multi.append(x)
        self.lin_w = np.asarray(lin_w, dtype=np.float32)
        used = {*self.lin_cols, *(c for x in self.multi for c, _ in x.cols), *(p for x in self.multi for p in x.parts)}
        self._n_used = len(used)
        self._span_entries = sum(int(columns.indptr[c + 1]) - columns.cut(c) for c in used)
        self._spans: np.ndarray | None = None

    # -- the head rows -------------------------------------------------------------
    def head_rows(self, present: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """(shares, presence shares or None) of every head row."""
        return self._dense(True, present)

    # -- the span rows -------------------------------------------------------------
    def spans(self, idx: np.ndarray) -> np.ndarray:
        """The (presence) shares of the span rows `idx` (numbered from the first span)."""
        if self._spans is not None or self.dense_better(len(idx)):
            return self.all_spans()[idx]
        wanted, back = np.unique(idx, return_inverse=True)
        # in the type of the columns' row numbers: searching a column for them then reads it
        # as stored, instead of copying it to a wider type first
        rows = (wanted.astype(np.int64) + self.head).astype(self.columns.indices.dtype)
        found: dict[int, np.ndarray] = {}
        cols = self.columns

        def has(c: int) -> np.ndarray:
            """Whether each wanted span holds column c (a span entry is 1: presence)."""
            hit = found.get(c)
            if hit is None:
                col = cols.indices[cols.cut(c):cols.indptr[c + 1]]
                if not len(col):
                    hit = np.zeros(len(rows), dtype=bool)
                else:
                    at = np.minimum(np.searchsorted(col, rows), len(col) - 1)
                    hit = col[at] == rows
                found[c] = hit
            return hit

        out = np.zeros(len(wanted), dtype=np.float32)
        for k, c in enumerate(self.lin_cols):
            out += self.lin_w[k] * has(c)
        for x in self.multi:
            column = np.zeros(len(wanted), dtype=np.float32)
            for c, lam in x.cols:
                column = np.maximum(column, np.float32(lam) * has(c))
            if x.parts:
                least = np.logical_and.reduce([has(p) for p in x.parts]).astype(np.float32)
                if x.together is not None:
                    least = least * x.together[rows]
                column = np.maximum(column, np.float32(x.parts_weight) * least)
            out += np.float32(x.mass / self.mass) * column
        return out[back]

    def dense_better(self, n: int) -> bool:
        """Whether n span rows are asked for more cheaply by summing every span row."""
        return n * self._n_used * SPAN_DENSE_SHARE > self._span_entries

    def all_spans(self) -> np.ndarray:
        """The shares of every span row (made once)."""
        if self._spans is None:
            self._spans = self._dense(False, False)[0]
        return self._spans

    # -- both ----------------------------------------------------------------------
    def _dense(self, head: bool, present: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """(shares, presence shares or None) of every head row (`head`) or every span row."""
        cols = self.columns
        lo, hi = (0, self.head) if head else (self.head, self.n_rows)
        # the span rows are summed in a buffer of every row (the columns' row numbers as
        # stored), of which the span part is returned
        values = np.zeros(hi, dtype=np.float32)
        pres = np.zeros(hi, dtype=np.float32) if present else None
        for k, c in enumerate(self.lin_cols):
            a, b = cols.bounds(c, head)
            rows = cols.indices[a:b]
            add_column(values, rows, cols.data[a:b], self.lin_w[k])
            if pres is not None:
                add_column(pres, rows, cols.ones[:b - a], self.lin_w[k])
        if self.multi:
            self._add_multi(values, pres, head, lo)
        return values[lo:], None if pres is None else pres[lo:]

    def _add_multi(self, values: np.ndarray, pres: np.ndarray | None, head: bool, lo: int) -> None:
        """Each slot with several alternatives or a compound's words, after the others: its
        best lambda * w per row (the module docstring), rows lo.. of `values` and `pres`."""
        n = len(values) - lo
        multi = self.multi
        cols = [c for x in multi for c, _ in x.cols]
        lams = np.asarray([lam for x in multi for _, lam in x.cols], dtype=np.float32)
        slot = np.asarray([k for k, x in enumerate(multi) for _ in x.cols], dtype=np.int64)
        rows, vals, which = self._postings(cols, head, lo)
        best = _multi_best(n, rows, vals, lams[which], slot[which], len(multi), False)
        best_present = _multi_best(n, rows, vals, lams[which], slot[which], len(multi), True) if pres is not None else None
        hi = len(values)
        for k, x in enumerate(multi):
            part = np.float32(x.mass / self.mass)
            for target, table, ones in ((values, best, False), (pres, best_present, True)):
                if target is None or table is None:
                    continue
                column = table[:, k]
                if x.parts:  # the compound's words together: the least of their weights
                    prow, pvals, _ = self._postings(x.parts, head, lo)
                    least = _least(n, prow, pvals, len(x.parts), ones)
                    if x.together is not None:  # only where one line span says them together
                        least = least * x.together[lo:hi]
                    column = np.maximum(column, np.float32(x.parts_weight) * least)
                target[lo:] += part * column

    def _postings(self, cols: Sequence[int], head: bool, lo: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The stored entries of the columns `cols` in the head rows (`head`) or the span
        rows, column after column as `cols` lists them: their rows (less `lo`), values, and
        the position in `cols` of each one's column."""
        c = self.columns
        ranges = [c.bounds(col, head) for col in cols]
        rows = np.concatenate([c.indices[:0], *(c.indices[a:b] for a, b in ranges)])
        if lo:
            rows -= rows.dtype.type(lo)
        vals = np.concatenate([c.data[:0], *(c.data[a:b] for a, b in ranges)])
        which = np.repeat(np.arange(len(cols)), [b - a for a, b in ranges])
        return rows, vals, which


def _least(n: int, rows: np.ndarray, vals: np.ndarray, n_cols: int, presence: bool) -> np.ndarray:
    """Per row, the least stored value of n_cols columns' entries (1 with `presence`), 0
    where the row lacks one of them: `matrix[:, cols].min(axis=1)`."""
    count = np.bincount(rows, minlength=n)
    if presence:
        return (count == n_cols).astype(np.float32)
    least = np.full(n, np.inf, dtype=np.float32)
    np.minimum.at(least, rows, vals)
    return np.where(count == n_cols, least, np.float32(0.0))


def _multi_best(n: int, rows: np.ndarray, vals: np.ndarray, lams: np.ndarray, slot: np.ndarray, slots: int,
                presence: bool) -> np.ndarray:
    """(rows, slots): each slot's best lambda * w over its alternatives' entries per row (w
    read as 1 with `presence`), 0 where the row holds none."""
    out = np.zeros((n, slots), dtype=np.float32)
    if len(rows):
        np.maximum.at(out.reshape(-1), rows.astype(np.int64) * slots + slot, lams if presence else vals * lams)
    return out


def rows_holding(matrix: sp.csc_matrix, cols: Sequence[int]) -> np.ndarray:
    """Per row of the matrix, whether it holds every one of the columns `cols`."""
    cols_a = np.asarray(cols, dtype=np.int64)
    first = matrix.indptr[cols_a].astype(np.int64)
    lens = matrix.indptr[cols_a + 1].astype(np.int64) - first
    at = np.repeat(first - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()), dtype=np.int64)
    return np.bincount(matrix.indices[at], minlength=matrix.shape[0]) == len(cols_a)
