"""The analysis of every line the answer stage reads, made once, when the index is built.

The answer stage compares a question with reference lines: the evidence gate's line
coverage and extract's line scores (chatbot.extract), the kind of answer a line gives and
the figure a question asks for (chatbot.answer_type). What it reads of a line:
- its terms as a question's terms are compared with it (`Analyzer.query_terms`: lemmas,
  compounds and their parts, synonym forms, framing words no terms);
- its letters and digits, NFKC and lower-case, the source of its character bigrams;
- the kinds of answer it gives (retrieval.answer_kinds, bits);
- the lines it is read with: its heading or the sentence introducing its list, its
  table's header row (store.structure.line_contexts).
`retrieval.build` makes them in the same MeCab pass as the index's matrices
(`Analyzer.page_analysis`) and the index stores them (`LineData`); `StoredLines` reads
them for the pages of its retriever, `ComputedLines` computes the same for any other
page (the protocol pipeline has no index; a page object the index does not list).
tests/test_scorer_reference.py pins that the stored analyses equal fresh ones.
"""
from __future__ import annotations

import functools
import hashlib
import re
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

import numpy as np

from guiderag.store import PageVersion, structure
from guiderag.store.structure import HEADING_MAX_CHARS

from . import answer_kinds, framing
from .normalize import normalize

# Bumped when what is stored for a line changes (the index fingerprint holds it).
LINES_VERSION = "3"  # 2: the titles' index terms, the odds bit; 3: the units of figures
# Analyses of lines kept by ComputedLines (the same reference lines recur across questions).
COMPUTED_CACHE = 8192
# Term sets of stored lines kept as Python sets (built from the stored ids on first use), and
# the lines read lately, at most this many of each.
STORED_CACHE = 65536

# What str.isalnum() keeps: \w is a letter, a digit or "_" (the same Unicode test).
_NOT_ALNUM = re.compile(r"[\W_]+")


def flat_text(text: str, *, normalized: bool = False) -> str:
    """The letters and digits of a line, NFKC and lower-case: its character bigrams are
    the pairs of neighbours (`normalized`: the text is NFKC already)."""
    return _NOT_ALNUM.sub("", (text if normalized else normalize(text)).lower())


def rules_fingerprint() -> str:
    """Everything besides the analyzer that shapes the stored line analyses: the framing
    words, the answer kinds' patterns, how far up a line's context is looked for."""
    words = "|".join(sorted(framing.FRAMING_WORDS)) + "#" + "|".join(sorted(framing.COUNTERS))
    digest = hashlib.sha256(words.encode("utf-8")).hexdigest()[:12]
    return (f"lines={LINES_VERSION};framing={digest};kinds={answer_kinds.RULES_DIGEST};"
            f"lookback={structure.CONTEXT_LOOKBACK}")


class LineView(NamedTuple):
    """What the answer stage reads of one line (or of a page's title)."""

    terms: frozenset[str]
    flat: str  # letters and digits (flat_text)
    gives: int  # the kinds of answer it gives (retrieval.answer_kinds bits)
    context: tuple[int, ...]  # the lines it is read with: context line, table header


