"""The default pipeline's score of a passage: BM25 weights fitted once at index time.

A question is a list of slots (retrieval.query): one per distinct term, each with a query
weight q(s) (nouns 1, verb/adjective lemmas query.VERB_WEIGHT, a compound never seen
query.UNKNOWN_COMPOUND_WEIGHT, a verb never seen query.UNKNOWN_VERB_WEIGHT more;
for a word the corpus never uses, times its specificity in general Japanese,
retrieval.specificity; a word naming the kind of answer asked for, 違い or 方法, times
settings.frame_word_weight; a word with a light affix the corpus never uses, 切除後, is the
slot of its word, 切除) and alternatives A(s): the corpus terms that count as finding it,
each with a weight lambda(a) <= 1 (the term itself 1; a corpus term a compound cut short by
MeCab begins 1, 高額療養 -> 高額療養費制度; the expansions of retrieval.expansion below 1: the
patient table 髪が抜ける -> 脱毛, Sudachi's synonyms お産 -> 分娩; with
settings.compound_parts_weight > 0, a compound the corpus never uses whose words it does,
胃切除: 胃 and 切除, has one more, its words said together: found in x at lambda times the
least w(word, x) when one line span of x (for C(P), of P) holds every word and the
character bigrams where they join, 胃切). A slot's idf I(s) is its
term's idf when the corpus has the term, else the best idf of its known alternatives, else
the idf of an unseen term times UNKNOWN_TERM_WEIGHT. For a passage x (a window of
lines under its heading, headed by its page's title), each channel gives

    c(x) = sum over slots s of q(s) * I(s) * max over a in A(s) of lambda(a) * w(a, x)
           / sum over ALL slots of q(s) * I(s)

with w the BM25-saturated frequency scaled to [0, 1] (k1 = 0.5: close to "is the term
there"; 0 where x lacks a). Questions are read with Analyzer.query_tokens:
question-framing words (retrieval.framing: 心配です, 教えて, いつ頃, うちの父が, the counter
of 何日) are no terms, so they neither dilute nor inflate the score. The denominator
counts slots found nowhere in the corpus (at the unseen idf), so a question about
something the guideline never mentions scores low even when its common words match: that
is the refusal signal; an everyday word (髪, 戻る, お金) the guideline does not use weighs
little there, a specific one (白血病, 漢方) fully. The character-bigram channel is the same
with one slot per bigram of the question's content spans (alternatives: itself; a span
whose term the corpus never uses gives the bigrams of its best alternative, or its own at
its specificity). The channels are mixed,

    c(x) = (1 - BIGRAM_WEIGHT) * c_terms(x) + BIGRAM_WEIGHT * c_bigrams(x),

and so are p(x), the same shares counting presence only (w = 1 for an alternative found),
for the window and for each of its line spans (the title, the heading and one line,
retrieval.passages.line_spans). The best span gives the share of the window's matched
terms that also meet on one line, r = min(1, max over its spans p(span) / p(window)), and

    f(x) = 1 - SPAN_WEIGHT + SPAN_WEIGHT * r

(1 for a window without spans or without a match), so the question's terms said together
on one line count fully and the same terms scattered over unrelated lines of a window
count less (a surgery page whose 入院期間 and 放射線治療 sit five lines apart is no answer
to how long radiotherapy takes). r <= 1: a span never raises a passage, so the threshold
keeps its meaning. The page P of x gives C(P), the mixed channel share c of the whole page
(its title and every line, BM25-saturated over page lengths), and

    score(x) = ((1 - w(P)) * c(x) * f(x) + w(P) * C(P) * f(x)) ** SCORE_POWER,

w(P) = settings.qa_page_weight when P is a Q&A page (its title asks one question or is
numbered Q12, retrieval.passages.is_question_title: the page answers that question as a
whole, a lay question's words often lie over its sections), else PAGE_WEIGHT
(0: a long article covers an out-of-scope question's words too easily). The
score lies in [0, 1]; with SCORE_POWER 2 the protocol's threshold 0.2 falls where about
45% of the question's (saturated) idf mass is found, which measured as a good cut on
JSQuAD. A passage of a Q&A page clears threshold ** settings.qa_threshold_exponent
(0.16 for 0.2; measured on the patient-worded sets), any other passage the threshold.

retrieval.pipeline_ours searches with it (the reference, candidates and notes).

How it is computed (the numbers are those of the formula to the last bit; the pins in
tests/test_scorer_reference.py and tests/test_channel_sums.py): each channel sums its
query's columns with retrieval.channel_sums.ChannelSums, over the passage and page rows
at once and over the line spans only where asked (searched for when few, summed once when
many). The proximity factor, the costly part (a best span per passage), is computed only
for the passages whose score without it (an upper bound: f <= 1) reaches their threshold,
and for those that could be the top one: `Hits`; when that is most passages, every
passage's best span is read at once off a sparse table of every span's shares, at places
laid out once per index (`_best_spans`, retrieval.range_max). `query_scores` gives every passage's.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from guiderag.scopes import RetrievalConfig

from .channel_sums import ChannelSums, Columns, SlotSpec, rows_holding
from .hits import Hits, PerPassage, at_rows
from .index import IndexData
from .query import Query, Slot
from .range_max import SpanRanges, range_max

# The formula's parameters (the module docstring). Constants, not settings: the threshold
# 0.2 and the evidence gate are calibrated on the scores they give, and judged by how they
# transfer to sites never seen (leave one site out), not tuned per deployment. Each was
# measured on JSQuAD (devbench) and the patient-worded sets; tests/test_scorer_reference.py
# varies them against the plain formula.
# Share of the character-bigram channel in a score (the rest: MeCab terms).
BIGRAM_WEIGHT = 0.3
# Share of the whole page's score in a passage's, other than on a Q&A page (there:
# settings.qa_page_weight). 0 measured best on JSQuAD: a long page covers an out-of-scope
# question's words too easily.
PAGE_WEIGHT = 0.0
# The proximity factor's weight: only passages whose terms lie scattered over unrelated
# lines lose. 0.45 measured on JSQuAD and the patient-worded sample set (0.4 left the
# surgery page above the threshold for 放射線治療の期間).
SPAN_WEIGHT = 0.45
# A score is (share of the question's idf mass found) ** this, so that the threshold 0.2
# falls where about 0.45 of it is found (measured on JSQuAD).
SCORE_POWER = 2.0
# Weight of a query term found nowhere in the corpus, relative to its idf: it lowers the
# score of questions about what the guideline never mentions.
UNKNOWN_TERM_WEIGHT = 1.0

# How many passages with the highest score bound get their exact score first when looking
# for the top one (more are scored when one of the others could still beat them).
TOP_FIRST = 16
# When more than 1/ALL_RANGES_SHARE of the passages want their proximity factor (or their
# spans are many enough to sum every span), every passage's best span is taken at once
# (PassageScorer._best_spans).
ALL_RANGES_SHARE = 4

@dataclass
class _Channel:
    """One channel's (terms' or bigrams') shares of the question's mass: per passage and
    per page (None when no query term is in the corpus), the query terms it does not
    know, and the presence shares of each passage window and each line span."""

    passages: np.ndarray | None
    pages: np.ndarray | None
    unknown: list[str]
    window_present: np.ndarray | None = None
    span_present: ChannelSums | None = None


@dataclass
class _Mix:
    """Both channels mixed, before the proximity factor and the power: per passage c(x),
    per page C(P); the presence shares of the windows and of the line spans are mixed
    only where the proximity factor is wanted (`present`, `span`)."""

    passage: np.ndarray
    page: np.ndarray
    windows: list[tuple[float, np.ndarray]]  # (channel share, its window presence shares)
    spans: list[tuple[float, ChannelSums]]  # (channel share, its sums: span presence shares)
    unknown: list[str]
    use_spans: bool
    _all_spans: np.ndarray | None = None
    _of_page: np.ndarray | None = None
    _table: np.ndarray | None = None

    def present(self, rows: np.ndarray | None) -> np.ndarray:
        """The windows' presence shares of the passages `rows` (None: all), both channels mixed."""
        return _mixed(self.windows, rows, len(self.passage))

    def span_table(self, ranges: SpanRanges) -> np.ndarray:
        """The sparse table of `all_spans` for these ranges (made once)."""
        if self._table is None:
            if self._all_spans is None:  # made in the table's first level: no copy
                n = self.n_spans()
                self._table = ranges.empty_table(n)
                self.all_spans(self._table[:n])
                ranges.fill(self._table, n)
            else:
                self._table = ranges.table(self._all_spans)
        return self._table

    def of_page(self, page_runs: np.ndarray) -> np.ndarray:
        """C(P) of every passage's page (made once), each page's repeated over the run of
        its passages (`page_runs`: how many each page has; passages ascend by page)."""
        if self._of_page is None:
            self._of_page = np.repeat(self.page, page_runs)
        return self._of_page

    def dense_better(self, n: int) -> bool:
        """Whether n span rows are read more cheaply from every span's shares (`all_spans`)."""
        return self._all_spans is not None or any(sums.dense_better(n) for _, sums in self.spans)

    def span(self, rows: np.ndarray) -> np.ndarray:
        """The presence shares of the line spans `rows`, both channels mixed: searched for
        in the query's columns when they are few, else gathered from `all_spans`."""
        if self.dense_better(len(rows)):
            return self.all_spans()[rows]
        out = np.zeros(len(rows), dtype=np.float32)
        for share, sums in self.spans:
            out += share * sums.spans(rows)
        return out

    def n_spans(self) -> int:
        """How many line spans the index has (0 when no channel reads them)."""
        return self.spans[0][1].n_spans if self.spans else 0

    def all_spans(self, into: np.ndarray | None = None) -> np.ndarray:
        """The presence shares of every line span, both channels mixed (made once; in
        `into`, n_spans places, when given)."""
        if self._all_spans is None:
            out = None
            for share, sums in self.spans:
                values = sums.all_spans()
                if out is None:
                    out = share * values if into is None else np.multiply(values, share, out=into)
                else:
                    out += share * values
            self._all_spans = np.zeros(0, dtype=np.float32) if out is None else out
        return self._all_spans


