"""Building the index: every page analysed once (in parallel for large corpora) into the
sparse matrices of retrieval.index and the line analyses of retrieval.lines (from the same
MeCab parse of each text), then saved by retrieval.persist."""
from __future__ import annotations

import contextlib
import gc
import multiprocessing
import multiprocessing.pool
import operator
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from guiderag.guideline import DEFAULT_GUIDELINE, GuidelineScope
from guiderag.processes import FORKS, pool_worker_signals
from guiderag.progress import QUIET, ProgressReporter
from guiderag.scopes import RetrievalConfig, StoreConfig
from guiderag.store import PageVersion

from guiderag.store import structure
from guiderag.store.structure import line_contexts

from .analyzer import Analyzer
from .bigrams import char_bigrams
from .normalize import normalize
from .answer_kinds import gives_mask, unit_mask
from .lines import LineParts, flat_text
from .text_ids import joined as _joined, text_ids as _text_ids

from . import bm25, passages
from . import passages as passage_rules
from .bm25 import idf_of
from .corpus import read_corpus, resolve_guideline
from .index import IndexData, IndexInfo, index_fingerprint, make_analyzer
from .passages import body_skip, line_spans, segment, span_range
from .persist import save_data
from .row_blocks import RowBlocks, distinct_rows, give_back, stack_both, text_rows

# Worker processes pay off only beyond this many characters of text (measured with 2
# workers: 60 pages of 2,000 characters 0.137 -> 0.123 s, 30 pages 0.071 -> 0.085 s).
_PARALLEL_MIN_CHARS = 100_000
# Pages per worker task, at most: a task's result is one message (few numpy arrays).
_CHUNK_PAGES = 64
_TEXT = operator.itemgetter(0)  # Term.text
# Texts whose analyses a process keeps while it builds (retrieval.build._WorkerState.texts).
_TEXT_CACHE = 20_000
# The size asked of the pool's result pipe (_widen_pipes).
_PIPE_BYTES = 1 << 20


# --- analysis (parallel for large corpora) ---------------------------------------------
#
# The pages are cut into chunks. Each analysing process (the main one and the forked
# workers, each with its _WorkerState) turns a chunk into sparse rows itself: every text
# (title, lines) becomes ids in the process's OWN vocabulary, then the pages, their
# passages and their line spans become blocks of (ids, counts, row lengths). Each text's
# line analysis (its terms as the answer stage reads them, in a third vocabulary of the
# process's own, its answer kinds, letters and context lines) goes along as a few arrays.
# With every chunk's result goes the vocabulary met for the first time, in id order;
# build_data maps each process's ids to global ids with one numpy take per block (_IdMap),
# taking the results in chunk order. So the MeCab and term work runs in parallel and the
# assembly costs a few numpy calls per chunk.


@dataclass
class _WorkerState:
    analyzer: Analyzer
    passage_chars: int
    heading_max_chars: int
    terms: dict[str, int]
    bigrams: dict[str, int]
    term_list: list[str]
    bigram_list: list[str]
    line_terms: dict[str, int] = field(default_factory=dict)
    line_term_list: list[str] = field(default_factory=list)
    sent_terms: int = 0
    sent_bigrams: int = 0
    sent_line_terms: int = 0
    # the analysis of each text met (a page's title is often its first line too; headings,
    # table cells and footers recur), at most _TEXT_CACHE texts
    texts: dict[str, tuple] = field(default_factory=dict)
    # a forked worker's chunks of pages (_start_worker)
    chunks: list[list[tuple[str, tuple[str, ...]]]] = field(default_factory=list)


_WORKER: _WorkerState | None = None

# rows at once: (ids, counts or None for all ones, row lengths), the rows' ids one after another
_Block = tuple[np.ndarray, np.ndarray | None, np.ndarray]


def _init_worker(analyzer: Analyzer, passage_chars: int, heading_max_chars: int) -> None:
    global _WORKER
    _WORKER = _WorkerState(analyzer, passage_chars, heading_max_chars, {}, {}, [], [])