@dataclass
class LineData:
    """The stored analyses of every text of an index's pages: page row r's texts are
    text_first[r] (its title) .. text_first[r + 1] - 1 (its lines, in order)."""

    text_first: np.ndarray  # int64, pages + 1
    term_ptr: np.ndarray  # int64, texts + 1: the term ids of text i are term_ids[term_ptr[i]:term_ptr[i + 1]]
    term_ids: np.ndarray  # int32: the index's term ids, then len(vocabulary) + k for extra_terms[k]
    extra_terms: list[str]  # line terms the index's vocabulary does not hold (framing re-joins words)
    gives: np.ndarray  # uint8, texts
    units: np.ndarray  # uint16, texts: the units it gives figures in (retrieval.answer_kinds.UNIT_BITS)
    context: np.ndarray  # int32, (texts, 2): the lines a line is read with, 0 for none
    flat_ptr: np.ndarray  # int64, texts + 1: text i's letters and digits are flat[flat_ptr[i]:flat_ptr[i + 1]]
    flat: str
    # each page's title's terms as the index analysed it (Analyzer.terms, framing words
    # kept: retrieval.evidence compares query alternatives with them): page r's are
    # title_ids[title_ptr[r]:title_ptr[r + 1]], index term ids
    title_ptr: np.ndarray  # int64, pages + 1
    title_ids: np.ndarray  # int32
    heading_max_chars: int = HEADING_MAX_CHARS

    ARRAYS = ("text_first", "term_ptr", "term_ids", "gives", "units", "context", "flat_ptr", "title_ptr", "title_ids")

    @property
    def n_texts(self) -> int:
        return len(self.gives)

    def problem(self, n_pages: int, n_terms: int) -> str | None:
        """What is inconsistent about the arrays (None when they fit an index of `n_pages`
        pages and `n_terms` terms)."""
        n = self.n_texts
        if len(self.text_first) != n_pages + 1 or (n_pages and (self.text_first[0] != 0 or self.text_first[-1] != n)):
            return "line analyses that do not match its pages"
        if np.any(np.diff(self.text_first) < 1):
            return "line analyses with a page without its title"
        if len(self.term_ptr) != n + 1 or self.term_ptr[-1] != len(self.term_ids) or np.any(np.diff(self.term_ptr) < 0):
            return "line terms of inconsistent length"
        if len(self.term_ids) and (self.term_ids.min() < 0 or self.term_ids.max() >= n_terms + len(self.extra_terms)):
            return "line terms outside its vocabulary"
        if self.context.shape != (n, 2) or len(self.units) != n or len(self.flat_ptr) != n + 1 or self.flat_ptr[-1] != len(self.flat):
            return "line contexts or letters of inconsistent length"
        if (len(self.title_ptr) != n_pages + 1 or self.title_ptr[-1] != len(self.title_ids)
                or np.any(np.diff(self.title_ptr) < 0)
                or (len(self.title_ids) and (self.title_ids.min() < 0 or self.title_ids.max() >= n_terms))):
            return "title terms that do not match its pages or vocabulary"
        return None


class LineAnalyses(ABC):
    """The analyses of the lines of pages (line 0: the page's title), as the answer stage reads them."""

    heading_max_chars: int = HEADING_MAX_CHARS

    @abstractmethod
    def line(self, page: PageVersion, number: int) -> LineView:
        """Line `number` of `page` (0: its title)."""

    @abstractmethod
    def terms(self, page: PageVersion, number: int) -> frozenset[str]:
        """The terms of line `number` of `page` (0: its title)."""

    @abstractmethod
    def page_gives(self, page: PageVersion, *, title: bool = False) -> int:
        """The kinds of answer any line of the page gives (bits); `title`: its title too."""

    @abstractmethod
    def page_units(self, page: PageVersion, *, title: bool = False) -> int:
        """The units any line of the page gives a figure in (bits); `title`: its title too."""


class ComputedLines(LineAnalyses):
    """Line analyses computed when asked, by `analyze` (the retriever's view of a text's
    terms), kept in a thread-safe cache of COMPUTED_CACHE texts."""

    def __init__(self, analyze: Callable[[str], Sequence[str]], heading_max_chars: int = HEADING_MAX_CHARS) -> None:
        self.heading_max_chars = heading_max_chars
        self._terms = functools.lru_cache(maxsize=COMPUTED_CACHE)(
            lambda text: frozenset(analyze(normalize(text))))

    def terms(self, page: PageVersion, number: int) -> frozenset[str]:
        return self._terms(page.title if number == 0 else page.line(number))

    def line(self, page: PageVersion, number: int) -> LineView:
        context: tuple[int, ...] = ()
        if number == 0:
            text = page.title
        else:
            text = page.line(number)
            context = _context(page.lines, number, self.heading_max_chars)
        return LineView(self._terms(text), flat_text(text), answer_kinds.gives_mask(text), context)

    def page_units(self, page: PageVersion, *, title: bool = False) -> int:
        out = answer_kinds.unit_mask(page.title) if title else 0
        for text in page.lines:
            out |= answer_kinds.unit_mask(text)
        return out

    def page_gives(self, page: PageVersion, *, title: bool = False) -> int:
        out = answer_kinds.gives_mask(page.title) if title else 0
        for text in page.lines:
            out |= answer_kinds.gives_mask(text)
        return out


