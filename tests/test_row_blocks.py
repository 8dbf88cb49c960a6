"""The build's CSC assembly (retrieval.row_blocks.stack_csc) gives the arrays of the way it
replaced, bit for bit: every level's CSR matrix made, BM25-saturated or read as presence,
stacked and converted with tocsc; in groups of any size, with empty rows and empty levels."""
from __future__ import annotations

import multiprocessing.context
import os

import numpy as np
import pytest
import scipy.sparse as sp

from guiderag.retrieval import bm25, row_blocks
from guiderag.retrieval.row_blocks import RowBlocks, stack_both, stack_csc


def _blocks(rng: np.random.Generator, n_blocks: int, cols: int, *, counts: bool) -> list[tuple]:
    """Blocks of rows with distinct, unsorted ids per row (some rows empty)."""
    out = []
    for _ in range(n_blocks):
        rows = int(rng.integers(0, 12))
        lengths = rng.integers(0, min(cols, 9), size=rows)
        lengths[::5] = 0
        ids = np.concatenate([rng.permutation(cols)[:n] for n in lengths]).astype(np.int32) if rows else np.empty(0, np.int32)
        values = rng.integers(1, 6, size=len(ids)).astype(np.float32) if counts else None
        out.append((ids, values, lengths.astype(np.int64)))
    return out


def _replaced(levels: list[tuple[list[tuple], bool]], cols: int) -> sp.csc_matrix:
    """What build.py did before stack_csc: one CSR per level (indices sorted), saturated or
    presence, vstack, tocsc."""
    mats = []
    for blocks, saturate in levels:
        ids = np.concatenate([b[0] for b in blocks]) if blocks else np.empty(0, np.int32)
        data = np.concatenate([b[1] if b[1] is not None else np.ones(len(b[0]), np.float32) for b in blocks]) \
            if blocks else np.empty(0, np.float32)
        lengths = np.concatenate([b[2] for b in blocks]) if blocks else np.empty(0, np.int64)
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        m = sp.csr_matrix((data, ids, indptr), shape=(len(lengths), cols))
        m.sort_indices()
        mats.append(bm25.saturate(m, bm25.K1, bm25.B, copy=False) if saturate else bm25.presence(m, copy=False))
    return sp.vstack(mats, format="csr").tocsc()


def _levels(shapes: list[tuple[list[tuple], bool]]) -> list[tuple[RowBlocks, bool]]:
    levels = []
    for blocks, saturate in shapes:
        level = RowBlocks()
        for ids, counts, lengths in blocks:
            level.add(ids, counts, lengths)
        levels.append((level, saturate))
    return levels


def _channels(seed: int) -> list[tuple[list[tuple[list[tuple], bool]], int]]:
    """Two channels' levels (passages, pages, spans), as the build has them."""
    rng = np.random.default_rng(seed)
    return [([(_blocks(rng, 7, cols, counts=True), True), (_blocks(rng, 3, cols, counts=True), True),
              (_blocks(rng, 9, cols, counts=False), False)], cols) for cols in (19, 31)]