def _start_worker(analyzer: Analyzer, passage_chars: int, heading_max_chars: int,
                  chunks: list[list[tuple[str, tuple[str, ...]]]]) -> None:
    """A forked index worker: the pool's signals (guiderag.processes), then its state and
    the chunks (inherited by a fork: a task is then only a chunk's number)."""
    pool_worker_signals()
    _init_worker(analyzer, passage_chars, heading_max_chars)
    assert _WORKER is not None
    _WORKER.chunks = chunks


def _chunk_rows_at(k: int) -> tuple:
    """`_chunk_rows` of the worker's chunk number k."""
    assert _WORKER is not None, "_start_worker was not called"
    return _chunk_rows(_WORKER.chunks[k])


def _count_rows(flat: np.ndarray, starts: np.ndarray, ranges: np.ndarray, width: int) -> _Block:
    """Count rows made of texts: row r holds the texts of its (first, stop) ranges
    ranges[r, k] ((0, 0) for none), text i's ids being flat[starts[i]:starts[i + 1]]: each
    row's ids sorted and distinct, with their counts, as np.unique of the row alone
    (retrieval.row_blocks.text_rows, distinct_rows)."""
    return distinct_rows(*text_rows(flat, starts, ranges), width)


def _presence_rows(flat: np.ndarray, starts: np.ndarray, ranges: np.ndarray, width: int) -> _Block:
    """Span rows (title, heading or none, line: text ranges, as _count_rows reads them), as
    (ids, None, row lengths): spans only record presence, so each row's ids are made
    distinct and their counts, all ones, are not sent."""
    ids, _, lengths = _count_rows(flat, starts, ranges, width)
    return ids, None, lengths