def _context(lines: Sequence[str], number: int, heading_max_chars: int) -> tuple[int, ...]:
    """The lines line `number` is read with, as store.structure.line_contexts gives them."""
    context = structure.context_line(lines, number, heading_max_chars)
    header = structure.table_header(lines, number)
    return tuple(n for n in (context, header if header != context else None) if n)


class StoredLines(LineAnalyses):
    """The stored analyses of an index's pages (`pages`: the retriever's, in index row
    order); a page object it does not list is analysed by `fallback`."""

    def __init__(self, data: LineData, pages: Sequence[PageVersion], terms: Sequence[str],
                 fallback: LineAnalyses) -> None:
        self.data = data
        self.heading_max_chars = data.heading_max_chars
        self._pages = list(pages)
        self._rows = {id(p): r for r, p in enumerate(self._pages)}
        self._first = data.text_first.tolist()
        self._vocab = [*terms, *data.extra_terms]
        self._fallback = fallback
        self._sets: dict[int, frozenset[str]] = {}
        self._views: dict[int, LineView] = {}  # the lines read lately (as _sets: at most STORED_CACHE)
        self._page_masks: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def _text(self, page: PageVersion, number: int) -> int | None:
        """The stored text of line `number` of `page`, None for a page it does not list."""
        row = self._rows.get(id(page))
        if row is None or self._pages[row] is not page:
            return None
        return self._first[row] + number

    def _term_set(self, i: int) -> frozenset[str]:
        found = self._sets.get(i)
        if found is None:
            d = self.data
            ids = d.term_ids[d.term_ptr[i]:d.term_ptr[i + 1]].tolist()
            found = frozenset(map(self._vocab.__getitem__, ids))
            if len(self._sets) >= STORED_CACHE:
                self._sets.clear()
            self._sets[i] = found
        return found

    def terms(self, page: PageVersion, number: int) -> frozenset[str]:
        i = self._text(page, number)
        return self._fallback.terms(page, number) if i is None else self._term_set(i)

    def line(self, page: PageVersion, number: int) -> LineView:
        i = self._text(page, number)
        if i is None:
            return self._fallback.line(page, number)
        view = self._views.get(i)
        if view is None:
            d = self.data
            a, b = d.context[i].tolist()
            context = (a, b) if b else (a,) if a else ()
            view = LineView(self._term_set(i), d.flat[int(d.flat_ptr[i]):int(d.flat_ptr[i + 1])], int(d.gives[i]),
                            context)
            if len(self._views) >= STORED_CACHE:
                self._views.clear()
            self._views[i] = view
        return view

    def page_gives(self, page: PageVersion, *, title: bool = False) -> int:
        row = self._rows.get(id(page))
        if row is None or self._pages[row] is not page:
            return self._fallback.page_gives(page, title=title)
        return self._page_mask("gives", self.data.gives, row, title)

    def page_units(self, page: PageVersion, *, title: bool = False) -> int:
        row = self._rows.get(id(page))
        if row is None or self._pages[row] is not page:
            return self._fallback.page_units(page, title=title)
        return self._page_mask("units", self.data.units, row, title)

    def _page_mask(self, kind: str, masks: np.ndarray, row: int, title: bool) -> int:
        """Page `row`'s OR of the per-line `masks` (LineData.gives or .units, named `kind`),
        the title line's too when `title`; each kind's page masks made once, on first use."""
        pages = self._page_masks.get(kind)
        if pages is None:
            with self._lock:
                pages = self._page_masks.get(kind)
                if pages is None:
                    pages = self._page_masks[kind] = page_masks(self.data, masks)
        lines = pages[row]
        return lines | int(masks[self._first[row]]) if title else lines


