"""What the corpus holds of each word of a question: the retrieval side of the coverage decision.

The coverage decision (chatbot.coverage) asks, beyond a passage's score, *which* of the
question's words the guideline uses, how (the word itself, or only through an expansion:
the patient table, Sudachi's synonyms, a compound's words), how widely (on how many pages),
whether the best page and its title hold them, and how specific the words it never uses
are in general Japanese. `query_evidence(retriever, question, result)` answers that from
the index the retriever already holds: one `SlotFact` per query slot (retrieval.query),
read off the index's term matrix (a column's page rows are the pages holding the term,
retrieval.index's ROW LAYOUT) and the titles' terms stored with the index
(retrieval.lines.LineData), so it costs a few sparse column look-ups per question, no
analysis of page text.

The query is the question's own (keywords are not read: model keywords may only add
evidence, and the chatbot measures with and without them), completed, for a follow-up in a
conversation, by the terms it leans on (`result.context`, chatbot.conversation).
"""
from __future__ import annotations

import functools
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .query import lookup_forms
from .specificity import zipf
from .analyzer import tokenize
from .normalize import normalize
from .tokens import ADVERBIAL, NOUN_KINDS, Term

if TYPE_CHECKING:
    from guiderag.store import PageVersion

    from .pipeline_ours import OursRetriever
    from .result import RetrievalResult

# Words whose adverb-likeness (`_adverbial`) is kept.
ADVERBIAL_CACHE = 4096


@dataclass(frozen=True)
class SlotFact:
    """One question word and what the corpus holds of it."""

    term: str  # the analyzer's form (lemma or compound)
    surface: str  # as the question writes it
    kind: str  # the analyzer's kind: noun, proper, verb, compound, affixed, ...
    mass: float  # its weight in the question's mass (query weight times idf)
    known: bool  # some alternative (the word, a completion or an expansion) is a corpus term
    exact: bool  # the word itself, or a corpus compound it begins, is a corpus term
    zipf: float | None  # how common it is in general Japanese (None: not in wordfreq's table)
    pages: int  # pages holding its best-known alternative (0 when unknown)
    top_page: float  # the best lambda of its alternatives on the best page (0: absent)
    top_title: float  # the same in the best page's title
    expansion_only: bool  # known only through an expansion (lambda < 1)
    top_weight: float = 0.0  # lambda times its BM25-saturated frequency on the best page (how much it says it)
    adverbial: bool = False  # an adverb-like noun (先月, 来週, 最近: UniDic's 副詞可能): when, not what
    # how many of its pages hold it in their title, for a word on at most TITLE_PAGES pages
    # (-1: on more pages, not counted): a word no title names is mentioned in passing
    title_pages: int = -1
    # the lines of the best page (0: its title) holding one of its alternatives: whether two
    # words are said together there (胃を切除 in one line), not only somewhere on the page
    top_lines: tuple[int, ...] = ()


@dataclass(frozen=True)
class QueryEvidence:
    """The facts of every slot, and the pages they were read against."""

    slots: tuple[SlotFact, ...]
    n_pages: int
    top_page: int | None  # row of the best candidate page (None: no candidate)
    top_page_qa: bool  # the best page's title asks a question (a Q&A page)
    top_title: str
    top_page_terms: int = 0  # distinct terms on the best page (how long it is)
    mean_page_terms: float = 0.0  # the same, averaged over the guideline's pages
    # the question's compounds the corpus never uses whose words one line of the best page
    # says next to each other (`joined_compounds`: 胃を切除 for 胃切除)
    joined: tuple[str, ...] = ()

    @property
    def mass(self) -> float:
        return sum(s.mass for s in self.slots)


# The titles of a word's pages are read only for a word on at most this many pages.
TITLE_PAGES = 3
# Pages whose lines' terms (`_line_terms`) are kept per index.
PAGE_LINES_CACHE = 256


class _IndexCache:
    """What evidence reads of one loaded index, computed once: each page's number of
    distinct terms, its analysed title."""

    def __init__(self, retriever: OursRetriever) -> None:
        self.lock = threading.Lock()
        data = retriever.data
        pages = data.rows("pages")
        self.first, self.stop = pages.start, pages.stop  # the page rows of the term matrix
        # the term columns as the scorer reads them: where a column's page entries lie is
        # found once, for both
        self.columns = retriever.scorer.columns["terms"]
        m = data.terms
        held = m.indices[(m.indices >= self.first) & (m.indices < self.stop)]
        self.lengths = np.bincount(held - self.first, minlength=data.n_pages)
        self.mean_length = float(self.lengths.mean()) if len(self.lengths) else 0.0
        self.titles: dict[int, frozenset[str]] = {}
        self.page_lines: dict[int, dict[int, tuple[int, ...]]] = {}


