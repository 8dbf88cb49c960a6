"""The retrieval index of the `ours` pipeline: fit once, saved as .npz + JSON, swapped atomically.

Layout under `settings.index_dir`:

    CURRENT                 one line: the name of the live version directory
    v-<time>-<pid>-<rand>/  manifest.json  (corpus version, fingerprint, pages, file hashes)
                            vocab.json     (term and bigram vocabularies, column order)
                            arrays.npz     (idf vectors, passage map; numpy, no pickle)
                            passages_terms.npz, passages_bigrams.npz,
                            spans_terms.npz, spans_bigrams.npz,
                            pages_terms.npz, pages_bigrams.npz  (scipy.sparse.save_npz)

A build writes a `tmp-*` directory, renames it to `v-*` and only then replaces CURRENT
(os.replace is atomic), so a reader sees the old index or the new one, never a half-built
one. Nothing is unpickled: a user who can write the index folder cannot make us run code.

Matrix values are BM25's saturated term frequency divided by (k1 + 1), so in [0, 1]; a
query score is sum(idf * weight) / sum(idf over all query terms), also in [0, 1].

Besides the passage windows the index holds one short span per body line: the page title,
the line's heading and the line. A passage's span range
(passage_span_first .. passage_span_end, exclusive) lists the spans of its lines, so the
pipeline can ask whether the question's terms meet within a couple of lines of the window
or only scattered over unrelated lines of it. Span matrices hold presence (1), not BM25
weights: a span is compared with its window by which terms it has, whatever its length.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import math
import multiprocessing
import operator
import os
import secrets
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from guiderag.errors import EmptyCorpusError, IndexCorruptError, IndexWriteError
from guiderag.progress import Progress
from guiderag.settings import Settings
from guiderag.store import PageVersion, Store
from guiderag.store.structure import is_heading, title_line

from .analyzer import Analyzer, char_bigrams
from .synonyms import load_synonyms, synonyms_path

INDEX_FORMAT = "guiderag-index/5"  # 3: line spans; 4: the title line is no body line; 5: list items are no headings
MATRICES = ("passages_terms", "passages_bigrams", "spans_terms", "spans_bigrams", "pages_terms", "pages_bigrams")
# Worker processes pay off only beyond this many characters of text (measured with 2
# workers: 60 pages of 2,000 characters 0.137 -> 0.123 s, 30 pages 0.071 -> 0.085 s).
_PARALLEL_MIN_CHARS = 100_000
# Pages per worker task, at most: a task's result is one message (few numpy arrays).
_CHUNK_PAGES = 64
_TEXT = operator.itemgetter(0)  # Term.text


@dataclass(frozen=True)
class IndexInfo:
    """What a build produced (or what was loaded)."""

    path: Path
    corpus_version: str
    pages: int
    passages: int
    terms: int
    bigrams: int
    chars: int
    seconds: float

    def describe(self) -> str:
        return (
            f"indexed {self.pages} pages ({self.passages} passages, {self.terms} terms, "
            f"{self.bigrams} bigrams, {self.chars} chars) in {self.seconds:.1f}s -> {self.path}"
        )


def make_analyzer(settings: Settings) -> Analyzer:
    """The analyzer the settings ask for (synonyms from settings.synonyms or data/synonyms.tsv)."""
    return Analyzer(synonyms=load_synonyms(synonyms_path(settings)), parts=settings.compound_parts)


def index_fingerprint(settings: Settings, analyzer: Analyzer) -> str:
    """Everything that changes the stored matrices; an index with another one is rebuilt."""
    return (
        f"{INDEX_FORMAT};{analyzer.fingerprint()};passage_chars={settings.passage_chars};"
        f"heading_max_chars={settings.heading_max_chars};k1={settings.bm25_k1};b={settings.bm25_b}"
    )


# --- passages ------------------------------------------------------------------------


def segment(
    lines: Sequence[str], passage_chars: int, heading_max_chars: int, skip: int = 0
) -> list[tuple[int, int, int]]:
    """Passages of one page as (heading line or 0, first line, last line), numbered from 1.

    A passage is a window of about `passage_chars` characters of lines under one heading;
    windows advance by about half their length, so a sentence near a window's edge is
    also seen with the lines around it. Line `skip` (the line that repeats the page title,
    which heads every passage anyway) is no body line: a passage of the title alone would
    count its words twice in a few characters and outrank the pages' text."""
    out: list[tuple[int, int, int]] = []
    heading = 0
    body: list[int] = []

    def windows() -> None:
        if not body:
            return
        lengths = [len(lines[i - 1]) for i in body]
        start = 0
        while start < len(body):
            total, end = 0, start
            while end < len(body) and (total < passage_chars or end == start):
                total += lengths[end]
                end += 1
            out.append((heading, body[start], body[end - 1]))
            if end >= len(body):
                break
            # next window starts once half of this one is behind it
            half, step = 0, start
            while step < end - 1 and half < total / 2:
                half += lengths[step]
                step += 1
            start = max(step, start + 1)

    for number, line in enumerate(lines, start=1):
        if not line.strip() or number == skip:
            continue
        if is_heading(line, heading_max_chars):
            windows()
            body = []
            heading = number
        else:
            body.append(number)
    windows()
    if not out and any(l.strip() for l in lines):
        # A page of headings only: one passage of all its lines.
        out.append((0, 1, len(lines)))
    return out