def by_page_kind(on_qa_page: np.ndarray, qa: float, other: float) -> PerPassage:
    """A float32 value per passage: `qa` where its page is a Q&A page (`on_qa_page`), else
    `other`; one scalar when every passage's page is of one kind (the same numbers,
    without an array to read)."""
    if on_qa_page.all():
        return np.float32(qa)
    if not on_qa_page.any():
        return np.float32(other)
    return np.where(on_qa_page, np.float32(qa), np.float32(other))


def _powered(values: np.ndarray) -> np.ndarray:
    """values ** SCORE_POWER in float32. For 2, np.square: the same bits as np.power (every
    float32 in [0, 2] compared), several times faster."""
    if SCORE_POWER == 1.0:
        return values
    if SCORE_POWER == 2.0:
        return np.square(values, dtype=np.float32)
    return np.power(values, SCORE_POWER, dtype=np.float32)


def _mixed(parts: list[tuple[float, np.ndarray]], rows: np.ndarray | None, n: int) -> np.ndarray:
    """sum of share * values[rows] over the channels, in their order (0 + the first + the
    second: the float32 sums a dense mix of every row would give)."""
    out = np.zeros(n if rows is None else len(rows), dtype=np.float32)
    for share, values in parts:
        out += share * (values if rows is None else values[rows])
    return out