def _chunk_rows(jobs: list[tuple[str, tuple[str, ...]]]) -> tuple:
    """Rows of a chunk of pages in the worker's ids, and the worker's new vocabulary.

    Every text of the chunk (each page's title, then its lines) is analysed once; its
    terms and bigrams go to one id list each, with where each text ends, and its line
    analysis (retrieval.lines) to a few more. Then each kind of row (pages, passages, line
    spans) is counted for the whole chunk at once, and the result is one message: a few
    numpy arrays, whatever the number of pages."""
    w = _WORKER
    assert w is not None, "_init_worker was not called"
    t_parts: list = []  # each text's term ids (the worker's), text after text
    b_parts: list = []
    t_ends: list[int] = []
    b_ends: list[int] = []
    n_terms = n_grams = 0
    l_parts: list = []  # the line-term ids of the framed texts (see Analyzer.page_analysis)
    l_counts: list[int] = []
    framed_texts: list[int] = []
    gives: list[int] = []
    units: list[int] = []
    flats: list[str] = []
    contexts: list[tuple[int, ...]] = []
    # rows as text ranges (first text, stop text), (0, 0) for none: pages 1, passages and spans 3
    page_rows: list[int] = []
    passage_rows: list[int] = []
    span_rows: list[int] = []
    metas: list[list[tuple]] = []
    span_counts: list[int] = []
    analysis = w.analyzer.page_analysis
    heading_rule = passage_rules.is_heading  # (the rule segment and line_spans read, store.structure's)
    seen_texts = w.texts
    titles: list[int] = []  # each page's title's text number
    for title, lines in jobs:
        base = len(t_ends)  # the title's text number; line k is text base + k
        titles.append(base)
        for text in (title, *lines):
            done = seen_texts.get(text)
            if done is None:
                # a text's terms become ids when it is first met, in order, so the worker's
                # vocabulary grows as if the chunk's terms were numbered one after another;
                # the cache keeps the ids, not the strings (memory)
                normal = normalize(text)
                a, framed = analysis(normal)
                done = (_text_ids(list(map(_TEXT, a.terms)), w.terms, w.term_list),
                        _text_ids(char_bigrams(a.spans), w.bigrams, w.bigram_list),
                        None if framed is None else _text_ids(list(dict.fromkeys(framed)), w.line_terms,
                                                               w.line_term_list),
                        gives_mask(normal, normalized=True), unit_mask(normal, normalized=True),
                        flat_text(normal, normalized=True))
                if len(seen_texts) >= _TEXT_CACHE:
                    seen_texts.clear()
                seen_texts[text] = done
            text_terms, text_grams, framed, give, unit, flat = done
            t_parts.append(text_terms)
            b_parts.append(text_grams)
            n_terms += len(text_terms)
            n_grams += len(text_grams)
            t_ends.append(n_terms)
            b_ends.append(n_grams)
            if framed is not None:  # else its line terms are its index terms (below)
                l_parts.append(framed)
                l_counts.append(len(framed))
                framed_texts.append(len(t_ends) - 1)
            gives.append(give)
            units.append(unit)
            flats.append(flat)
        hmc = w.heading_max_chars
        headings = [heading_rule(line, hmc) for line in lines]  # read by the three below
        contexts.append(())
        contexts.extend(line_contexts(lines, hmc, headings))
        page_rows += (base, base + len(lines) + 1)
        skip = body_skip(title, lines, w.heading_max_chars)
        spans = line_spans(lines, hmc, skip, headings)
        passages = segment(lines, w.passage_chars, hmc, skip, headings)
        for heading, first, last in passages:
            passage_rows += (base, base + 1, *((base + heading, base + heading + 1) if heading else (0, 0)),
                             base + first, base + last + 1)
        for heading, line in spans:
            span_rows += (base, base + 1, *((base + heading, base + heading + 1) if heading else (0, 0)),
                          base + line, base + line + 1)
        metas.append([(heading, first, last, *span_range(spans, first, last)) for heading, first, last in passages])
        span_counts.append(len(spans))
    tflat = _joined(t_parts)
    bflat = _joined(b_parts)
    lflat = _joined(l_parts)
    del t_parts, b_parts, l_parts
    tw, bw = len(w.term_list), len(w.bigram_list)
    t_starts = np.asarray([0, *t_ends], dtype=np.int64)
    b_starts = np.asarray([0, *b_ends], dtype=np.int64)
    pages_at = np.asarray(page_rows, dtype=np.int64).reshape(-1, 1, 2)
    passages_at = np.asarray(passage_rows, dtype=np.int64).reshape(-1, 3, 2)
    spans_at = np.asarray(span_rows, dtype=np.int64).reshape(-1, 3, 2)
    blocks = [
        _count_rows(tflat, t_starts, pages_at, tw),
        _count_rows(bflat, b_starts, pages_at, bw),
        _count_rows(tflat, t_starts, passages_at, tw),
        _count_rows(bflat, b_starts, passages_at, bw),
        _presence_rows(tflat, t_starts, spans_at, tw),
        _presence_rows(bflat, b_starts, spans_at, bw),
    ]
    context = np.zeros((len(contexts), 2), dtype=np.int32)
    for i, c in enumerate(contexts):
        if c:
            context[i, : len(c)] = c
    # each title's index terms (its analysis as the index made it: retrieval.evidence reads
    # them), distinct, in the worker's term ids
    title_at = np.asarray(titles, dtype=np.int64)
    title_flat, _, title_counts = _count_rows(tflat, t_starts, np.stack([title_at, title_at + 1], axis=1), tw)
    line_ids, line_counts = _line_term_ids(tflat, t_ends, lflat, l_counts, framed_texts, tw)
    texts = (line_ids, line_counts, bytes(gives), np.asarray(units, dtype=np.uint16), context,
             np.asarray([len(f) for f in flats], dtype=np.int64), "".join(flats), title_flat, title_counts)
    result = (
        os.getpid(),
        w.sent_terms, w.term_list[w.sent_terms :],
        w.sent_bigrams, w.bigram_list[w.sent_bigrams :],
        w.sent_line_terms, w.line_term_list[w.sent_line_terms :],
        blocks, metas, span_counts, texts,
    )
    w.sent_terms, w.sent_bigrams = len(w.term_list), len(w.bigram_list)
    w.sent_line_terms = len(w.line_term_list)
    return result


