"""The retrieval index of the `ours` pipeline: what it holds (IndexData) and what makes it stale.

Built once per corpus version (retrieval.build), saved as .npz + JSON and swapped in
atomically (retrieval.persist). Layout under the guideline's `GuidelineScope.index_dir`:

    CURRENT                 one line: the name of the live version directory
    v-<time>-<pid>-<rand>/  manifest.json  (corpus version, fingerprint, pages, file hashes)
                            vocab.json     (term and bigram vocabularies, column order; the
                                            line terms outside them)
                            arrays.npz     (idf vectors, passage map, row counts; numpy, no pickle)
                            terms.npz, bigrams.npz  (scipy.sparse.save_npz, CSC: ROW LAYOUT)
                            lines.npz, lines.txt    (every line's analysis: retrieval.lines)

ROW LAYOUT of a channel's matrix (terms: MeCab terms; bigrams: character bigrams): the
passages first (n_passages rows), then the pages (n_pages: title and every line), then
the line spans (n_spans), so that a query's columns are one slice and one product for all
three (retrieval.scoring). Passage and page values are BM25's saturated term frequency
divided by (k1 + 1), so in [0, 1] (retrieval.bm25).

Besides the passage windows the index holds one short span per body line: the page title,
the line's heading and the line. A passage's span range
(passage_span_first .. passage_span_end, exclusive) lists the spans of its lines, so the
pipeline can ask whether the question's terms meet within a couple of lines of the window
or only scattered over unrelated lines of it. Span rows hold presence (1), not BM25
weights: a span is compared with its window by which terms it has, whatever its length.

The line analyses (retrieval.lines.LineData) are what the answer stage reads of each line
of a reference: they are made by the same MeCab pass as the matrices.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from guiderag.scopes import RetrievalConfig

from guiderag.store import structure

from . import bm25, passages
from .analyzer import Analyzer
from .lines import LineData, rules_fingerprint
from .synonyms import load_synonyms, synonyms_path

# 3: line spans; 4: the title line is no body line; 5: list items are no headings; 6: nor
# table rows; 7: one matrix per channel (ROW LAYOUT) and every line's analysis stored
INDEX_FORMAT = "guiderag-index/7"
MATRICES = ("terms", "bigrams")


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
    guideline: str = ""

    def describe(self) -> str:
        of = f" of guideline {self.guideline}" if self.guideline not in ("", "default") else ""
        return (
            f"indexed {self.pages} pages{of} ({self.passages} passages, {self.terms} terms, "
            f"{self.bigrams} bigrams, {self.chars} chars) in {self.seconds:.1f}s -> {self.path}"
        )


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
    passage_page: np.ndarray  # page row of each passage (non-decreasing: a page's passages are a run)
    passage_heading: np.ndarray  # heading line (0: none)
    passage_first: np.ndarray
    passage_last: np.ndarray
    passage_span_first: np.ndarray  # the passage's spans: rows first .. end (exclusive)
    passage_span_end: np.ndarray
    terms: sp.csc_matrix  # ROW LAYOUT, columns: term_vocab
    bigrams: sp.csc_matrix  # ROW LAYOUT, columns: bigram_vocab
    n_spans: int
    lines: LineData
    path: Path | None = None
    chars: int = 0

    @property
    def n_pages(self) -> int:
        return len(self.page_keys)

    @property
    def n_passages(self) -> int:
        return len(self.passage_page)

    def rows(self, level: str) -> slice:
        """The rows of one level of the ROW LAYOUT: "passages", "pages" or "spans"."""
        nq, np_ = self.n_passages, self.n_pages
        return {"passages": slice(0, nq), "pages": slice(nq, nq + np_),
                "spans": slice(nq + np_, nq + np_ + self.n_spans)}[level]

    def level(self, channel: str, level: str) -> sp.csr_matrix:
        """One level's rows of one channel's matrix ("terms" or "bigrams"), as CSR: for
        reading and tests (scoring slices the whole matrix)."""
        return {"terms": self.terms, "bigrams": self.bigrams}[channel].tocsr()[self.rows(level)]


def make_analyzer(config: RetrievalConfig) -> Analyzer:
    """The analyzer the config asks for (synonyms from config.synonyms or data/synonyms.tsv);
    it also emits the words inside a compound (胸腺腫 -> 胸, 腺腫: Analyzer.parts), always."""
    return Analyzer(synonyms=load_synonyms(synonyms_path(config)))


def index_fingerprint(config: RetrievalConfig, analyzer: Analyzer) -> str:
    """Everything that changes what is stored; an index with another one is rebuilt."""
    return (
        f"{INDEX_FORMAT};{analyzer.fingerprint()};passage_chars={passages.PASSAGE_CHARS};"
        f"heading_max_chars={structure.HEADING_MAX_CHARS};k1={bm25.K1};b={bm25.B};{rules_fingerprint()}"
    )