class PassageScorer:
    """The score of every passage and page of an IndexData for one Query (the module
    docstring); `qa_pages` says which pages' titles ask one question."""

    def __init__(self, config: RetrievalConfig, data: IndexData, unseen_query: float, qa_pages: np.ndarray) -> None:
        self.config = config
        self.data = data
        self._unseen_query = unseen_query
        self._qa_pages = qa_pages
        self._page_w: tuple[float, tuple[PerPassage, PerPassage, bool]] | None = None
        # each page's passages are one run (retrieval.build): how long each page's is, and
        # each passage's page as the index type that gathers fastest
        self._page_runs = np.bincount(data.passage_page, minlength=data.n_pages)
        self._passage_page = data.passage_page.astype(np.intp)
        self._has_spans = data.passage_span_end > data.passage_span_first
        self._ranges: SpanRanges | None = None  # the passages' span ranges, laid out (_best_spans)
        # each channel's columns, shared with retrieval.evidence
        self.columns = {"terms": Columns(data.terms, data.n_passages, data.n_pages),
                        "bigrams": Columns(data.bigrams, data.n_passages, data.n_pages)}

    def slot_mass(self, slot: Slot) -> float:
        """q * idf of a slot (retrieval.query): its term's idf, else its best alternative's,
        else the unseen idf (times UNKNOWN_TERM_WEIGHT)."""
        vocab, idf = self.data.term_vocab, self.data.term_idf
        j = vocab.get(slot.term)
        if j is not None:
            return slot.weight * float(idf[j])
        known = [float(idf[vocab[a]]) for a in slot.alternatives if a in vocab]
        return slot.weight * (max(known) if known else self._unseen_query)

    def _term_specs(self, query: Query) -> tuple[list[SlotSpec], list[str]]:
        vocab = self.data.term_vocab
        specs = []
        unknown = []
        for slot in query.slots:
            cols = [(vocab[a], lam) for a, lam in slot.alternatives.items() if a in vocab]
            if not cols:
                unknown.append(slot.term)
            parts = [vocab[p] for p in slot.parts if p in vocab] if slot.parts_weight > 0 else []
            if len(parts) != len(slot.parts):
                parts = []
            spec = SlotSpec(self.slot_mass(slot), cols, parts, slot.parts_weight)
            if parts:
                grams = [self.data.bigram_vocab.get(g) for g in slot.junctions]
                if any(g is None for g in grams):  # the words are never said next to each other
                    spec.parts = []
                else:
                    spec.together = self._together(parts, [g for g in grams if g is not None])
            specs.append(spec)
        return specs, unknown

    def _together(self, cols: list[int], grams: list[int]) -> np.ndarray:
        """Whether a compound's words are said together (Slot.parts), per row of the ROW
        LAYOUT: per line span, that it holds all the words and the bigrams where they join
        (胃切 of 胃切除); per passage and per page, that one of its spans does (a passage
        without spans: its window holds the words)."""
        d = self.data
        words = rows_holding(d.terms, cols)
        spans = words[d.rows("spans")]
        if grams:
            spans = spans & rows_holding(d.bigrams, grams)[d.rows("spans")]
        first, end = d.passage_span_first, d.passage_span_end
        window = words[d.rows("passages")]
        passage = window.copy()  # no spans: the window
        ok = np.flatnonzero(end > first)
        if len(ok):
            as_float = spans.astype(np.float32)
            passage[ok] = range_max(as_float.take, first[ok], end[ok]) > 0
        page = np.zeros(d.n_pages, dtype=bool)
        np.logical_or.at(page, d.passage_page, passage)
        return np.concatenate([passage, page, spans])

    def _bigram_specs(self, query: Query) -> list[SlotSpec]:
        vocab, idf = self.data.bigram_vocab, self.data.bigram_idf
        specs = []
        for gram, q in query.bigrams.items():
            j = vocab.get(gram)
            specs.append(SlotSpec(q * (float(idf[j]) if j is not None else self._unseen_query),
                               [(j, 1.0)] if j is not None else []))
        return specs

    @staticmethod
    def _channel(specs: list[SlotSpec], unknown: list[str], columns: Columns, data: IndexData,
                 use_spans: bool) -> _Channel:
        """One channel's shares of the question's mass on every row of its matrix (the ROW
        LAYOUT: passages, pages, line spans): each slot adds mass * (its best alternative's
        lambda * w) over the total mass, where a compound found through its words
        (Slot.parts) is one more alternative, of weight parts_weight * the least w of its
        words (retrieval.channel_sums: the passage and page rows now, the span rows when
        the proximity factor asks for them). Span rows hold presence: their shares are
        their presence shares."""
        mass = sum(x.mass for x in specs)
        if mass <= 0 or not any(x.cols or x.parts for x in specs):
            return _Channel(None, None, unknown)
        sums = ChannelSums(columns, specs)
        values, present = sums.head_rows(use_spans)
        passages, pages = data.rows("passages"), data.rows("pages")
        if present is None:
            return _Channel(values[passages], values[pages], unknown)
        # presence shares of the window and of each span (see the module docstring)
        return _Channel(values[passages], values[pages], unknown, present[passages], sums)

    def _page_weights(self) -> tuple[PerPassage, PerPassage, bool]:
        """w(P) of each passage's page (settings.qa_page_weight on a Q&A page, else
        PAGE_WEIGHT), 1 - w(P), and whether any w(P) is not 0: made once per PAGE_WEIGHT."""
        pw = PAGE_WEIGHT
        if self._page_w is None or self._page_w[0] != pw:
            s, d = self.config, self.data
            if s.qa_page_weight != pw and self._qa_pages.any():
                w: PerPassage = by_page_kind(self._qa_pages[d.passage_page], s.qa_page_weight, pw)
            else:
                w = pw
            self._page_w = (pw, (w, 1.0 - w, bool(np.any(w))))
        return self._page_w[1]

    def _mix(self, query: Query) -> _Mix:
        """Both channels of one Query, mixed (the module docstring)."""
        d = self.data
        ws = SPAN_WEIGHT
        specs, unknown = self._term_specs(query)
        use = ws > 0
        terms = self._channel(specs, unknown, self.columns["terms"], d, use)
        grams = self._channel(self._bigram_specs(query), [], self.columns["bigrams"], d, use)
        wb = BIGRAM_WEIGHT
        passage = np.zeros(d.n_passages, dtype=np.float32)
        page = np.zeros(d.n_pages, dtype=np.float32)
        use_spans = ws > 0 and len(passage) > 0
        windows: list[tuple[float, np.ndarray]] = []
        spans: list[tuple[float, ChannelSums]] = []
        for share, channel in ((1.0 - wb, terms), (wb, grams)):
            if channel.passages is None or channel.pages is None:
                continue
            passage += share * channel.passages
            page += share * channel.pages
            if use_spans and channel.window_present is not None and channel.span_present is not None:
                windows.append((share, channel.window_present))
                spans.append((share, channel.span_present))
        return _Mix(passage, page, windows, spans, unknown, use_spans)

    def _scores(self, mix: _Mix, rows: np.ndarray | None, *, factor: bool = True) -> np.ndarray:
        """The scores of the passages `rows` (None: every passage); without `factor`, as if
        every proximity factor were 1: an upper bound of the score, rounding included
        (f <= 1 and every operation after it is monotonic). Many rows are read off every
        passage's scores (the same numbers: each is computed on its own)."""
        d = self.data
        if rows is not None and len(rows) * ALL_RANGES_SHARE > d.n_passages:
            return self._scores(mix, None, factor=factor)[rows]
        passage = mix.passage if rows is None else mix.passage[rows]
        f = self._span_factor(mix, rows) if factor and mix.use_spans else None
        if f is not None:
            passage = passage * f
        w, rest, weighed = self._page_weights()
        if weighed:
            # the page's share, times the passage's proximity factor: the terms a Q&A page
            # holds count less when this passage's lines do not say them together
            of_page = mix.of_page(self._page_runs) if rows is None else mix.page.take(self._passage_page.take(rows))
            if f is not None:
                of_page = of_page * f
            if rows is not None:
                w, rest = at_rows(w, rows), at_rows(rest, rows)
            combined = rest * passage + w * of_page
        else:
            combined = passage
        return _powered(combined)

    def _span_factor(self, mix: _Mix, rows: np.ndarray | None) -> np.ndarray:
        """The proximity factor 1 - ws + ws * r of the passages `rows` (None: all), r =
        min(1, best span's presence share / the window's); 1 for a passage without spans
        (a page of headings only) or without matches."""
        d = self.data
        ws = SPAN_WEIGHT
        present = mix.present(rows)
        # only passages that matched something and have spans can change
        changes = (present > 0) & (self._has_spans if rows is None else self._has_spans[rows])
        if rows is None and mix.spans and np.count_nonzero(changes) * ALL_RANGES_SHARE > d.n_passages:
            # most passages: every passage's factor at once, kept where it can change
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.minimum(1.0, self._best_spans(mix, None) / present)
            return np.where(changes, 1.0 - ws + ws * ratio, np.float32(1.0))
        first, end = d.passage_span_first, d.passage_span_end
        if rows is not None:
            first, end = first[rows], end[rows]
        out = np.ones(len(first), dtype=np.float32)
        ok = np.flatnonzero(changes)
        if not len(ok):
            return out
        if mix.spans and (len(ok) * ALL_RANGES_SHARE > d.n_passages
                          or mix.dense_better(int((end[ok] - first[ok]).sum()))):
            # most passages, or spans enough to sum every one: every passage's best span at once
            best = self._best_spans(mix, ok if rows is None else rows[ok])
        else:
            best = range_max(mix.span, first[ok], end[ok])
        ratio = np.minimum(1.0, best / present[ok])
        out[ok] = 1.0 - ws + ws * ratio
        return out

    def _best_spans(self, mix: _Mix, rows: np.ndarray | None) -> np.ndarray:
        """The best span presence share of each passage of `rows` (every one has spans; None:
        every passage, 0 for one without), read off the sparse table of every span's shares
        (retrieval.range_max)."""
        if self._ranges is None:
            self._ranges = SpanRanges(self.data.passage_span_first, self.data.passage_span_end)
        table = mix.span_table(self._ranges)
        if rows is None:
            return self._ranges.best_all(table)
        if len(rows) * 2 > self.data.n_passages:  # most passages: every one's at once
            return self._ranges.best_all(table)[rows]
        return self._ranges.best(table, rows)

    def query_hits(self, query: Query, thresholds: PerPassage, floor: float = 0.0) -> Hits:
        """The scores of one Query where they matter (Hits): exactly for every passage whose
        score without the proximity factor reaches its threshold (`thresholds`: one, or
        one per passage; > 0), and for the passages that could score highest. When none
        reaches its threshold and `floor` > 0, exactly for every passage whose bound reaches
        the floor instead (the reference below the threshold, settings.reference_floor)."""
        mix = self._mix(query)
        bound = self._scores(mix, None, factor=False)
        cut: PerPassage = thresholds
        wanted = bound >= cut
        hits = self._listed(mix, np.flatnonzero(wanted))
        if floor > 0 and not hits.reaches(thresholds):
            cut = floor
            wanted = bound >= cut
            hits = self._listed(mix, np.flatnonzero(wanted), hits.every)
        if hits.top >= np.max(cut):
            return hits  # every bound above the top reached its cut: listed
        rows, scores, every = hits.rows, hits.scores, hits.every
        top = float(scores.max()) if len(scores) else 0.0
        # the top one, when it is below its threshold: the passages with the best bounds,
        # more of them each round, until no other bound beats the best score found
        left = np.flatnonzero((bound > top) & ~wanted)
        found_rows, found_scores = [rows], [scores]
        size = TOP_FIRST
        while len(left):
            if len(left) > size:
                order = np.argpartition(-bound[left], size - 1)
                first, left = left[order[:size]], left[order[size:]]
            else:
                first, left = left, left[:0]
            best = every.take(first) if every is not None else self._scores(mix, first)
            found_rows.append(first)
            found_scores.append(best)
            top = max(top, float(best.max()))
            left = left[bound[left] > top]
            size *= 4
        if len(found_rows) > 1:
            rows, scores = np.concatenate(found_rows), np.concatenate(found_scores)
            order = np.argsort(rows, kind="stable")
            rows, scores = rows[order], scores[order]
        return Hits(rows, scores, mix.unknown, every)

    def _listed(self, mix: _Mix, rows: np.ndarray, every: np.ndarray | None = None) -> Hits:
        """The exact scores of the passages `rows`, as Hits. When they are most passages,
        every passage's is computed (`_scores` would read theirs off every passage's
        anyway) and kept in the Hits, which reads the listed ones off it."""
        if every is None and len(rows) * ALL_RANGES_SHARE > self.data.n_passages:
            every = self._scores(mix, None)
        if every is not None:
            return Hits(rows, None, mix.unknown, every)
        return Hits(rows, self._scores(mix, rows), mix.unknown)

    def query_scores(self, query: Query) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(passage scores, page scores, unknown terms) of one Query (the module docstring),
        for every passage and page of the index."""
        mix = self._mix(query)
        return self._scores(mix, None), _powered(mix.page), mix.unknown