def page_masks(data: LineData, masks: np.ndarray | None = None) -> list[int]:
    """The kinds of answer each page's lines give (its title left out), OR-ed; `masks`:
    another per-text mask instead (the units)."""
    first = data.text_first
    if len(first) < 2:
        return []
    gives = data.gives if masks is None else masks
    # one reduceat over the lines (the titles' entries zeroed); a page of no lines gives 0
    lines = gives.copy()
    lines[first[:-1]] = 0
    out = np.bitwise_or.reduceat(lines, first[:-1]) if len(lines) else np.zeros(len(first) - 1, gives.dtype)
    return [int(m) for m in out]


class LineParts:
    """The line analyses of an index build's chunks (retrieval.build), in order, their terms
    in global line-term ids."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.ids: list[np.ndarray] = []
        self.counts: list[np.ndarray] = []
        self.gives: list[bytes] = []
        self.units: list[np.ndarray] = []
        self.context: list[np.ndarray] = []
        self.flat_lens: list[np.ndarray] = []
        self.flats: list[str] = []
        self.title_ids: list[np.ndarray] = []  # global term ids
        self.title_counts: list[np.ndarray] = []

    def add(self, idmap: np.ndarray, term_map: np.ndarray, texts: tuple) -> None:
        """One chunk's line analyses (build._chunk_rows's `texts`); `idmap`, `term_map`: its
        worker's line-term and term ids to global ones."""
        ids, counts, gives, units, context, flat_lens, flat, title_ids, title_counts = texts
        self.units.append(units)
        self.title_ids.append(term_map[title_ids] if len(title_ids) else np.empty(0, np.int32))
        self.title_counts.append(title_counts)
        # index term ids as global term ids, line-term ids (sent as -1 - id) as -1 - global ones
        self.ids.append(np.where(ids >= 0, term_map[np.maximum(ids, 0)], -1 - idmap[np.maximum(-1 - ids, 0)]).astype(np.int32))
        self.counts.append(counts)
        self.gives.append(gives)
        self.context.append(context)
        self.flat_lens.append(flat_lens)
        self.flats.append(flat)

    def data(self, pages: Sequence[PageVersion], term_vocab: dict[str, int]) -> LineData:
        """The LineData: a line term the index's vocabulary holds is named by its term id,
        any other by len(vocabulary) + its place among the extra terms."""
        nt = len(term_vocab)
        extra: list[str] = []
        remap = np.empty(len(self.vocab), dtype=np.int32)
        for term, i in self.vocab.items():
            j = term_vocab.get(term)
            if j is None:
                j = nt + len(extra)
                extra.append(term)
            remap[i] = j
        ids = np.concatenate(self.ids) if self.ids else np.empty(0, np.int64)
        counts = np.concatenate(self.counts) if self.counts else np.empty(0, np.int64)
        flat_lens = np.concatenate(self.flat_lens) if self.flat_lens else np.empty(0, np.int64)
        title_counts = np.concatenate(self.title_counts) if self.title_counts else np.empty(0, np.int64)
        sizes = np.asarray([1 + len(p.lines) for p in pages], dtype=np.int64)
        return LineData(
            text_first=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            term_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            term_ids=(np.where(ids >= 0, ids, remap[np.maximum(-1 - ids, 0)] if len(remap) else 0).astype(np.int32)
                      if len(ids) else ids.astype(np.int32)),
            extra_terms=extra,
            gives=np.frombuffer(b"".join(self.gives), dtype=np.uint8).copy(),
            units=np.concatenate(self.units) if self.units else np.empty(0, np.uint16),
            context=np.concatenate(self.context) if self.context else np.zeros((0, 2), np.int32),
            flat_ptr=np.concatenate([[0], np.cumsum(flat_lens)]).astype(np.int64),
            flat="".join(self.flats),
            title_ptr=np.concatenate([[0], np.cumsum(title_counts)]).astype(np.int64),
            title_ids=(np.concatenate(self.title_ids) if self.title_ids else np.empty(0)).astype(np.int32),
            heading_max_chars=HEADING_MAX_CHARS,
        )
