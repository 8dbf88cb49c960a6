"""The index build's rows, kept as the chunks' blocks, and one channel's matrix in the ROW
LAYOUT (retrieval.index) assembled from them as CSC directly (retrieval.build).

A level (the passages, the pages or the line spans of one channel) arrives as blocks of
rows: global term ids, their counts (None: presence, all ones) and each row's length,
every row's ids distinct. `stack_csc` places the levels' entries straight into the CSC
arrays: a group of blocks at a time is turned column-major (scipy's own csr_tocsc) and its
entries go after the rows already placed in each column. So every column lists its rows in
order, as the CSC of the stacked rows does, with no stacked CSR copy beside the CSC and
each block let go once placed: the build's peak memory is the CSC and the blocks not yet
placed, not two copies of the matrix.

`stack_both` makes the build's two matrices (terms, bigrams) on two cores: a process
forked once the analysis is done places the second into arrays it shares with this one
(anonymous shared memory, sized beforehand: the entries are counted) while this one places
the first. The placing is scattered writes that hold the GIL, so two threads would only
take turns (measured: no faster).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import multiprocessing
from typing import Callable, TypeVar

import numpy as np
import scipy.sparse as sp

from guiderag.processes import FORKS, pool_worker_signals

from .bm25 import length_norm, saturated

# Entries turned column-major at once: the temporaries of a group stay about 40 bytes each.
GROUP_ENTRIES = 1 << 19
# Groups placed between two hand-backs of the freed blocks' memory (give_back).
_GIVE_BACK_GROUPS = 16


def _malloc_trim() -> object:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc: the allocator keeps what it keeps
        return None


_TRIM = _malloc_trim()


def give_back() -> None:
    """Hand the free pages of the C heap back to the system (glibc's malloc_trim, a few ms).
    The build frees many blocks of a few hundred kB that glibc keeps in its heap (its
    threshold for mapping a block of its own rises as numpy frees bigger temporaries): the
    process's resident memory would stay at the blocks' high-water mark while the matrices,
    mapped afresh, add to it."""
    if _TRIM is not None:
        _TRIM(0)  # type: ignore[operator]


_INT32_MAX = np.iinfo(np.int32).max


def text_rows(flat: np.ndarray, starts: np.ndarray, ranges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ids of rows made of texts, row after row, and each row's length: text i's ids
    are flat[starts[i]:starts[i + 1]], row r holds the texts of its ranges ranges[r, k] =
    (first text, stop text), (0, 0) for none. One gather for all rows."""
    lo = starts[ranges[..., 0]]
    sizes = starts[ranges[..., 1]] - lo
    lengths = sizes.sum(axis=1) if sizes.ndim > 1 else sizes
    lo, sizes = lo.ravel(), sizes.ravel()
    at = np.repeat(lo - (np.cumsum(sizes) - sizes), sizes)
    at += np.arange(len(at), dtype=np.int64)
    return flat[at], lengths


def distinct_rows(ids: np.ndarray, lengths: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's distinct ids, sorted, with how often the row holds each (float32) and the
    rows' new lengths: ids below `width`, rows of `lengths` one after another (scipy's
    sum_duplicates, a sort within each row: the same as np.unique of the rows' (row, id)
    keys, a few times faster)."""
    indptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    m = sp.csr_matrix((np.ones(len(ids), dtype=np.float32), ids, indptr), shape=(len(lengths), width))
    m.sum_duplicates()
    return m.indices.astype(np.int32, copy=False), m.data, np.diff(m.indptr).astype(np.int64)


class RowBlocks:
    """The rows of one level of one channel, as blocks (ids, counts or None, row lengths)."""

    def __init__(self) -> None:
        self.blocks: list[tuple[np.ndarray, np.ndarray | None, np.ndarray]] = []
        self.n_rows = 0
        self.nnz = 0

    def add(self, ids: np.ndarray, counts: np.ndarray | None, lengths: np.ndarray) -> None:
        """Rows at once: their ids one after another (distinct within a row), their counts
        (None: presence) and each row's length."""
        if len(lengths):
            self.blocks.append((ids, counts, lengths))
            self.n_rows += len(lengths)
            self.nnz += len(ids)

    def df(self, ncols: int) -> np.ndarray:
        """In how many rows each column occurs (a page level's document frequencies)."""
        out = np.zeros(ncols, dtype=np.int64)
        for ids, _, _ in self.blocks:
            out += np.bincount(ids, minlength=ncols)
        return out

    def row_lengths(self) -> np.ndarray:
        """Each row's sum of counts, float32 (the sum scipy's float32 CSR gives: counts are
        whole numbers, exact below 2**24)."""
        parts = []
        for ids, counts, lengths in self.blocks:
            row_of = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
            sums = np.bincount(row_of, weights=counts, minlength=len(lengths)) if counts is not None else lengths
            parts.append(np.asarray(sums).astype(np.float32))
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)


Levels = list[tuple[RowBlocks, bool]]
T = TypeVar("T")


def stack_csc(levels: Levels, ncols: int, k1: float, b: float) -> sp.csc_matrix:
    """The levels' rows one after another as one CSC matrix; each level (blocks, saturate):
    BM25-saturated counts (retrieval.bm25.saturate) or presence (ones). The same arrays as
    stacking the levels' CSR matrices and converting with tocsc. The levels' blocks are
    let go as they are placed."""
    n_rows, nnz, idx_dtype = _shape(levels)
    indptr = np.zeros(ncols + 1, dtype=np.int64)
    indices: np.ndarray = np.empty(nnz, dtype=idx_dtype)
    data = np.empty(nnz, dtype=np.float32)
    _place(levels, ncols, k1, b, indptr, indices, data)
    return _matrix(indptr, indices, data, n_rows, ncols)