def _line_term_ids(tflat: np.ndarray, t_ends: list[int], lflat: np.ndarray, l_counts: list[int],
                   framed: list[int], width: int) -> tuple[np.ndarray, np.ndarray]:
    """Each text's line terms, distinct, text after text, and how many each has. A text
    without framing words has its index terms (their term ids, >= 0); a framed one
    (`framed`, in order) its own, in `lflat` (line-term ids, sent as -1 - id)."""
    n_texts = len(t_ends)
    lengths: np.ndarray = np.diff(np.asarray([0, *t_ends], dtype=np.int64))
    own = np.ones(n_texts, dtype=bool)
    own[framed] = False
    own_ids, _, own_lengths = distinct_rows(tflat[np.repeat(own, lengths)], np.where(own, lengths, 0), width)
    texts = np.concatenate([np.repeat(np.arange(n_texts, dtype=np.int64), own_lengths),
                            np.repeat(np.asarray(framed, dtype=np.int64), np.asarray(l_counts, dtype=np.int64))])
    ids = np.concatenate([own_ids.astype(np.int64), -1 - lflat.astype(np.int64)])
    order = np.argsort(texts, kind="stable")
    return ids[order].astype(np.int32), np.bincount(texts, minlength=n_texts).astype(np.int64)


def _chunks(pages: Sequence[PageVersion], size: int) -> Iterator[list[tuple[str, tuple[str, ...]]]]:
    for start in range(0, len(pages), size):
        yield [(p.title, p.lines) for p in pages[start : start + size]]


