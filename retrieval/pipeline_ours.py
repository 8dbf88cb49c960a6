"""The default pipeline: passages scored with BM25 weights fitted once at index time.

The score of a passage (a window of lines under its heading, headed by its page's title)
is the share of the question's idf mass it holds, with a proximity factor and a Q&A page's
share mixed in: the formula is retrieval.scoring's. The threshold: a passage of a Q&A page
clears threshold ** config.qa_threshold_exponent (0.16 for 0.2; measured on the
patient-worded sets), any other passage the threshold.

Keywords (a model's terms) may only add evidence: the question is scored alone and with
the keywords' slots that the corpus knows added, and each passage keeps the better score
(a keyword found nowhere is left out and listed in the notes).

A follow-up in a conversation (chatbot.conversation) is searched as completed by the terms
it leans on (`context`): the question's slots and the context terms' known slots are one
query, the question as read; keywords then add to it as above. A carried term the question
does not say itself weighs CARRIED_WEIGHT of a word of its own (its slot and its bigrams):
the earlier topic tells pages apart among those the follow-up's own words find, it does not
outweigh them (with full weight, five carried terms drag a question with a topic of its own
back to the earlier page). A question searched without context is scored exactly as before.

The reference takes the best passages above their threshold, best first, as whole lines
(with the heading line of their section), never the same line twice, until
config.reference_chars characters.
"""
from __future__ import annotations

import functools
import sys
from itertools import chain, repeat
from typing import Sequence

import numpy as np

from guiderag.guideline import DEFAULT_GUIDELINE
from guiderag.scopes import OURS, RetrievalConfig
from guiderag.store import PageVersion

from .analyzer import Analyzer
from .bm25 import unseen_idf
from .expansion import load_patient_table, load_synonym_dict
from .index import IndexData
from .keywords import KEYWORD_COUNT, clean_keywords, highest_idf_nouns
from .lines import ComputedLines, StoredLines
from .passages import is_question_title
from .query import PARTS_JOIN, Parsed, Query, QueryBuilder, Slot, parse_query
from .slots import copied
from .top import Ranking, best_runs
from .result import Candidate, Passage, RetrievalResult
from . import scoring, topic
from .retriever import Retriever, Slots
from .hits import Hits
from .scoring import PassageScorer, PerPassage

# At most this many passages above the threshold are considered for the reference.
MAX_PASSAGES_CONSIDERED = 200
# a named tuple made from a tuple of its fields, without its Python-level __new__
_NEW = tuple.__new__
_CHUNK = 32  # passages the reference reads at a time (it fills its budget from about 25)
# Question texts (and keywords) whose parse a retriever keeps (OursRetriever.parse).
PARSED_KEPT = 512
# The query weight of a carried term (a follow-up's context) against a word of its own.
# Measured (issue 21, devbench --suite conversation, all four sets): 1.0 dragged topic
# switches back (gastric topic_switch gold 0.800, alone 0.933); 0.5 reads them as alone
# (0.933) and follow-ups as well or better on every set; 0.3 loses follow-ups that need the
# topic to find their page.
CARRIED_WEIGHT = 0.5