def stack_both(first: tuple[Levels, int], second: tuple[Levels, int], k1: float, b: float, *, fork: bool,
               meanwhile: Callable[[], T]) -> tuple[sp.csc_matrix, sp.csc_matrix, T]:
    """Two channels' matrices (each (levels, ncols), as stack_csc makes them) and what
    `meanwhile()` returns. With `fork` (where processes fork: guiderag.processes.FORKS), a
    forked process assembles the second into shared memory while this one assembles the
    first and runs `meanwhile`: the build's serial end on two cores. Should that process
    not start or fail, the second is assembled here (the same arrays: its blocks are
    untouched in this process)."""
    if not fork or not FORKS:
        out = stack_csc(*first, k1, b)
        more = meanwhile()
        return out, stack_csc(*second, k1, b), more
    levels, ncols = second
    n_rows, nnz, idx_dtype = _shape(levels)
    try:
        indptr, indices, data = (_shared(n, dtype) for n, dtype in ((ncols + 1, np.int64), (nnz, idx_dtype),
                                                                   (nnz, np.float32)))
        child = multiprocessing.get_context("fork").Process(
            target=_place_in_child, args=(levels, ncols, k1, b, indptr, indices, data), name="guiderag-index-csc")
        child.start()
    except OSError:  # no shared memory or no fork (memory or process limits): both made here
        return stack_both(first, second, k1, b, fork=False, meanwhile=meanwhile)
    try:
        out = stack_csc(*first, k1, b)
        more = meanwhile()
    finally:
        child.join()
    if child.exitcode != 0:  # (its error went to stderr) the same arrays, made here
        return out, stack_csc(levels, ncols, k1, b), more
    for level, _ in levels:  # placed by the child: let go here too
        level.blocks = []
    give_back()
    return out, _matrix(indptr, indices, data, n_rows, ncols), more


def _shared(n: int, dtype: type) -> np.ndarray:
    """An array of n items in memory shared with processes forked after (anonymous
    MAP_SHARED); let go with its last view."""
    size = n * np.dtype(dtype).itemsize
    return np.frombuffer(mmap.mmap(-1, max(1, size)), dtype=dtype, count=n)


def _place_in_child(levels: Levels, ncols: int, k1: float, b: float,
                    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray) -> None:
    """stack_both's forked process: the pool's signals (guiderag.processes), then `_place`."""
    pool_worker_signals()
    _place(levels, ncols, k1, b, indptr, indices, data)


def _shape(levels: Levels) -> tuple[int, int, type]:
    """Rows, entries, and the type of the row numbers of the levels' matrix."""
    n_rows = sum(level.n_rows for level, _ in levels)
    nnz = sum(level.nnz for level, _ in levels)
    return n_rows, nnz, np.int32 if max(nnz, n_rows) <= _INT32_MAX else np.int64


def _matrix(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, n_rows: int, ncols: int) -> sp.csc_matrix:
    m = sp.csc_matrix((data, indices, indptr.astype(indices.dtype)), shape=(n_rows, ncols))
    m.has_sorted_indices = True  # each column's rows in order, as tocsc gives them
    return m


def _place(levels: Levels, ncols: int, k1: float, b: float,
           indptr: np.ndarray, indices: np.ndarray, data: np.ndarray) -> None:
    """Fill the CSC arrays (indptr: ncols + 1 zeros; indices and data: every entry's place)
    with the levels' rows, a group of blocks at a time, letting the blocks go."""
    idx_dtype = indices.dtype.type
    col_counts = np.zeros(ncols, dtype=np.int64)
    for level, _ in levels:
        for ids, _, _ in level.blocks:
            col_counts += np.bincount(ids, minlength=ncols)
    np.cumsum(col_counts, out=indptr[1:])
    del col_counts
    free = indptr[:-1].copy()  # where each column's next entry goes
    row0 = groups = 0
    for level, saturate in levels:
        norm = length_norm(level.row_lengths(), k1, b) if saturate else None
        level_row = 0  # the level's first row of the group
        blocks = level.blocks
        level.blocks = []
        blocks.reverse()
        while blocks:
            group = [blocks.pop()]
            size = len(group[0][0])
            while blocks and size + len(blocks[-1][0]) <= GROUP_ENTRIES:
                group.append(blocks.pop())
                size += len(group[-1][0])
            ids = np.concatenate([g[0] for g in group]) if len(group) > 1 else group[0][0]
            lengths = np.concatenate([g[2] for g in group]) if len(group) > 1 else group[0][2]
            if norm is None:
                values = np.ones(len(ids), dtype=np.float32)
            else:
                counts = np.concatenate([g[1] for g in group if g[1] is not None])
                rows = np.repeat(np.arange(level_row, level_row + len(lengths), dtype=np.int64), lengths)
                values = saturated(counts, norm[rows])
                del counts, rows
            del group
            ptr = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=ptr[1:])
            part = sp.csr_matrix((values, ids, ptr), shape=(len(lengths), ncols)).tocsc()
            del values, ids, ptr
            starts = part.indptr.astype(np.int64)
            per_col = np.diff(starts)
            dest = np.repeat(free - starts[:-1], per_col)
            dest += np.arange(len(dest), dtype=np.int64)
            indices[dest] = part.indices.astype(idx_dtype, copy=False) + (row0 + level_row)
            data[dest] = part.data
            free += per_col
            del part, dest, starts, per_col
            level_row += len(lengths)
            groups += 1
            if groups % _GIVE_BACK_GROUPS == 0:
                give_back()  # the blocks placed so far
        row0 += level.n_rows
    give_back()