def line_spans(lines: Sequence[str], heading_max_chars: int, skip: int = 0) -> list[tuple[int, int]]:
    """One span per body line, in line order, as (heading line or 0, line), numbered from 1:
    the short context (with the page title) in which a question's terms count as said
    together. A heading line is no span of its own; it heads its section's. One line, not a
    line and its neighbour: measured better on JSQuAD's refusal trade-off and on the
    patient-worded sample set (a neighbour lets unrelated sentences pair up again). Line
    `skip` (the title repeated) is no span, as it is no body line of a passage (segment)."""
    heading = 0
    out: list[tuple[int, int]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip() or number == skip:
            continue
        if is_heading(line, heading_max_chars):
            heading = number
        else:
            out.append((heading, number))
    return out


def span_range(spans: Sequence[tuple[int, int]], first: int, last: int) -> tuple[int, int]:
    """Indexes [start, end) of the spans whose line lies in first..last (spans in line order)."""
    lines = [s[1] for s in spans]
    lo, hi = bisect.bisect_left(lines, first), bisect.bisect_right(lines, last)
    return (lo, hi) if lo < hi else (0, 0)


# --- analysis (parallel for large corpora) ---------------------------------------------
#
# The pages are cut into chunks. Each analysing process (the main one and the forked
# workers, each with its _WorkerState) turns a chunk into sparse rows itself: every text
# (title, lines) becomes ids in the process's OWN vocabulary, then the pages, their
# passages and their line spans become blocks of (ids, counts, row lengths). With every
# chunk's result goes the vocabulary met for the first time, in id order; build_data maps
# each process's ids to global ids with one numpy take per block (_IdMap), taking the
# results in chunk order. So the MeCab and term work runs in parallel and the assembly
# costs a few numpy calls per chunk.


@dataclass
class _WorkerState:
    analyzer: Analyzer
    passage_chars: int
    heading_max_chars: int
    terms: dict[str, int]
    bigrams: dict[str, int]
    term_list: list[str]
    bigram_list: list[str]
    sent_terms: int = 0
    sent_bigrams: int = 0


_WORKER: _WorkerState | None = None

# rows at once: (ids, counts or None for all ones, row lengths), the rows' ids one after another
_Block = tuple[np.ndarray, np.ndarray | None, np.ndarray]


def _init_worker(analyzer: Analyzer, passage_chars: int, heading_max_chars: int) -> None:
    global _WORKER
    _WORKER = _WorkerState(analyzer, passage_chars, heading_max_chars, {}, {}, [], [])


def _local_ids(tokens: list[str], vocab: dict[str, int], order: list[str]) -> np.ndarray:
    """Ids of `tokens` in a worker's vocabulary, new tokens appended to it and to `order`."""
    ids = list(map(vocab.get, tokens))
    i = -1
    try:
        while True:  # list.index scans in C: the Python loop only visits the new tokens
            i = ids.index(None, i + 1)
            tok = tokens[i]
            j = vocab.get(tok)
            if j is None:
                j = vocab[tok] = len(order)
                order.append(tok)
            ids[i] = j
    except ValueError:
        pass
    return np.array(ids, dtype=np.int32)


def _count_rows(flat: np.ndarray, ends: list[int], rows: list[list[tuple[int, int]]], width: int) -> _Block:
    """Count rows made of texts: row r holds the texts of its (first, stop) ranges, whose
    ids lie in `flat` up to `ends` (text i ends at ends[i]). One np.unique for all rows:
    each row's ids come out sorted with their counts, as np.unique of the row alone."""
    starts = [0, *ends]
    parts: list[np.ndarray] = []
    lengths = np.zeros(len(rows), dtype=np.int64)
    for r, ranges in enumerate(rows):
        for first, stop in ranges:
            lo, hi = starts[first], starts[stop]
            if hi > lo:
                parts.append(flat[lo:hi])
                lengths[r] += hi - lo
    if not parts:
        return np.empty(0, np.int32), np.empty(0, np.float32), np.zeros(len(rows), np.int64)
    row_of = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
    keys, counts = np.unique(row_of * width + np.concatenate(parts), return_counts=True)
    return (
        (keys % width).astype(np.int32),
        counts.astype(np.float32),
        np.bincount(keys // width, minlength=len(rows)).astype(np.int64),
    )


def _presence_rows(flat: np.ndarray, ends: list[int], rows: list[tuple[int, int, int]]) -> _Block:
    """Span rows, each (title text, heading text or -1, line text), as (all ids, None, row
    lengths): spans only record presence, so their ids stay unsorted and repeated
    (presence() merges them) and their counts, all ones, are not sent."""
    if not rows:
        return np.empty(0, np.int32), None, np.empty(0, np.int64)
    starts = [0, *ends]
    parts: list[np.ndarray] = []
    for title, heading, line in rows:
        parts.append(flat[starts[title] : starts[title + 1]])
        if heading >= 0:
            parts.append(flat[starts[heading] : starts[heading + 1]])
        parts.append(flat[starts[line] : starts[line + 1]])
    ids = np.concatenate(parts).astype(np.int32, copy=False)
    text_len = np.diff(np.asarray(starts, dtype=np.int64))
    titles, heads, lines = np.array(rows, dtype=np.int64).T
    lengths = text_len[titles] + np.where(heads >= 0, text_len[heads], 0) + text_len[lines]
    return ids, None, lengths


def _chunk_rows(jobs: list[tuple[str, tuple[str, ...]]]) -> tuple:
    """Rows of a chunk of pages in the worker's ids, and the worker's new vocabulary.

    Every text of the chunk (each page's title, then its lines) is analysed once; its
    terms and bigrams go to one id list each, with where each text ends. Then each kind
    of row (pages, passages, line spans) is counted for the whole chunk at once, and the
    result is one message: a few numpy arrays, whatever the number of pages."""
    w = _WORKER
    assert w is not None, "_init_worker was not called"
    terms: list[str] = []
    grams: list[str] = []
    t_ends: list[int] = []
    b_ends: list[int] = []
    page_rows: list[list[tuple[int, int]]] = []
    passage_rows: list[list[tuple[int, int]]] = []
    span_rows: list[tuple[int, int, int]] = []
    metas: list[list[tuple]] = []
    span_counts: list[int] = []
    analysis = w.analyzer.analysis
    for title, lines in jobs:
        base = len(t_ends)  # the title's text number; line k is text base + k
        for text in (title, *lines):
            a = analysis(text)
            terms.extend(map(_TEXT, a.terms))
            grams.extend(char_bigrams(a.spans))
            t_ends.append(len(terms))
            b_ends.append(len(grams))
        page_rows.append([(base, base + len(lines) + 1)])
        skip = title_line(title, lines)
        if skip and is_heading(lines[skip - 1], w.heading_max_chars):
            skip = 0  # a short title heads its section, as any heading does
        spans = line_spans(lines, w.heading_max_chars, skip)
        passages = segment(lines, w.passage_chars, w.heading_max_chars, skip)
        for heading, first, last in passages:
            passage_rows.append(
                [(base, base + 1), *([(base + heading, base + heading + 1)] if heading else []),
                 (base + first, base + last + 1)]
            )
        span_rows.extend((base, base + heading if heading else -1, base + line) for heading, line in spans)
        metas.append([(heading, first, last, *span_range(spans, first, last)) for heading, first, last in passages])
        span_counts.append(len(spans))
    tflat = _local_ids(terms, w.terms, w.term_list)
    bflat = _local_ids(grams, w.bigrams, w.bigram_list)
    tw, bw = len(w.term_list), len(w.bigram_list)
    blocks = [
        _count_rows(tflat, t_ends, page_rows, tw),
        _count_rows(bflat, b_ends, page_rows, bw),
        _count_rows(tflat, t_ends, passage_rows, tw),
        _count_rows(bflat, b_ends, passage_rows, bw),
        _presence_rows(tflat, t_ends, span_rows),
        _presence_rows(bflat, b_ends, span_rows),
    ]
    result = (
        os.getpid(),
        w.sent_terms, w.term_list[w.sent_terms :],
        w.sent_bigrams, w.bigram_list[w.sent_bigrams :],
        blocks, metas, span_counts,
    )
    w.sent_terms, w.sent_bigrams = len(w.term_list), len(w.bigram_list)
    return result


def _chunks(pages: Sequence[PageVersion], size: int):
    for start in range(0, len(pages), size):
        yield [(p.title, p.lines) for p in pages[start : start + size]]


def analyze_pages(pages: Sequence[PageVersion], settings: Settings, analyzer: Analyzer):
    """Yield `_chunk_rows` of the pages' chunks, in order. For big corpora the work is
    shared by settings.index_workers processes: this one takes every n-th chunk between
    assembling results, and n - 1 forked workers take the others, all queued at once.
    (Measured on 1,000 pages, 2 processes: as fast as 2 workers beside an idle main
    process, 1.29 s against 1.30 s median of 5, with one process less. Handing chunks out
    one by one was slower, 1.5 s: the pool's feeder and result threads wait for the GIL
    while this process analyses.)"""
    global _WORKER
    workers = settings.index_workers
    chars = sum(len(p.title) + sum(len(l) for l in p.lines) for p in pages)
    # about eight chunks per process (balance), at most _CHUNK_PAGES pages (progress)
    size = max(1, min(_CHUNK_PAGES, -(-len(pages) // (8 * max(1, workers)))))
    chunks = list(_chunks(pages, size))
    init = (analyzer, settings.passage_chars, settings.heading_max_chars)
    try:
        with Progress(len(pages), "index", enabled=settings.progress) as bar:
            if workers > 1 and chars >= _PARALLEL_MIN_CHARS and len(pages) >= 2 * workers:
                ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
                with ctx.Pool(workers - 1, initializer=_init_worker, initargs=init) as pool:
                    theirs = pool.imap(_chunk_rows, [c for k, c in enumerate(chunks) if k % workers])
                    _init_worker(*init)
                    for k, chunk in enumerate(chunks):
                        result = next(theirs) if k % workers else _chunk_rows(chunk)
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


class _Builder:
    """Accumulates one sparse count matrix row by row (indices need not be sorted)."""

    def __init__(self) -> None:
        self.indptr = [0]
        self.indices: list[np.ndarray] = []
        self.counts: list[np.ndarray] = []
        self.nnz = 0

    def add_block(self, ids: np.ndarray, counts: np.ndarray | None, lengths: np.ndarray) -> None:
        """Many rows at once: their ids one after another, their counts (None: all ones)
        and each row's length."""
        if len(lengths):
            self.indices.append(ids)
            self.counts.append(np.ones(len(ids), dtype=np.float32) if counts is None else counts)
            self.indptr.extend((self.nnz + np.cumsum(lengths)).tolist())
            self.nnz += int(lengths.sum())

    @property
    def rows(self) -> int:
        return len(self.indptr) - 1

    def matrix(self, ncols: int) -> sp.csr_matrix:
        indices = np.concatenate(self.indices) if self.indices else np.empty(0, np.int32)
        data = np.concatenate(self.counts) if self.counts else np.empty(0, np.float32)
        indptr = np.asarray(self.indptr, dtype=np.int64)
        m = sp.csr_matrix((data, indices, indptr), shape=(len(self.indptr) - 1, ncols))
        m.sort_indices()
        return m


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


@dataclass
class IndexData:
    """The loaded (or freshly built) index: matrices in CSC for column slicing at query time."""

    corpus_version: str
    fingerprint: str
    page_keys: list[tuple[str, int, str]]  # (url, version, content_hash), in row order
    term_vocab: dict[str, int]
    bigram_vocab: dict[str, int]
    term_idf: np.ndarray
    bigram_idf: np.ndarray
    passage_page: np.ndarray  # page row of each passage
    passage_heading: np.ndarray  # heading line (0: none)
    passage_first: np.ndarray
    passage_last: np.ndarray
    passages_terms: sp.csc_matrix
    passages_bigrams: sp.csc_matrix
    passage_span_first: np.ndarray  # the passage's spans: rows first .. end (exclusive)
    passage_span_end: np.ndarray
    spans_terms: sp.csc_matrix
    spans_bigrams: sp.csc_matrix
    pages_terms: sp.csc_matrix
    pages_bigrams: sp.csc_matrix
    path: Path | None = None
    chars: int = 0

    @property
    def n_pages(self) -> int:
        return len(self.page_keys)

    @property
    def n_passages(self) -> int:
        return len(self.passage_page)


def build_data(
    pages: Sequence[PageVersion], corpus_version: str, settings: Settings, analyzer: Analyzer
) -> IndexData:
    """Analyse every page once and build the matrices in memory."""
    term_vocab: dict[str, int] = {}
    bigram_vocab: dict[str, int] = {}
    pt, pb = _Builder(), _Builder()  # passages
    gt, gb = _Builder(), _Builder()  # pages
    st, sb = _Builder(), _Builder()  # line spans
    span_first: list[int] = []
    span_end: list[int] = []
    passage_page: list[int] = []
    passage_heading: list[int] = []
    passage_first: list[int] = []
    passage_last: list[int] = []
    maps: dict[int, tuple[_IdMap, _IdMap]] = {}
    row = 0
    for result in analyze_pages(pages, settings, analyzer):
        pid, t_start, new_terms, b_start, new_bigrams, blocks, metas, span_counts = result
        tmap, bmap = maps.setdefault(pid, (_IdMap(), _IdMap()))
        tmap.extend(t_start, new_terms, term_vocab)
        bmap.extend(b_start, new_bigrams, bigram_vocab)
        offset = st.rows
        for builder, (ids, counts, lengths), idmap in zip((gt, gb, pt, pb, st, sb), blocks, (tmap, bmap) * 3):
            builder.add_block(idmap.ids[ids], counts, lengths)
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
    chars = sum(len(p.title) + sum(len(l) for l in p.lines) for p in pages)
    k1, b = settings.bm25_k1, settings.bm25_b
    nt, nb = len(term_vocab), len(bigram_vocab)
    page_terms = gt.matrix(nt)
    page_bigrams = gb.matrix(nb)
    return IndexData(
        corpus_version=corpus_version,
        fingerprint=index_fingerprint(settings, analyzer),
        page_keys=[(p.url, p.version, p.content_hash) for p in pages],
        term_vocab=term_vocab,
        bigram_vocab=bigram_vocab,
        term_idf=idf_vector(page_terms),
        bigram_idf=idf_vector(page_bigrams),
        passage_page=np.asarray(passage_page, dtype=np.int32),
        passage_heading=np.asarray(passage_heading, dtype=np.int32),
        passage_first=np.asarray(passage_first, dtype=np.int32),
        passage_last=np.asarray(passage_last, dtype=np.int32),
        passages_terms=saturate(pt.matrix(nt), k1, b).tocsc(),
        passages_bigrams=saturate(pb.matrix(nb), k1, b).tocsc(),
        passage_span_first=np.asarray(span_first, dtype=np.int32),
        passage_span_end=np.asarray(span_end, dtype=np.int32),
        spans_terms=presence(st.matrix(nt)).tocsc(),
        spans_bigrams=presence(sb.matrix(nb)).tocsc(),
        pages_terms=saturate(page_terms, k1, b).tocsc(),
        pages_bigrams=saturate(page_bigrams, k1, b).tocsc(),
        chars=chars,
    )


# --- persistence ----------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save_data(data: IndexData, index_dir: Path) -> Path:
    """Write `data` as a new version and make it current atomically. Returns its folder."""
    index_dir = Path(index_dir)
    name = f"v-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}"
    tmp = index_dir / ("tmp-" + name)
    try:
        index_dir.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        files: dict[str, str] = {}
        for key in MATRICES:
            path = tmp / f"{key}.npz"
            sp.save_npz(path, getattr(data, key).tocsc(), compressed=False)
        np.savez(
            tmp / "arrays.npz",
            term_idf=data.term_idf,
            bigram_idf=data.bigram_idf,
            passage_page=data.passage_page,
            passage_heading=data.passage_heading,
            passage_first=data.passage_first,
            passage_last=data.passage_last,
            passage_span_first=data.passage_span_first,
            passage_span_end=data.passage_span_end,
        )
        vocab = {
            "terms": sorted(data.term_vocab, key=data.term_vocab.__getitem__),
            "bigrams": sorted(data.bigram_vocab, key=data.bigram_vocab.__getitem__),
        }
        (tmp / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        for path in sorted(tmp.iterdir()):
            files[path.name] = _sha256(path)
        manifest = {
            "format": INDEX_FORMAT,
            "corpus_version": data.corpus_version,
            "fingerprint": data.fingerprint,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "pages": [list(k) for k in data.page_keys],
            "passages": data.n_passages,
            "chars": data.chars,
            "files": files,
        }
        with open(tmp / "manifest.json", "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, ensure_ascii=False)
            fh.flush()
            os.fsync(fh.fileno())
        final = index_dir / name
        os.rename(tmp, final)
        pointer = index_dir / f"CURRENT.{name}.tmp"
        with open(pointer, "w", encoding="utf-8") as fh:
            fh.write(name + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(pointer, index_dir / "CURRENT")
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise IndexWriteError(
            f"cannot write the retrieval index under {index_dir} ({exc}); free disk space or "
            "fix permissions, then run `guiderag index`. The previous index is unchanged."
        ) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _prune(index_dir, keep=name)
    return final


def _prune(index_dir: Path, keep: str) -> None:
    """Drop old versions (keeping the newest previous one, a reader may still load it)
    and temporary folders of builds that died more than an hour ago."""
    versions = sorted(
        (p for p in index_dir.glob("v-*") if p.is_dir() and p.name != keep),
        key=lambda p: p.stat().st_mtime,
    )
    for old in versions[:-1]:
        shutil.rmtree(old, ignore_errors=True)
    for tmp in index_dir.glob("tmp-*"):
        try:
            if time.time() - tmp.stat().st_mtime > 3600:
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            pass


def _corrupt(index_dir: Path, what: str) -> IndexCorruptError:
    return IndexCorruptError(
        f"the retrieval index in {index_dir} {what}; run `guiderag index` to rebuild it "
        "(the ask command and the app rebuild it automatically)"
    )


def load_data(index_dir: Path, *, verify: bool = True) -> IndexData:
    """Load the current version; IndexCorruptError when missing, partial or damaged."""
    index_dir = Path(index_dir)
    pointer = index_dir / "CURRENT"
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise _corrupt(index_dir, "does not exist yet (no CURRENT file)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _corrupt(index_dir, f"has an unreadable CURRENT file ({exc})") from exc
    if not name.startswith("v-") or "/" in name or "\\" in name:
        raise _corrupt(index_dir, f"has a CURRENT file naming {name!r}, not an index version")
    folder = index_dir / name
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        if manifest.get("format") != INDEX_FORMAT:
            raise _corrupt(index_dir, f"has format {manifest.get('format')!r}, expected {INDEX_FORMAT}")
        files = manifest["files"]
        for fname in [f"{m}.npz" for m in MATRICES] + ["arrays.npz", "vocab.json"]:
            path = folder / fname
            if fname not in files:
                raise _corrupt(index_dir, f"lists no checksum for {fname}")
            if not path.exists():
                raise _corrupt(index_dir, f"is missing {path.name} in {folder.name}")
            if verify and _sha256(path) != files[fname]:
                raise _corrupt(index_dir, f"has a damaged file {path.name} (checksum mismatch)")
        vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        with np.load(folder / "arrays.npz", allow_pickle=False) as arrays:
            arr = {k: arrays[k] for k in arrays.files}
        mats = {m: sp.load_npz(folder / f"{m}.npz").tocsc() for m in MATRICES}
    except IndexCorruptError:
        raise
    except FileNotFoundError as exc:
        raise _corrupt(index_dir, f"is incomplete ({exc.filename} missing)") from exc
    except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise _corrupt(index_dir, f"cannot be read ({type(exc).__name__}: {exc})") from exc
    data = IndexData(
        corpus_version=manifest["corpus_version"],
        fingerprint=manifest["fingerprint"],
        page_keys=[(u, int(v), h) for u, v, h in manifest["pages"]],
        term_vocab={t: i for i, t in enumerate(vocab["terms"])},
        bigram_vocab={t: i for i, t in enumerate(vocab["bigrams"])},
        term_idf=arr["term_idf"],
        bigram_idf=arr["bigram_idf"],
        passage_page=arr["passage_page"],
        passage_heading=arr["passage_heading"],
        passage_first=arr["passage_first"],
        passage_last=arr["passage_last"],
        passage_span_first=arr["passage_span_first"],
        passage_span_end=arr["passage_span_end"],
        path=folder,
        chars=int(manifest.get("chars", 0)),
        **mats,
    )
    _check_shapes(data, index_dir)
    return data


def _check_shapes(data: IndexData, index_dir: Path) -> None:
    np_, nq = data.n_pages, data.n_passages
    nt, nb = len(data.term_vocab), len(data.bigram_vocab)
    expected = {
        "passages_terms": (nq, nt),
        "passages_bigrams": (nq, nb),
        "spans_terms": (data.spans_terms.shape[0], nt),
        "spans_bigrams": (data.spans_terms.shape[0], nb),
        "pages_terms": (np_, nt),
        "pages_bigrams": (np_, nb),
    }
    for key, shape in expected.items():
        if getattr(data, key).shape != shape:
            raise _corrupt(index_dir, f"has {key} of shape {getattr(data, key).shape}, expected {shape}")
    if data.term_idf.shape != (nt,) or data.bigram_idf.shape != (nb,):
        raise _corrupt(index_dir, "has idf vectors that do not match its vocabulary")
    if not all(len(a) == nq for a in (data.passage_heading, data.passage_first, data.passage_last)):
        raise _corrupt(index_dir, "has a passage map of inconsistent length")
    if nq and (data.passage_page.min() < 0 or data.passage_page.max() >= np_):
        raise _corrupt(index_dir, "has a passage map pointing outside its pages")
    ns = data.spans_terms.shape[0]
    first, end = data.passage_span_first, data.passage_span_end
    if len(first) != nq or len(end) != nq or (nq and (first.min() < 0 or end.max() > ns or (end < first).any())):
        raise _corrupt(index_dir, "has a passage-to-span map that does not match its spans")


# --- the public entry points ------------------------------------------------------------


def read_corpus(settings: Settings) -> tuple[list[PageVersion], str]:
    """The store's current pages and corpus version; EmptyCorpusError when there are none."""
    with Store(settings.db, create=False) as store:
        pages = store.current_pages()
        version = store.corpus_version()
    if not pages:
        raise EmptyCorpusError(
            f"the page store {settings.db} holds no content page: run `guiderag scrape TOC_URL` "
            "(or `guiderag scrape --sample`) first"
        )
    return pages, version


def build_index(settings: Settings, *, pages: Sequence[PageVersion] | None = None,
                corpus_version: str | None = None) -> IndexInfo:
    """Build the index of the store's current pages and swap it in atomically."""
    started = time.perf_counter()
    if pages is None or corpus_version is None:
        pages, corpus_version = read_corpus(settings)
    analyzer = make_analyzer(settings)
    data = build_data(pages, corpus_version, settings, analyzer)
    folder = save_data(data, settings.index_dir)
    return IndexInfo(
        path=folder,
        corpus_version=corpus_version,
        pages=data.n_pages,
        passages=data.n_passages,
        terms=len(data.term_vocab),
        bigrams=len(data.bigram_vocab),
        chars=data.chars,
        seconds=time.perf_counter() - started,
    )


def check_matches(data: IndexData, pages: Sequence[PageVersion], corpus_version: str,
                  fingerprint: str, index_dir: Path) -> None:
    """IndexCorruptError when the index was built from another corpus or configuration."""
    if data.corpus_version != corpus_version:
        raise _corrupt(index_dir, f"was built from corpus {data.corpus_version}, the store now holds {corpus_version}")
    if data.fingerprint != fingerprint:
        raise _corrupt(index_dir, "was built with other analyzer or passage settings")
    keys = [(p.url, p.version, p.content_hash) for p in pages]
    if keys != data.page_keys:
        raise _corrupt(index_dir, "lists other pages than the store")