class OursRetriever(Retriever):
    """Search over a fitted IndexData; a query is an analysis plus sparse column sums."""

    pipeline = OURS

    def __init__(self, config: RetrievalConfig, pages: Sequence[PageVersion], data: IndexData, analyzer: Analyzer, *,
                 guideline: str = DEFAULT_GUIDELINE) -> None:
        super().__init__(config, pages, data.corpus_version, guideline=guideline)
        self.data = data
        self.analyzer = analyzer
        self._unseen = unseen_idf(data.n_pages)
        self._unseen_query = self._unseen * scoring.UNKNOWN_TERM_WEIGHT
        self._builder: QueryBuilder | None = None
        self._parsed = functools.lru_cache(maxsize=PARSED_KEPT)(functools.partial(parse_query, analyzer))
        self._queries = functools.lru_cache(maxsize=PARSED_KEPT)(self._query)
        # a question's own query, read by every (keywords, context) of it (see _query)
        self._bases = functools.lru_cache(maxsize=PARSED_KEPT)(lambda question: self.builder.build([question]))
        # pages whose title is a question: the whole page answers it (config.qa_page_weight)
        self._qa_pages = np.asarray([is_question_title(p.title) for p in pages], dtype=bool)
        self.scorer = PassageScorer(config, data, self._unseen_query, self._qa_pages)
        # every line's analysis, made with the index (retrieval.lines)
        self.term_list = sorted(data.term_vocab, key=data.term_vocab.__getitem__)  # the terms by column
        self._lines = StoredLines(data.lines, self.pages, self.term_list, ComputedLines(self.analyze))
        self._threshold_of: PerPassage | None = None  # each passage's (see _thresholds)
        # each page's line lengths, -1 for a blank line: what the reference pays for a line
        self._lengths = [tuple(len(line) if line.strip() else -1 for line in page.lines) for page in self.pages]
        # each passage's (page, first line, last line, heading line), as Python numbers: the
        # reference reads a few dozen passages of the best 200, cheaper one by one than gathered
        self._passage_at = list(zip(data.passage_page.tolist(), data.passage_first.tolist(),
                                    data.passage_last.tolist(), data.passage_heading.tolist()))
        self._urls = [p.url for p in self.pages]  # a Candidate's first fields, by page
        self._titles = [p.title for p in self.pages]
        # each page's shortest line that is not blank: a budget left below it takes no line of the page
        self._shortest = [min((n for n in lengths if n >= 0), default=sys.maxsize) for lengths in self._lengths]

    # -- helpers for other stages ---------------------------------------------------
    def idf(self, term: str) -> float:
        j = self.data.term_vocab.get(term)
        return float(self.data.term_idf[j]) if j is not None else self._unseen

    def analyze(self, text: str) -> list[str]:
        """Terms of a question (or of a line compared with one), framing words dropped:
        the chatbot's evidence gate and line choice then weigh topic words only."""
        return self.analyzer.query_terms(text)

    def parse(self, text: str) -> Parsed:
        """A question text's query tokens and analysis (retrieval.query.parse_query), kept
        for the last PARSED_KEPT texts: one ask parses its question once, for its offline
        keywords, its query and anything asked of them later."""
        return self._parsed(text)

    def offline_keywords(self, question: str, k: int | None = None) -> list[str]:
        k = KEYWORD_COUNT if k is None else k
        return highest_idf_nouns(
            self.parse(question)[1].terms, self.idf, k, known=self.data.term_vocab.__contains__
        )

    def warm(self) -> None:
        """The query builder with the patient table and Sudachi's synonyms, and the tables it
        reads on first use (QueryBuilder.warm): a first question reads them otherwise
        (about 0.35 s on the sample)."""
        self.builder.warm()

    @property
    def builder(self) -> QueryBuilder:
        """The query builder (its resources are read on first use)."""
        if self._builder is None:
            self._builder = QueryBuilder(
                self.config, self.analyzer, self.data.term_vocab, self.idf,
                load_patient_table(self.config, self.analyzer), load_synonym_dict(self.config),
                parse=self.parse,
            )
        return self._builder

    def query(self, question: str, keywords: Sequence[str] = (), context: Sequence[str] = ()
              ) -> tuple[Query, Query | None]:
        """The question's query (completed by the `context` terms' known slots: a follow-up
        as read), and the query with the keywords' known terms added (None when the
        keywords add no slot): keywords may only add evidence (see `scores`). Kept for the
        last PARSED_KEPT (question, keywords, context): one ask's search, evidence gate,
        coverage decision and answer read the same queries (never changed once built)."""
        return self._queries(question, tuple(keywords), tuple(context))

    def _query(self, question: str, given: tuple[str, ...], around: tuple[str, ...]) -> tuple[Query, Query | None]:
        context, keywords = clean_keywords(around), clean_keywords(given)
        if not context and not keywords:
            return self._bases(question), None
        # building on a query shares its slots (a keyword's or a context term's may raise
        # their weight or add alternatives): a copy of the question's own, as if built anew
        base = copied(self._bases(question))
        if context:
            own = ({s.term: s.weight for s in base.slots}, dict(base.bigrams))
            base = _carried(own, self.builder.build(context, known_only=True, base=base))
        if not keywords:
            return base, None
        extended = self.builder.build(keywords, known_only=True, base=base)
        if {s.term for s in extended.slots} == {s.term for s in base.slots} and extended.bigrams == base.bigrams:
            return base, None
        return base, extended

    def topic_terms(self, text: str, k: int) -> list[topic.TopicTerm]:
        """What `text` is about, as this guideline's words (retrieval.topic)."""
        # the question's query tokens from its kept parse (`parse`): no second MeCab pass
        return topic.topic_terms(self.builder.build([text]), list(self.parse(text)[0]), self.slot_mass, k)

    def slot_mass(self, slot: Slot) -> float:
        """q * idf of a slot (retrieval.scoring.PassageScorer.slot_mass)."""
        return self.scorer.slot_mass(slot)

    def query_weights(self, question: str, keywords: Sequence[str] = ()) -> dict[str, float]:
        """Each query slot's weight in the refusal signal's denominator (retrieval.query):
        query weight times idf. The chatbot's evidence gate weighs with the same numbers,
        so a conjugated verb the guideline never uses (払える) counts there no more than
        it does here."""
        base, extended = self.query(question, keywords)
        return {s.term: self.slot_mass(s) for s in (extended or base).slots}

    def query_slots(self, question: str, keywords: Sequence[str] = (), context: Sequence[str] = ()) -> list[Slots]:
        """The evidence gate's view of the query: (mass, alternatives) per slot, for the
        question alone (completed by `context`) and (when they add anything) with the keywords."""
        return self._slots(*self.query(question, keywords, context))

    def _slots(self, base: Query, extended: Query | None) -> list[Slots]:
        return [[(self.slot_mass(s), dict(s.alternatives)) for s in q.slots] for q in (base, extended) if q is not None]

    # -- scoring --------------------------------------------------------------------
    def scores(self, question: str, keywords: Sequence[str] = ()) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
        """(passage scores, page scores, query terms, unknown terms) for a query. With
        keywords, each passage keeps the better of its scores without and with them: a
        keyword may only add evidence, never lower a score."""
        base, extended = self.query(question, keywords)
        passage, page, unknown = self.query_scores(base)
        terms = base.terms
        if extended is not None:
            passage2, page2, _ = self.query_scores(extended)
            passage, page = np.maximum(passage, passage2), np.maximum(page, page2)
            terms = extended.terms
        return passage, page, terms, unknown

    def query_scores(self, query: Query) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(passage scores, page scores, unknown terms) of one Query (retrieval.scoring),
        every passage's and page's."""
        return self.scorer.query_scores(query)

    def search(self, question: str, keywords: Sequence[str] | None = None, *,
               context: Sequence[str] = ()) -> RetrievalResult:
        question = question or ""
        keywords = self.offline_keywords(question) if keywords is None else clean_keywords(keywords)
        context = clean_keywords(context)
        if not question.strip() and not keywords:
            return self.empty_result(question, keywords, "empty question: nothing to search for")
        base, extended = self.query(question, keywords, context)
        hits = self._hits(base)
        unknown = hits.unknown
        query_terms = base.terms
        if extended is not None:  # keywords may only add evidence (see `scores`)
            hits = hits.better(self._hits(extended), self.data.n_passages)
            query_terms = extended.terms
        if not query_terms:
            return self.empty_result(
                question, keywords,
                "the question has no words the analyzer can search for (no Japanese nouns, "
                "verbs or alphanumeric terms): not covered",
            )
        threshold = self.config.threshold
        top = hits.top
        thresholds = self._thresholds()
        above, values = hits.reaching(thresholds)
        cleared = bool(len(above))
        floor = self.config.reference_floor
        if not cleared and floor > 0:
            # nothing cleared the threshold: the passages over the floor are the reference the
            # coverage decision weighs (chatbot.coverage_decision), which refuses most of them;
            # Hits lists every one of them then (PassageScorer.query_hits's floor)
            above, values = hits.reaching(floor)
        ranking = Ranking(values)
        candidates, total = self._candidates(above, ranking)
        # only the best few can fill the reference: no need to sort them all
        order = ranking.head(MAX_PASSAGES_CONSIDERED)
        passages = self._reference(above[order], values[order])
        notes: list[str] = []
        if not cleared:
            qa = f" ({self.qa_threshold:g} on a Q&A page)" if self._qa_pages.any() and self.qa_threshold != threshold else ""
            notes.append(f"no passage scored at least the threshold {threshold}{qa} (best {top:.3f})")
        if unknown:
            notes.append("terms found nowhere in the corpus: " + ", ".join(unknown))
        ignored = self._ignored_keywords(keywords, extended)
        if ignored:
            notes.append("keywords found nowhere in the corpus (ignored): " + ", ".join(ignored))
        vocab = self.data.term_vocab
        # a target said through its words (胃+切除, Slot.parts) fired when the corpus has them all
        fired = [e for e in (extended or base).expansions
                 if e.target in vocab or all(w in vocab for w in e.target.split(PARTS_JOIN))]
        return RetrievalResult(
            question=question,
            keywords=list(keywords),
            query_terms=query_terms,
            candidates=candidates,
            passages=passages,
            threshold=threshold,
            top_score=top,
            pipeline=self.pipeline,
            corpus_version=self.corpus_version,
            notes=notes,
            unknown_terms=unknown,
            candidates_total=total,
            expansions=[e.to_json() for e in fired],
            slots=self._slots(base, extended),
            cleared=cleared,
            context=list(context),
        )

    @property
    def qa_threshold(self) -> float:
        """The threshold of a Q&A page's passages: config.threshold ** qa_threshold_exponent."""
        return float(self.config.threshold ** self.config.qa_threshold_exponent)

    def _thresholds(self) -> PerPassage:
        """The threshold of every passage: config.threshold, lower on Q&A pages (a page
        whose title asks one question answers it as a whole; the module docstring)."""
        if self._threshold_of is None:
            if not self._qa_pages.any() or self.qa_threshold == self.config.threshold:
                self._threshold_of = self.config.threshold
            else:
                self._threshold_of = scoring.by_page_kind(self._qa_pages[self.data.passage_page], self.qa_threshold,
                                                          self.config.threshold)
        return self._threshold_of

    def _hits(self, query: Query) -> Hits:
        """The query's scores where the search reads them (retrieval.scoring.Hits): every
        passage reaching its threshold, and the top one."""
        thresholds = self._thresholds()
        if min(float(self.config.threshold), self.qa_threshold) > 0:
            return self.scorer.query_hits(query, thresholds, float(self.config.reference_floor))
        scores, _, unknown = self.scorer.query_scores(query)  # a threshold of 0 takes every passage
        rows = np.arange(len(scores), dtype=np.int64)
        return Hits(rows, scores, unknown)

    def _ignored_keywords(self, keywords: Sequence[str], extended: Query | None) -> list[str]:
        """The keywords none of whose terms the corpus has (a model's junk: INST, <<SYS>>)."""
        if not keywords:
            return []
        known = {s.term for s in extended.slots} if extended is not None else set()
        out = []
        for k in keywords:
            terms = [t.text for t in self.parse(k)[1].terms]
            if not any(t in known or t in self.data.term_vocab for t in terms):
                out.append(k)
        return out

    def _candidates(self, above: np.ndarray, ranking: Ranking) -> tuple[list[Candidate], int]:
        """The best config.max_candidates pages with a passage above the threshold (by
        their best passage's score), and how many pages cleared it in all. `above` (the
        passages, ascending) and the ranking of their scores are aligned."""
        if not len(above):
            return [], 0
        # `above` ascends, and so do the passages' pages (retrieval.build): each page's
        # passages are a run (retrieval.top.best_runs)
        rows, best, total = best_runs(self.data.passage_page[above], ranking, max(1, self.config.max_candidates))
        at = rows.tolist()
        # made in C, field tuples zipped and cast (no Python-level step per candidate)
        fields = zip(map(self._urls.__getitem__, at), map(self._titles.__getitem__, at), best.tolist(), at)
        return list(map(_NEW, repeat(Candidate, len(at)), fields)), total

    def _reference(self, order: np.ndarray, scores: np.ndarray) -> list[Passage]:
        """Whole lines of the passages `order` (best first; `scores` are theirs), no line
        twice, within the budget."""
        budget = self.config.reference_chars
        used_chars = 0
        used: dict[int, set[int]] = {}
        out: list[Passage] = []
        misses = 0  # passages in a row that added nothing: the budget is as good as full
        shortest, pages, passage_at = self._shortest, self.pages, self._passage_at
        # read a chunk at a time: the budget is full after a few dozen passages of the 200
        each = chain.from_iterable(zip(scores[lo:lo + _CHUNK].tolist(), order[lo:lo + _CHUNK].tolist())
                                   for lo in range(0, len(order), _CHUNK))
        for score, at in each:
            row, first, last, heading = passage_at[at]
            left = budget - used_chars
            if left < 2 or misses >= 20:
                break
            if used_chars and left <= shortest[row]:  # no line of the page fits with its newline
                misses += 1
                continue
            lengths = self._lengths[row]
            taken = used.setdefault(row, set())
            wanted = range(first, last + 1)
            picked: list[int] = []
            for n in (heading, *wanted) if heading else wanted:
                length = lengths[n - 1]
                if length < 0 or n in taken:
                    continue
                # a line costs its length plus the newline that joins it to the previous one
                cost = length + (1 if used_chars else 0)
                if used_chars + cost > budget:
                    continue
                used_chars += cost
                taken.add(n)
                picked.append(n)
            if picked:
                misses = 0
                out.append(Passage(pages[row], tuple(sorted(picked)), score))
            else:
                misses += 1
        return out


def _carried(own: tuple[dict[str, float], dict[str, float]], completed: Query) -> Query:
    """`completed` (the question's query with the carried terms built into it) with the slots
    and bigrams that only the carried terms brought weighing CARRIED_WEIGHT, and the
    question's own (`own`: their weights before) as they were: a carried term may add
    alternatives to a word of the question, as a keyword does, never change its weight."""
    weights, grams = own
    for slot in completed.slots:
        slot.weight = weights[slot.term] if slot.term in weights else slot.weight * CARRIED_WEIGHT
    for gram, weight in completed.bigrams.items():
        completed.bigrams[gram] = grams[gram] if gram in grams else weight * CARRIED_WEIGHT
    return completed