_CACHES: dict[int, tuple[weakref.ref, _IndexCache]] = {}
_CACHES_LOCK = threading.Lock()


def _cache(retriever: OursRetriever) -> _IndexCache:
    """The cache of the retriever's index (keyed by the index object, dropped with it)."""
    key = id(retriever.data)
    with _CACHES_LOCK:
        held = _CACHES.get(key)
        if held is not None and held[0]() is retriever.data:
            return held[1]
        for k in [k for k, (ref, _) in _CACHES.items() if ref() is None]:
            del _CACHES[k]
        cache = _IndexCache(retriever)
        _CACHES[key] = (weakref.ref(retriever.data), cache)
        return cache


def _title_terms(retriever: OursRetriever, cache: _IndexCache, row: int) -> frozenset[str]:
    with cache.lock:
        found = cache.titles.get(row)
    if found is None:
        # the title's terms as the index analysed it (Analyzer.terms of its NFKC text)
        lines = retriever.data.lines
        ids = lines.title_ids[lines.title_ptr[row]:lines.title_ptr[row + 1]].tolist()
        found = frozenset(map(retriever.term_list.__getitem__, ids))
        with cache.lock:
            cache.titles[row] = found
    return found


def _line_terms(retriever: OursRetriever, cache: _IndexCache, row: int) -> dict[int, tuple[int, ...]]:
    """Page `row`'s lines holding each term (term id -> line numbers, 0: the title), from the
    line analyses stored with the index (retrieval.lines.LineData)."""
    with cache.lock:
        found = cache.page_lines.get(row)
    if found is None:
        lines = retriever.data.lines
        first, stop = int(lines.text_first[row]), int(lines.text_first[row + 1])
        held: dict[int, list[int]] = {}
        for number, i in enumerate(range(first, stop)):
            for t in set(lines.term_ids[lines.term_ptr[i]:lines.term_ptr[i + 1]].tolist()):
                held.setdefault(int(t), []).append(number)
        found = {t: tuple(ns) for t, ns in held.items()}
        with cache.lock:
            if len(cache.page_lines) >= PAGE_LINES_CACHE:
                cache.page_lines.clear()
            cache.page_lines[row] = found
    return found


def _page_rows(cache: _IndexCache, col: int) -> tuple[np.ndarray, np.ndarray]:
    """The pages holding column `col` (page rows, sorted) and its value on each of them."""
    columns = cache.columns
    a, b = columns.page_bounds(col)
    return columns.indices[a:b] - cache.first, columns.data[a:b]


def query_evidence(retriever: OursRetriever, question: str, result: RetrievalResult,
                   keywords: Sequence[str] = ()) -> QueryEvidence:
    """The SlotFacts of the question's query (with the keywords' known terms added, when
    there are keywords) against the corpus and the best page."""
    data = retriever.data
    vocab = data.term_vocab
    cache = _cache(retriever)
    top_row: int | None = result.candidates[0].row if result.candidates else None
    title_terms = _title_terms(retriever, cache, top_row) if top_row is not None else frozenset()
    top_lines = _line_terms(retriever, cache, top_row) if top_row is not None else {}
    base, extended = retriever.query(question, keywords, result.context)  # a follow-up as read
    query = extended or base
    facts: list[SlotFact] = []
    for slot in query.slots:
        alts = [(a, lam) for a, lam in slot.alternatives.items() if a in vocab]
        best_pages = 0
        on_top = 0.0
        in_title = 0.0
        weight = 0.0
        titled: set[int] = set()
        said: set[int] = set()
        for a, lam in alts:
            said.update(top_lines.get(vocab[a], ()))
            rows, values = _page_rows(cache, vocab[a])
            best_pages = max(best_pages, len(rows))
            if len(rows) <= TITLE_PAGES:
                titled.update(int(r) for r in rows if a in _title_terms(retriever, cache, int(r)))
            if top_row is not None and len(rows):
                i = int(np.searchsorted(rows, top_row))
                if i < len(rows) and rows[i] == top_row:
                    on_top = max(on_top, lam)
                    weight = max(weight, lam * float(values[i]))
            if a in title_terms:
                in_title = max(in_title, lam)
        exact = any(lam >= 1.0 for _, lam in alts)
        facts.append(SlotFact(
            term=slot.term, surface=slot.surface or slot.term, kind=slot.kind,
            mass=float(retriever.slot_mass(slot)), known=bool(alts), exact=exact,
            zipf=zipf(*lookup_forms(Term(slot.term, slot.surface or slot.term, slot.kind))),
            pages=best_pages, top_page=on_top, top_title=in_title,
            expansion_only=bool(alts) and not exact, top_weight=weight,
            adverbial=not alts and _adverbial(slot.surface or slot.term),
            title_pages=len(titled) if best_pages <= TITLE_PAGES else -1,
            top_lines=tuple(sorted(said)),
        ))
    qa = bool(top_row is not None and retriever._qa_pages[top_row])
    joined = joined_compounds(facts, retriever.pages[top_row]) if top_row is not None else ()
    return QueryEvidence(tuple(facts), data.n_pages, top_row, qa,
                         retriever.pages[top_row].title if top_row is not None else "",
                         int(cache.lengths[top_row]) if top_row is not None else 0, cache.mean_length,
                         joined)