def _same(got: sp.csc_matrix, want: sp.csc_matrix) -> None:
    assert got.shape == want.shape and got.format == "csc" and got.has_sorted_indices
    for name in ("indptr", "indices", "data"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name


@pytest.mark.parametrize("group", [1, 5, 64, 1 << 19])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_stack_csc_equals_stacking_the_levels_and_tocsc(seed: int, group: int, monkeypatch) -> None:
    monkeypatch.setattr(row_blocks, "GROUP_ENTRIES", group)
    rng = np.random.default_rng(seed)
    cols = 23
    shapes = [(_blocks(rng, 6, cols, counts=True), True), (_blocks(rng, 3, cols, counts=True), True),
              (_blocks(rng, 8, cols, counts=False), False)]
    want = _replaced(shapes, cols)
    levels = _levels(shapes)
    df = levels[1][0].df(cols)
    got = stack_csc(levels, cols, bm25.K1, bm25.B)
    _same(got, want)
    assert all(not level.blocks for level, _ in levels)  # let go as placed
    first = sum(len(b[2]) for b in shapes[0][0])
    pages = want.tocsr()[first:first + levels[1][0].n_rows]
    assert np.array_equal(bm25.idf_of(df, pages.shape[0]), bm25.idf_vector(pages))


@pytest.mark.parametrize("fork", [True, False])
def test_stack_both_assembles_the_second_channel_in_a_forked_process(fork: bool, monkeypatch) -> None:
    """The build's two matrices: the second one placed by a forked process into shared
    memory (fork) or here, the same arrays as stack_csc of each, what `meanwhile` returns
    beside them, and every level's blocks let go in this process."""
    monkeypatch.setattr(row_blocks, "GROUP_ENTRIES", 16)
    channels = _channels(4)
    want = [_replaced(shapes, cols) for shapes, cols in channels]
    first, second = ((_levels(shapes), cols) for shapes, cols in channels)
    pid = os.getpid()
    placed_by: list[int] = []
    place = row_blocks._place

    def watched(*args):
        placed_by.append(os.getpid())  # (in the forked process, its own copy of the list)
        place(*args)

    monkeypatch.setattr(row_blocks, "_place", watched)
    a, b, more = stack_both(first, second, bm25.K1, bm25.B, fork=fork, meanwhile=lambda: "lines")
    _same(a, want[0])
    _same(b, want[1])
    assert more == "lines"
    assert all(not level.blocks for level, _ in (*first[0], *second[0]))
    # this process placed the first matrix, and the second too only without the fork
    assert placed_by == ([pid] if fork else [pid, pid])


def test_stack_both_places_the_second_matrix_here_when_the_forked_process_fails(monkeypatch, capfd) -> None:
    monkeypatch.setattr(row_blocks, "GROUP_ENTRIES", 16)
    channels = _channels(5)
    want = [_replaced(shapes, cols) for shapes, cols in channels]
    first, second = ((_levels(shapes), cols) for shapes, cols in channels)

    def dies(*args):
        raise MemoryError("the forked process ran out of memory")

    monkeypatch.setattr(row_blocks, "_place_in_child", dies)
    a, b, _ = stack_both(first, second, bm25.K1, bm25.B, fork=True, meanwhile=lambda: None)
    _same(a, want[0])
    _same(b, want[1])
    assert "the forked process ran out of memory" in capfd.readouterr().err


def test_stack_both_places_both_matrices_here_when_no_process_can_be_forked(monkeypatch) -> None:
    channels = _channels(6)
    want = [_replaced(shapes, cols) for shapes, cols in channels]
    first, second = ((_levels(shapes), cols) for shapes, cols in channels)

    tried: list[str] = []

    def no_fork(self) -> None:
        tried.append(self.name)
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(multiprocessing.context.ForkProcess, "start", no_fork)
    a, b, more = stack_both(first, second, bm25.K1, bm25.B, fork=True, meanwhile=lambda: 7)
    assert tried == ["guiderag-index-csc"]
    _same(a, want[0])
    _same(b, want[1])
    assert more == 7


def test_stack_csc_of_nothing() -> None:
    got = stack_csc([(RowBlocks(), True), (RowBlocks(), False)], 0, bm25.K1, bm25.B)
    want = _replaced([([], True), ([], False)], 0)
    assert got.shape == want.shape == (0, 0) and got.nnz == 0
    assert got.indptr.dtype == want.indptr.dtype and np.array_equal(got.indptr, want.indptr)


def test_rows_of_texts_are_gathered_and_made_distinct_in_the_worker() -> None:
    from guiderag.retrieval.build import _count_rows, _presence_rows

    flat = np.array([3, 1, 3, 2, 1, 4, 4], dtype=np.int32)  # texts: [3 1 3] [2 1] [4 4]
    starts = np.array([0, 3, 5, 7])
    spans = np.array([[(0, 1), (0, 0), (1, 2)], [(0, 1), (2, 3), (2, 3)], [(1, 2), (0, 0), (1, 2)]])
    ids, counts, lengths = _presence_rows(flat, starts, spans, 5)
    assert counts is None and ids.dtype == np.int32 and lengths.dtype == np.int64
    assert lengths.tolist() == [3, 3, 2]
    assert ids.tolist() == [1, 2, 3, 1, 3, 4, 1, 2]
    ids, counts, lengths = _count_rows(flat, starts, np.array([[(0, 3)], [(1, 2)], [(0, 0)]]), 5)
    assert ids.tolist() == [1, 2, 3, 4, 1, 2] and lengths.tolist() == [4, 2, 0]
    assert counts.dtype == np.float32 and counts.tolist() == [2, 1, 2, 2, 1, 1]
    # as the np.unique of each row's (row, id) keys that it replaced
    rng = np.random.default_rng(5)
    flat = rng.integers(0, 40, size=600).astype(np.int32)
    starts = np.concatenate([[0], np.sort(rng.integers(0, 600, size=59)), [600]])
    ranges = np.sort(rng.integers(0, 60, size=(80, 3, 2)), axis=2)
    ids, counts, lengths = _count_rows(flat, starts, ranges, 40)
    rows = [np.concatenate([flat[starts[a]:starts[b]] for a, b in r]) for r in ranges]
    want = [np.unique(r, return_counts=True) for r in rows]
    assert lengths.tolist() == [len(u) for u, _ in want]
    assert ids.tolist() == [int(x) for u, _ in want for x in u]
    assert counts.tolist() == [float(c) for _, n in want for c in n]


def test_the_page_structure_read_with_the_callers_headings_is_the_same() -> None:
    """segment, line_spans and line_contexts given each line's is_heading (the build reads it
    once per line for all three) answer as they do reading it themselves."""
    from guiderag.retrieval import bench
    from guiderag.retrieval.passages import body_skip, line_spans, segment
    from guiderag.store.structure import HEADING_MAX_CHARS, is_heading, line_contexts

    pages = bench.generate_corpus(30, 1).pages
    odd = ("Q1 title", "", "・item", "1. 見出し", "本文です。", "a | b", "c | d", "   ", "短い見出し", "・another")
    for lines in [p.lines for p in pages] + [odd, ()]:
        heads = [is_heading(line, HEADING_MAX_CHARS) for line in lines]
        skip = body_skip(lines[0] if lines else "", lines, HEADING_MAX_CHARS)
        assert segment(lines, 300, HEADING_MAX_CHARS, skip, heads) == segment(lines, 300, HEADING_MAX_CHARS, skip)
        assert line_spans(lines, HEADING_MAX_CHARS, skip, heads) == line_spans(lines, HEADING_MAX_CHARS, skip)
        assert line_contexts(lines, HEADING_MAX_CHARS, heads) == line_contexts(lines, HEADING_MAX_CHARS)
