"""One channel's sums for one question, read from the query's columns of a CSC matrix.

retrieval.scoring's channel share of a row is a sum over the question's slots, in their
order, in float32: the single-alternative slots first (weight * w of their column, as
scipy's `matrix[:, cols] @ weights` adds them: column after column), then each slot with
several alternatives or a compound's words (Slot.parts), its best lambda * w per row.
`ChannelSums` computes exactly those numbers without scipy's slices, from the matrix's
own arrays (indptr, indices, data), in two parts of the ROW LAYOUT (retrieval.index):

- the head rows (passages and pages), every one at once: one gather of the query
  columns' stored entries in those rows and one scatter-add (np.add.at, sequential: the
  same float32 additions in the same order as the sparse product);
- the span rows (line spans, presence only), on demand and only those asked for: the
  proximity factor wants the spans of the few passages that may clear the threshold,
  so each query column is searched (np.searchsorted) for those spans, instead of
  summing the column's hundreds of thousands of span entries at 10,000 pages. Asked for
  most spans (`query_scores`), the span rows are summed like the head, once.

Within a CSC column the rows are sorted, so a column's head entries precede its span
entries: one searchsorted per query column finds where they part.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import scipy.sparse as sp

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


class ChannelSums:
    """The shares of the question's mass of one channel (the module docstring); `head`:
    the number of head rows (passages + pages) of `matrix`."""

    def __init__(self, matrix: sp.csc_matrix, head: int, specs: Sequence[SlotSpec]) -> None:
        self.matrix = matrix
        self.head = head
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
        indptr, indices = matrix.indptr, matrix.indices
        # where each query column's span entries begin (its rows are sorted)
        self._cut = {c: int(indptr[c]) + int(np.searchsorted(indices[indptr[c]:indptr[c + 1]], head)) for c in used}
        self._span_entries = sum(int(indptr[c + 1]) - self._cut[c] for c in used)
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
        rows = wanted.astype(np.int64) + self.head
        found: dict[int, np.ndarray] = {}

        def has(c: int) -> np.ndarray:
            """Whether each wanted span holds column c (a span entry is 1: presence)."""
            hit = found.get(c)
            if hit is None:
                col = self.matrix.indices[self._cut[c]:self.matrix.indptr[c + 1]]
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
        return n * len(self._cut) * SPAN_DENSE_SHARE > self._span_entries

    def all_spans(self) -> np.ndarray:
        """The shares of every span row (made once)."""
        if self._spans is None:
            self._spans = self._dense(False, False)[0]
        return self._spans

    # -- both ----------------------------------------------------------------------
    def _dense(self, head: bool, present: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """(shares, presence shares or None) of every head row (`head`) or every span row."""
        lo, hi = (0, self.head) if head else (self.head, self.matrix.shape[0])
        n = hi - lo
        values = np.zeros(n, dtype=np.float32)
        pres = np.zeros(n, dtype=np.float32) if present else None
        if self.lin_cols:
            # scipy's sparse product over the gathered columns: its float32 sums, in its order
            sub = self._columns(self.lin_cols, head, lo)
            values += sub @ self.lin_w
            if pres is not None:
                sub.data = np.ones(len(sub.data), dtype=np.float32)
                pres += sub @ self.lin_w
        if not self.multi:
            return values, pres
        multi = self.multi
        cols = [c for x in multi for c, _ in x.cols]
        lams = np.asarray([lam for x in multi for _, lam in x.cols], dtype=np.float32)
        slot = np.asarray([k for k, x in enumerate(multi) for _ in x.cols], dtype=np.int64)
        rows, vals, which = self._postings(cols, head, lo)
        best = _multi_best(n, rows, vals, lams[which], slot[which], len(multi), False)
        best_present = _multi_best(n, rows, vals, lams[which], slot[which], len(multi), True) if pres is not None else None
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
                target += part * column
        return values, pres

    def _ranges(self, cols: Sequence[int], head: bool) -> list[tuple[int, int]]:
        """Where the entries of each column of `cols` in the head (`head`) or span rows lie."""
        indptr = self.matrix.indptr
        if head:
            return [(int(indptr[c]), self._cut[c]) for c in cols]
        return [(self._cut[c], int(indptr[c + 1])) for c in cols]

    def _columns(self, cols: Sequence[int], head: bool, lo: int) -> sp.csc_matrix:
        """The columns `cols` of the head (`head`) or span rows as a CSC matrix of those
        rows (numbered from `lo`): each column's entries copied as one slice."""
        m = self.matrix
        ranges = self._ranges(cols, head)
        lens = np.asarray([b - a for a, b in ranges], dtype=np.int64)
        indptr = np.concatenate([[0], np.cumsum(lens)]).astype(m.indptr.dtype)
        indices = np.concatenate([m.indices[:0], *(m.indices[a:b] for a, b in ranges)])
        if lo:
            indices -= indices.dtype.type(lo)
        data = np.concatenate([m.data[:0], *(m.data[a:b] for a, b in ranges)])
        hi = self.head if head else m.shape[0]
        return sp.csc_matrix((data, indices, indptr), shape=(hi - lo, len(cols)), copy=False)

    def _postings(self, cols: Sequence[int], head: bool, lo: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The stored entries of the columns `cols` in the head rows (`head`) or the span
        rows, column after column as `cols` lists them: their rows (less `lo`), values, and
        the position in `cols` of each one's column."""
        sub = self._columns(cols, head, lo)
        return sub.indices, sub.data, np.repeat(np.arange(len(cols)), np.diff(sub.indptr))


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