def analyze_pages(pages: Sequence[PageVersion], config: RetrievalConfig, analyzer: Analyzer,
                  progress: ProgressReporter = QUIET, *, parallel: bool) -> Iterator[tuple]:
    """Yield `_chunk_rows` of the pages' chunks, in order. With `parallel` (build_data: big
    corpora) the work is shared by config.index_workers processes: this one takes every
    n-th chunk between assembling results, and n - 1 forked workers take the others, all
    queued at once, worker w every n-th chunk from chunk w. Each process always takes the
    same chunks, so its vocabulary, which orders each text's stored terms, is the same in
    every build (a pool of several processes handing chunks to whichever came free made
    the index differ from build to build with 3 or more).
    (Measured on 1,000 pages, 2 processes: as fast as 2 workers beside an idle main
    process, 1.29 s against 1.30 s median of 5, with one process less. Handing chunks out
    one by one was slower, 1.5 s: the pool's feeder and result threads wait for the GIL
    while this process analyses.) For the same reason a task is only a chunk's number (the
    workers have the chunks from _start_worker, by fork without a copy), and a result, about
    2 MB, goes through a pipe widened to 1 MB (_widen_pipes): at 10,000 pages the worker
    waited 41 ms between two chunks on average, and this process 35 ms, against 15 and 9
    ms after."""
    global _WORKER
    workers = config.index_workers
    # about eight chunks per process (balance), at most _CHUNK_PAGES pages (progress)
    size = max(1, min(_CHUNK_PAGES, -(-len(pages) // (8 * max(1, workers)))))
    chunks = list(_chunks(pages, size))
    init = (analyzer, passages.PASSAGE_CHARS, structure.HEADING_MAX_CHARS)
    try:
        with progress.bar(len(pages), "index") as bar:
            if parallel:
                ctx = multiprocessing.get_context("fork" if FORKS else "spawn")
                with contextlib.ExitStack() as stack:
                    theirs = {}
                    for w in range(1, workers):  # a pool of one process each: see the docstring
                        pool = stack.enter_context(ctx.Pool(1, initializer=_start_worker, initargs=(*init, chunks)))
                        _widen_pipes(pool)
                        theirs[w] = pool.imap(_chunk_rows_at, range(w, len(chunks), workers))
                    _init_worker(*init)
                    for k, chunk in enumerate(chunks):
                        result = next(theirs[k % workers]) if k % workers else _chunk_rows(chunk)
                        bar.update(len(chunk))
                        yield result
            else:
                _init_worker(*init)
                for chunk in chunks:
                    result = _chunk_rows(chunk)
                    bar.update(len(chunk))
                    yield result
    finally:
        _WORKER = None  # its vocabulary is the index's now: do not keep a second copy


def _widen_pipes(pool: multiprocessing.pool.Pool) -> None:
    """Let the pool's result pipe hold a whole chunk's result (about 2 MB for 64 pages; Linux
    allows 1 MB unprivileged, fs.pipe-max-size): with 64 kB, a worker waits for this busy
    process's result thread, which waits for the GIL, to read each 64 kB. Best effort."""
    try:
        import fcntl

        size = min(_PIPE_BYTES, int(Path("/proc/sys/fs/pipe-max-size").read_text()))
        fcntl.fcntl(pool._outqueue._reader.fileno(), fcntl.F_SETPIPE_SZ, size)  # type: ignore[attr-defined]
    except (ImportError, AttributeError, OSError, ValueError):
        pass


def _chars(pages: Sequence[PageVersion]) -> int:
    return sum(len(p.title) + sum(len(l) for l in p.lines) for p in pages)


def _in_parallel(config: RetrievalConfig, n_pages: int, chars: int) -> bool:
    """Whether the build shares its work with forked processes (config.index_workers > 1,
    pages and characters enough to pay for them)."""
    workers = config.index_workers
    return workers > 1 and n_pages >= 2 * workers and chars >= _PARALLEL_MIN_CHARS


class _IdMap:
    """A worker's ids -> global ids, grown as the worker reports new terms."""

    def __init__(self) -> None:
        self.ids = np.empty(1024, dtype=np.int32)
        self.size = 0

    def extend(self, start: int, new_terms: list[str], vocab: dict[str, int]) -> None:
        if start != self.size:
            raise RuntimeError(f"index build: worker vocabulary out of order ({start} != {self.size})")
        need = self.size + len(new_terms)
        if need > len(self.ids):
            grown = np.empty(max(need, 2 * len(self.ids)), dtype=np.int32)
            grown[: self.size] = self.ids[: self.size]
            self.ids = grown
        setdefault = vocab.setdefault
        for i, term in enumerate(new_terms):
            self.ids[self.size + i] = setdefault(term, len(vocab))
        self.size = need


def build_data(
    pages: Sequence[PageVersion], corpus_version: str, config: RetrievalConfig, analyzer: Analyzer,
    progress: ProgressReporter = QUIET,
) -> IndexData:
    """Analyse every page once and build the matrices and the line analyses in memory."""
    with _cycle_collector_paused():
        return _build_data(pages, corpus_version, config, analyzer, progress)


@contextlib.contextmanager
def _cycle_collector_paused() -> Iterator[None]:
    """Python's cycle collector off while the build runs (in its forked workers too): the
    build makes no reference cycles, and each full collection rescans every container it
    has made so far (10,000 pages in one process: 19 full collections, 3.35 s of 60.7 s
    CPU). The collector is the process's: in a server, other threads' cycles are collected
    once the build is done. Its state is restored after, also when the build fails."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _build_data(
    pages: Sequence[PageVersion], corpus_version: str, config: RetrievalConfig, analyzer: Analyzer,
    progress: ProgressReporter,
) -> IndexData:
    term_vocab: dict[str, int] = {}
    bigram_vocab: dict[str, int] = {}
    pt, pb = RowBlocks(), RowBlocks()  # passages
    gt, gb = RowBlocks(), RowBlocks()  # pages
    st, sb = RowBlocks(), RowBlocks()  # line spans
    lines = LineParts()
    span_first: list[int] = []
    span_end: list[int] = []
    passage_page: list[int] = []
    passage_heading: list[int] = []
    passage_first: list[int] = []
    passage_last: list[int] = []
    maps: dict[int, tuple[_IdMap, _IdMap, _IdMap]] = {}
    row = 0
    chars = _chars(pages)
    parallel = _in_parallel(config, len(pages), chars)
    for n_chunks, result in enumerate(analyze_pages(pages, config, analyzer, progress, parallel=parallel)):
        pid, t_start, new_terms, b_start, new_bigrams, l_start, new_lines, blocks, metas, span_counts, texts = result
        tmap, bmap, lmap = maps.setdefault(pid, (_IdMap(), _IdMap(), _IdMap()))
        tmap.extend(t_start, new_terms, term_vocab)
        bmap.extend(b_start, new_bigrams, bigram_vocab)
        lmap.extend(l_start, new_lines, lines.vocab)
        lines.add(lmap.ids, tmap.ids, texts)
        if n_chunks % 16 == 15:
            give_back()  # what the last chunks' results left free (their ids mapped to global ones)
        offset = st.n_rows
        for builder, (ids, counts, lengths), idmap in zip((gt, gb, pt, pb, st, sb), blocks, (tmap, bmap) * 3):
            builder.add(idmap.ids[ids], counts, lengths)
        for meta, n_spans in zip(metas, span_counts):
            for heading, first, last, s_lo, s_hi in meta:
                span_first.append(offset + s_lo)
                span_end.append(offset + s_hi)
                passage_page.append(row)
                passage_heading.append(heading)
                passage_first.append(first)
                passage_last.append(last)
            offset += n_spans
            row += 1
    if row != len(pages):
        raise RuntimeError(f"index build: {row} pages analysed of {len(pages)}")
    k1, b = bm25.K1, bm25.B
    nt, nb = len(term_vocab), len(bigram_vocab)
    n_spans = st.n_rows
    term_idf, bigram_idf = idf_of(gt.df(nt), gt.n_rows), idf_of(gb.df(nb), gb.n_rows)
    # the two matrices on two cores when the analysis was (the line analyses beside the first)
    terms, bigrams, line_data = stack_both(([(pt, True), (gt, True), (st, False)], nt),
                                           ([(pb, True), (gb, True), (sb, False)], nb), k1, b,
                                           fork=parallel,
                                           meanwhile=lambda: lines.data(pages, term_vocab))
    return IndexData(
        corpus_version=corpus_version,
        fingerprint=index_fingerprint(config, analyzer),
        page_keys=[(p.url, p.version, p.content_hash) for p in pages],
        term_vocab=term_vocab,
        bigram_vocab=bigram_vocab,
        term_idf=term_idf,
        bigram_idf=bigram_idf,
        passage_page=np.asarray(passage_page, dtype=np.int32),
        passage_heading=np.asarray(passage_heading, dtype=np.int32),
        passage_first=np.asarray(passage_first, dtype=np.int32),
        passage_last=np.asarray(passage_last, dtype=np.int32),
        passage_span_first=np.asarray(span_first, dtype=np.int32),
        passage_span_end=np.asarray(span_end, dtype=np.int32),
        terms=terms,
        bigrams=bigrams,
        n_spans=n_spans,
        lines=line_data,
        chars=chars,
    )


def build_index(config: RetrievalConfig, store: StoreConfig, guideline: GuidelineScope | None = None, *,
                pages: Sequence[PageVersion] | None = None, corpus_version: str | None = None,
                progress: ProgressReporter = QUIET) -> IndexInfo:
    """Build the index of one guideline's current pages (`guideline`, else the store's only
    one) and swap it in atomically under its own folder; other guidelines' indexes are not
    touched. Given `pages` and `corpus_version`, the store is not read (the default
    guideline's folder unless `guideline` names another)."""
    started = time.perf_counter()
    if pages is None or corpus_version is None:
        scope = resolve_guideline(store, guideline)
        pages, corpus_version = read_corpus(store, scope)
    else:
        scope = guideline or GuidelineScope.of(store, DEFAULT_GUIDELINE)
    analyzer = make_analyzer(config)
    data = build_data(pages, corpus_version, config, analyzer, progress)
    folder = save_data(data, scope.index_dir)
    return IndexInfo(
        path=folder,
        corpus_version=corpus_version,
        pages=data.n_pages,
        passages=data.n_passages,
        terms=len(data.term_vocab),
        bigrams=len(data.bigram_vocab),
        chars=data.chars,
        seconds=time.perf_counter() - started,
        guideline=scope.id,
    )