# At most this many characters between two words of a compound said in a line (a particle,
# a verb's ending: 胃を切除, 胃の切除, 胃がんの再発, 局所・領域再発).
JOIN_GAP = 3


def joined_compounds(facts: Sequence[SlotFact], page: PageVersion) -> tuple[str, ...]:
    """The surfaces of the question's compounds the corpus never uses whose words (the known
    question words inside them) one line of `page` (or its title) says next to each other,
    at most JOIN_GAP characters apart, in either order (再発胃がん: 「胃がんの再発」): the
    page's own topic in other words. Where the line says them far apart (がん保険: 「がんの
    治療にかかる医療費の多くは公的医療保険の対象」), the compound is another topic in the
    guideline's words. A compound holding one known word (痔持ち, 熱っぽい: a word with an
    affix) is joined when a line of the page says that word."""
    out: list[str] = []
    for f in facts:
        if f.known or f.kind not in NOUN_KINDS or not f.surface:
            continue
        inside = compound_parts(f, facts)
        # the smallest words: those holding no other of them (胃, 切除 of 胃切除後)
        words = [g for g in inside if not any(h is not g and h.surface != g.surface and h.surface in g.surface
                                                for h in inside)]
        if not words or not all(g.known for g in words):
            continue
        common = set.intersection(*(set(g.top_lines) for g in words))
        if len(words) == 1:
            if common:
                out.append(f.surface)
            continue
        if any(_said_together(normalize(page.title if n == 0 else page.line(n)), words) for n in sorted(common)):
            out.append(f.surface)
    return tuple(out)


def compound_parts(fact: SlotFact, facts: Sequence[SlotFact]) -> list[SlotFact]:
    """The question's words inside a compound of it (胃 and 切除 of 胃切除)."""
    return [g for g in facts if g.surface and g.surface != fact.surface and g.surface in fact.surface]


def _spots(text: str, g: SlotFact) -> list[tuple[int, int]]:
    """Where `text` says the word (as the question writes it, or as the analyzer's form)."""
    found = []
    for form in dict.fromkeys((g.surface, g.term)):
        i = text.find(form) if form else -1
        while i >= 0:
            found.append((i, i + len(form)))
            i = text.find(form, i + 1)
    return found


def _said_together(text: str, words: Sequence[SlotFact]) -> bool:
    """Whether `text` holds a stretch saying every one of `words`, each no more than
    JOIN_GAP characters from the next, in any order."""
    spots = sorted((s, e, k) for k, g in enumerate(words) for s, e in _spots(text, g))
    for i, (start, end, k) in enumerate(spots):
        seen = {k}
        reach = end
        for s, e, k2 in spots[i + 1:]:
            if s - reach > JOIN_GAP:
                break
            seen.add(k2)
            reach = max(reach, e)
            if len(seen) == len(words):
                return True
    return False


@functools.lru_cache(maxsize=ADVERBIAL_CACHE)
def _adverbial(surface: str) -> bool:
    """A word MeCab reads as one adverb-like noun (先月, 来週, 途中, 最近); kept per word
    (a question's unknown words recur: one parse each)."""
    tokens = tokenize(surface)
    return len(tokens) == 1 and tokens[0].kind == ADVERBIAL


# A guideline whose pages mostly each answer one question (titles that ask) is a Q&A
# guidebook; otherwise its pages are articles. The coverage model has a fit for each form.
QA_FORM, ARTICLE_FORM = "qa", "article"
QA_FORM_SHARE = 0.5


def guideline_form(retriever: OursRetriever) -> str:
    """QA_FORM when at least QA_FORM_SHARE of the guideline's pages are Q&A pages."""
    qa = retriever._qa_pages
    return QA_FORM if len(qa) and float(qa.mean()) >= QA_FORM_SHARE else ARTICLE_FORM
