"""The default pipeline's scores against a plain, slow implementation of their formula.

retrieval.scoring documents the score of a passage x; here it is computed again
with dictionaries and loops, from nothing but the analyzer's terms and bigrams of each
text and the passages and line spans of each page, on random corpora and parameters (the
formula's constants, patched per case, and the settings that weigh in). The
vectorised build (chunked rows, saturation, idf, span ranges) and the query arithmetic
(column slices, channel mix, proximity factor, power) must give the same numbers, so
either side can be rewritten and checked against the other (as bm25s pins its scorers
against rank_bm25).
"""
from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from guiderag.retrieval import bm25, passages, scoring
from guiderag.retrieval.bigrams import char_bigrams
from guiderag.retrieval.bench import generate_corpus
from guiderag.retrieval.build import build_data
from guiderag.retrieval.index import make_analyzer
from guiderag.retrieval.passages import body_skip, is_question_title, line_spans, segment
from guiderag.retrieval.pipeline_ours import OursRetriever
from guiderag.settings import Settings
from guiderag.store import PageVersion, structure

# The formula's constants (module attributes the build and the scores read when they run),
# by the names the reference below uses.
CONSTANTS = {
    "bm25_k1": (bm25, "K1"), "bm25_b": (bm25, "B"), "passage_chars": (passages, "PASSAGE_CHARS"),
    "heading_max_chars": (structure, "HEADING_MAX_CHARS"), "bigram_weight": (scoring, "BIGRAM_WEIGHT"),
    "span_weight": (scoring, "SPAN_WEIGHT"), "page_weight": (scoring, "PAGE_WEIGHT"),
    "score_power": (scoring, "SCORE_POWER"), "unknown_term_weight": (scoring, "UNKNOWN_TERM_WEIGHT"),
}


def formula(settings: Settings) -> SimpleNamespace:
    """Every parameter of the formula: the constants as they are now, and the settings'."""
    return SimpleNamespace(qa_page_weight=settings.retrieval.qa_page_weight,
                           **{name: getattr(module, attr) for name, (module, attr) in CONSTANTS.items()})


def _texts(analyzer, page: PageVersion) -> tuple[list[list[str]], list[list[str]]]:
    """Terms and bigrams of the title (index 0) and of each line (index n)."""
    terms, grams = [], []
    for text in (page.title, *page.lines):
        a = analyzer.analysis(text)
        terms.append([t.text for t in a.terms])
        grams.append(char_bigrams(a.spans))
    return terms, grams


def reference_scores(pages: list[PageVersion], settings: Settings, slots: list[tuple[str, float, dict[str, float]]],
                     bigrams: dict[str, float], parts: dict[str, tuple[tuple[str, ...], float, tuple[str, ...]]] | None = None
                     ) -> np.ndarray:
    """Every passage's score, in the order the index lists them, by the documented formula.

    `slots`: (term, query weight q, alternatives {corpus term: lambda}); `bigrams`: bigram ->
    query weight. A slot's idf is its term's, else its best alternative's, else the unseen
    idf; a passage finds a slot at the best lambda * w of the alternatives it holds.
    `parts`: term -> (its compound's words, their weight, the bigrams where they join): one
    more alternative, found in a passage (page, line span) one of whose line spans holds
    every word and junction, at weight * the least w of the words."""
    parts = parts or {}
    analyzer = make_analyzer(settings.retrieval)
    s = formula(settings)
    n_pages = len(pages)
    rows = []  # per passage: (terms Counter, bigrams Counter, [span term sets], [span bigram sets])
    row_page: list[int] = []  # the page of each passage
    page_terms: list[set[str]] = []
    page_grams: list[set[str]] = []
    page_counts: list[tuple[Counter, Counter]] = []  # the whole page: its title and every line
    page_spans: list[list[tuple[set[str], set[str]]]] = []  # per page: the spans of its passages
    for number, page in enumerate(pages):
        terms, grams = _texts(analyzer, page)
        page_terms.append({t for ts in terms for t in ts})
        page_grams.append({g for gs in grams for g in gs})
        page_counts.append((Counter(t for ts in terms for t in ts), Counter(g for gs in grams for g in gs)))
        skip = body_skip(page.title, page.lines, s.heading_max_chars)
        spans = line_spans(page.lines, s.heading_max_chars, skip)
        page_spans.append([])
        for heading, first, last in segment(page.lines, s.passage_chars, s.heading_max_chars, skip):
            texts = [0, *([heading] if heading else []), *range(first, last + 1)]
            inside = [(h, n) for h, n in spans if first <= n <= last]
            row_page.append(number)
            rows.append((
                Counter(t for i in texts for t in terms[i]),
                Counter(g for i in texts for g in grams[i]),
                [{*terms[0], *(terms[h] if h else ()), *terms[n]} for h, n in inside],
                [{*grams[0], *(grams[h] if h else ()), *grams[n]} for h, n in inside],
            ))
            if inside:
                page_spans[-1].extend(zip(rows[-1][2], rows[-1][3]))
            else:  # a passage without spans: its window stands for one
                page_spans[-1].append((set(rows[-1][0]), set(rows[-1][1])))

    def idf(df: int) -> float:
        return math.log1p((n_pages - df + 0.5) / (df + 0.5))

    unseen = math.log1p((n_pages + 0.5) / 0.5) * s.unknown_term_weight

    def channel(query: list[tuple[str, float, dict[str, float]]], which: int,
                page_sets: list[set[str]]) -> tuple[list[tuple[float, float, list[float]]], list[float]]:
        """Per passage: (BM25 share c, window presence share p, each span's presence share);
        and per page its BM25 share (the page's title and lines as one text)."""
        words = {t for t, _, alts in query for t in (t, *alts)}
        df = {t: sum(t in ps for ps in page_sets) for t in words}
        gram_df = {g: sum(g in ps for ps in page_grams) for _, (_, _, js) in parts.items() for g in js}

        def usable(t: str) -> bool:  # a compound's words and junctions are all in the corpus
            return which == 0 and t in parts and all(df.get(w) for w in parts[t][0]) \
                and all(gram_df[g] for g in parts[t][2])

        def said(t: str, span_sets: list[tuple[set[str], set[str]]]) -> bool:
            words, _, joins = parts[t]
            return any(set(words) <= ts and set(joins) <= gs for ts, gs in span_sets)

        for t in parts:
            for w in parts[t][0]:
                df.setdefault(w, sum(w in ps for ps in page_sets))
        masses = []
        for t, q, alts in query:
            known = [idf(df[a]) for a in alts if df[a]]
            masses.append(q * (idf(df[t]) if df[t] else (max(known) if known else unseen)))
        mass = sum(masses)
        known_any = any(df[a] for _, _, alts in query for a in alts)
        page_lengths = [sum(pc[which].values()) for pc in page_counts]
        page_avg = (sum(page_lengths) / len(page_lengths)) or 1.0
        of_pages = []
        for pc, length in zip(page_counts, page_lengths):
            counts = pc[which]
            norm = s.bm25_k1 * (1 - s.bm25_b + s.bm25_b * length / page_avg)
            c = 0.0
            for (t, q, alts), m in zip(query, masses):
                found = [lam * min(1.0, counts[a] / (counts[a] + norm)) for a, lam in alts.items() if df[a] and counts[a]]
                if usable(t) and said(t, page_spans[len(of_pages)]):
                    found.append(parts[t][1] * min(min(1.0, counts[w] / (counts[w] + norm)) for w in parts[t][0]))
                if found:
                    c += m * max(found)
            of_pages.append(c / mass if (known_any or any(usable(t) for t, _, _ in query)) and mass > 0 else 0.0)
        lengths = [sum(r[which].values()) for r in rows]
        avg = (sum(lengths) / len(lengths)) or 1.0
        out = []
        for r, length in zip(rows, lengths):
            counts, spans = r[which], r[2 + which]
            norm = s.bm25_k1 * (1 - s.bm25_b + s.bm25_b * length / avg)
            c = p = 0.0
            each = [0.0] * len(spans)
            window_spans = list(zip(spans, r[3])) or [(set(counts), set(r[1]))]
            for (t, q, alts), m in zip(query, masses):
                found = [(lam, counts[a]) for a, lam in alts.items() if df[a] and counts[a]]
                sat = [lam * min(1.0, n / (n + norm)) for lam, n in found]
                pres = [lam for lam, _ in found]
                if usable(t) and said(t, window_spans):
                    sat.append(parts[t][1] * min(min(1.0, counts[w] / (counts[w] + norm)) for w in parts[t][0]))
                    pres.append(parts[t][1])
                if sat:
                    c += m * max(sat)
                    p += m * max(pres)
                for k, sp in enumerate(spans):
                    inside = [lam for a, lam in alts.items() if df[a] and a in sp]
                    if usable(t) and said(t, [(sp, r[3][k])]):
                        inside.append(parts[t][1])
                    if inside:
                        each[k] += m * max(inside)
            if (known_any or any(usable(t) for t, _, _ in query)) and mass > 0:
                out.append((c / mass, p / mass, [v / mass for v in each]))
            else:
                out.append((0.0, 0.0, [0.0] * len(spans)))
        return out, of_pages

    terms, term_pages = channel(slots, 0, page_terms)
    grams, gram_pages = channel([(g, q, {g: 1.0}) for g, q in bigrams.items()], 1, page_grams)
    wb = s.bigram_weight
    scores = []
    for (tc, tp, ts), (bc, bp, bs), row, number in zip(terms, grams, rows, row_page):
        c = (1 - wb) * tc + wb * bc
        p = (1 - wb) * tp + wb * bp
        # the best line span of the window, by the channels' mixed presence shares
        best = max(((1 - wb) * a + wb * b for a, b in zip(ts, bs)), default=0.0)
        factor = 1.0
        if s.span_weight > 0 and p > 0 and row[2]:
            factor = 1 - s.span_weight + s.span_weight * min(1.0, best / p)
        # the page's share, on a Q&A page at qa_page_weight (else page_weight)
        w = s.qa_page_weight if is_question_title(pages[number].title) else s.page_weight
        of_page = (1 - wb) * term_pages[number] + wb * gram_pages[number]
        scores.append(((1 - w) * c * factor + w * of_page * factor) ** s.score_power)
    return np.asarray(scores)


CASES = [
    (1, {}),
    (2, {"span_weight": 0.0}),
    (3, {"bigram_weight": 0.0, "bm25_k1": 1.2, "bm25_b": 0.3}),
    (4, {"score_power": 1.0, "span_weight": 0.8, "passage_chars": 120}),
    (5, {"bigram_weight": 0.6, "unknown_term_weight": 0.4, "heading_max_chars": 20}),
    (6, {"qa_page_weight": 0.0, "page_weight": 0.3}),
    (7, {"qa_page_weight": 0.9, "span_weight": 0.0}),
    (8, {"page_weight": 0.2}),  # half the pages lose their Q number: articles, at page_weight
]
# seeds whose corpus mixes Q&A pages (titled Q12 ...) with article pages
ARTICLES = {8}


@pytest.mark.parametrize("seed,overrides", CASES)
def test_passage_scores_equal_the_plain_formula(seed: int, overrides: dict, monkeypatch) -> None:
    overrides = dict(overrides)
    for name in [n for n in overrides if n in CONSTANTS]:
        module, attr = CONSTANTS[name]
        monkeypatch.setattr(module, attr, overrides.pop(name))
    corpus = generate_corpus(14, 12, seed=seed)
    pages = list(corpus.pages)
    if seed in ARTICLES:
        pages = [dataclasses.replace(p, title=p.title.split(" ", 1)[-1]) if i % 2 else p for i, p in enumerate(pages)]
        assert 0 < sum(is_question_title(p.title) for p in pages) < len(pages)
    settings = Settings.load(env={}, progress=False, index_workers=1, **overrides)
    analyzer = make_analyzer(settings.retrieval)
    data = build_data(pages, "v", settings.retrieval, analyzer)
    retriever = OursRetriever(settings.retrieval, pages, data, analyzer, guideline="default")
    questions = [*corpus.queries, "遺伝子変異と副作用の関係は？", "存在しない語彙ばかりの質問です", "肺"]
    with_parts = 0
    vocab = sorted(data.term_vocab)
    rng = np.random.default_rng(seed)
    compared = 0
    multi = 0
    for number, question in enumerate(questions):
        query = retriever.query(question)[0]
        if number % 2 and query.slots:
            # expansions: a slot found through other corpus terms, below an exact match
            slot = query.slots[int(rng.integers(len(query.slots)))]
            for term in rng.choice(vocab, size=2, replace=False):
                slot.alternatives[str(term)] = float(rng.uniform(0.3, 0.9))
            multi += 1
        if number % 3 != 1 and len(query.slots) >= 2:
            # a compound found where its words are said together (Slot.parts): two corpus
            # terms of the question, joined by the bigram of their first characters
            slot = query.slots[0]
            words = [sl.term for sl in query.slots[1:3] if sl.term in data.term_vocab]
            if len(words) == 2 and not slot.parts:
                slot.parts, slot.parts_weight = tuple(words), float(rng.uniform(0.3, 0.9))
                slot.junctions = (words[0][-1] + words[1][0],) if number % 2 else ()
                with_parts += 1
        got = retriever.query_scores(query)[0]
        want = reference_scores(pages, settings,
                                [(sl.term, sl.weight, dict(sl.alternatives)) for sl in query.slots], query.bigrams,
                                {sl.term: (sl.parts, sl.parts_weight, sl.junctions) for sl in query.slots
                                 if sl.parts and sl.parts_weight > 0})
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-6, err_msg=question)
        compared += int((want > 0).sum())
    assert compared > 100  # the questions do match passages: the comparison is not all zeros
    assert multi > 0
    assert with_parts > 0


# --- the search reads the scores where they matter (retrieval.scoring.Hits) ----------------

@pytest.mark.parametrize("seed,overrides", [(11, {}), (12, {"qa_page_weight": 0.0, "page_weight": 0.3}),
                                            (13, {"threshold": 0.05}), (14, {"span_weight": 0.0})])
def test_the_searched_scores_are_the_scores_of_every_passage(seed: int, overrides: dict, monkeypatch) -> None:
    """The search computes the proximity factor only where a score can reach its threshold
    or be the top one (its bound without the factor); what it reads of the scores (which
    passages reach the threshold, their scores, the top score) is exactly what every
    passage's scores give (query_scores, pinned above against the plain formula)."""
    for name in [n for n in overrides if n in CONSTANTS]:
        module, attr = CONSTANTS[name]
        monkeypatch.setattr(module, attr, overrides.pop(name))
    corpus = generate_corpus(40, 40, seed=seed)
    settings = Settings.load(env={}, progress=False, index_workers=1, **overrides)
    analyzer = make_analyzer(settings.retrieval)
    retriever = OursRetriever(settings.retrieval, corpus.pages, build_data(corpus.pages, "v", settings.retrieval, analyzer), analyzer,
                              guideline="default")
    thresholds = retriever._thresholds()
    above_any = below_any = 0
    kinds: set[bool] = set()
    # a corpus word among words the corpus never uses: a score below the threshold, over the floor
    diluted = [q + extra for q in corpus.queries[:10] for extra in ("火山", "火山と噴火", "火山と噴火と深海")]
    for question in [*corpus.queries, "存在しない語彙ばかりの質問です", *diluted]:
        query = retriever.query(question)[0]
        every, _, unknown = retriever.query_scores(query)
        hits = retriever.scorer.query_hits(query, thresholds)
        reaching = np.flatnonzero(every >= thresholds)
        listed = hits.rows[hits.scores >= (thresholds[hits.rows] if isinstance(thresholds, np.ndarray) else thresholds)]
        assert np.array_equal(listed, reaching), question
        assert np.array_equal(hits.dense(len(every))[reaching], every[reaching])
        assert np.array_equal(hits.scores, every[hits.rows])  # a listed score is exact
        assert hits.top == float(every.max()) and hits.unknown == unknown
        # what the search reads (Hits.reaching): off the listed scores, or off every
        # passage's when the scorer computed them all
        got_rows, got_scores = hits.reaching(thresholds)
        assert np.array_equal(got_rows, reaching) and np.array_equal(got_scores, every[reaching]), question
        assert hits.reaches(thresholds) == bool(len(reaching)), question
        if len(reaching):  # a cut at the top score is reached, the next float above it not
            best = np.float32(hits.top)
            assert hits.reaches(best) and not hits.reaches(np.nextafter(best, np.float32(2))), question
        kinds.add(hits.every is not None)
        above_any += len(reaching)
        # below the threshold, the reference floor (settings.retrieval.reference_floor): when no passage
        # reaches its threshold, every passage over the floor is listed, exactly
        floor = 0.01
        low = retriever.scorer.query_hits(query, thresholds, floor)
        if len(reaching):
            assert np.array_equal(low.rows, hits.rows) and np.array_equal(low.scores, hits.scores)
        else:
            over = np.flatnonzero(every >= floor)
            assert np.array_equal(low.rows[low.scores >= floor], over), question
            assert np.array_equal(low.scores, every[low.rows]) and low.top == float(every.max())
            assert not len(low.reaching(thresholds)[0]) and not low.reaches(thresholds)
            assert low.reaches(floor) == bool(len(over)), question
            got_rows, got_scores = low.reaching(floor)
            assert np.array_equal(got_rows, over) and np.array_equal(got_scores, every[over]), question
            below_any += len(over)
    assert above_any > 0 and below_any > 0
    assert kinds == {True, False}  # both ways of reading them were taken


# --- the stored line analyses (retrieval.lines) -------------------------------------------

LINE_KINDS = [
    "胸腺腫の治療について教えてください。",  # framing words: no terms as a question's would be
    "治療費が心配なときは、ソーシャルワーカーに相談できます。",
    "手術のあと、3日以内に歩く練習を始めます。",  # 後 joined, a figure
    "・吐き気止めの薬を使います",  # a list item
    "次のような症状があるときは連絡してください：",
    "項目 | 早期ダンピング症候群 | 後期ダンピング症候群",  # a table's header row and a row
    "起こる時期 | 食後30分以内 | 食後2〜3時間",
    "お薬の飲み方は何日おきですか",  # a question number, a stray prefix
    "EGFR遺伝子変異とPD-L1の検査、80mgの投与。",
    "費用の自己負担額には上限があります。",
    "うちの父は抗がん剤治療中で、髪が抜けるのが不安です。",
    "Q12 副作用",
]


def _pages_with_every_kind_of_line(seed: int) -> list[PageVersion]:
    """Generated pages, each given some of LINE_KINDS (and a blank line), titles included."""
    rng = np.random.default_rng(seed)
    out = []
    for i, page in enumerate(generate_corpus(12, 1, seed=seed).pages):
        lines = list(page.lines)
        for k in rng.choice(len(LINE_KINDS), size=5, replace=False):
            lines.insert(int(rng.integers(1, len(lines) + 1)), LINE_KINDS[int(k)])
        lines.insert(int(rng.integers(1, len(lines))), "")
        title = page.title if i % 3 else "治療のあとの生活について教えてください"
        out.append(dataclasses.replace(page, title=title, lines=tuple(lines)))
    return out


def _bigrams_of(text: str) -> set[str]:
    """The character bigrams extract compares (chatbot.extract._bigrams, as it always was)."""
    import unicodedata

    t = "".join(ch for ch in unicodedata.normalize("NFKC", text).lower() if ch.isalnum())
    return {t[i:i + 2] for i in range(len(t) - 1)}


@pytest.mark.parametrize("seed,workers", [(21, 1), (22, 2)])
def test_stored_line_analyses_equal_a_fresh_analysis_of_the_same_lines(seed: int, workers: int,
                                                                        monkeypatch) -> None:
    """What the index stores of every line (made in the build's own MeCab pass, in worker
    processes too) is what analysing that line afresh gives: its terms as the retriever's
    analyzer reads a question's, its letters (the same bigrams extract always compared),
    the answer kinds it gives, the lines it is read with; and a page's answer kinds."""
    from guiderag.chatbot.answer_type import gives
    from guiderag.chatbot.extract import line_context
    from guiderag.retrieval import answer_kinds, build
    from guiderag.retrieval.lines import ComputedLines, StoredLines

    monkeypatch.setattr(build, "_PARALLEL_MIN_CHARS", 0)
    monkeypatch.setattr(build, "_CHUNK_PAGES", 2)
    pages = _pages_with_every_kind_of_line(seed)
    settings = Settings.load(env={}, progress=False, index_workers=workers)
    analyzer = make_analyzer(settings.retrieval)
    retriever = OursRetriever(settings.retrieval, pages, build_data(pages, "v", settings.retrieval, analyzer), analyzer,
                              guideline="default")
    stored = retriever.line_analyses
    assert isinstance(stored, StoredLines)
    fresh = ComputedLines(retriever.analyze)
    framed = 0
    for page in retriever.pages:
        assert stored.terms(page, 0) == frozenset(retriever.analyze(page.title))
        for n, text in enumerate(page.lines, start=1):
            got, want = stored.line(page, n), fresh.line(page, n)
            assert got == want, (page.url, n, text)
            assert got.terms == frozenset(retriever.analyze(text))
            framed += got.terms != frozenset(analyzer(text))  # framing words are no terms here
            pairs = {got.flat[i:i + 2] for i in range(len(got.flat) - 1)}
            assert pairs == _bigrams_of(text)
            assert list(got.context) == line_context(page, n)
            for kind in answer_kinds.GIVES:
                assert bool(got.gives & answer_kinds.BITS[kind]) == gives(text, frozenset({kind}))
        assert stored.page_gives(page) == fresh.page_gives(page)
        assert stored.page_units(page, title=True) == fresh.page_units(page, title=True)
    assert framed > 0  # the pages hold lines whose question-view terms differ from the index's
    # a page object the index does not hold is analysed afresh
    other = dataclasses.replace(retriever.pages[0], lines=("別の行です。",))
    assert stored.line(other, 1) == fresh.line(other, 1)


# --- the coverage decision reads the index, not MeCab (retrieval.evidence, chatbot.coverage) --

# What chatbot.coverage_features read as odds on a line before the index stored it (the
# plain rule, NFKC text).
ODDS_LINE = re.compile(r"[0-9０-９]+\s*(?:[%％]|パーセント|割)|人に\s*[0-9０-９一二三四五六七八九十]+\s*人")
# ... and the units of its figures (2時間, 3日, 50歳), each spelling as one unit.
UNIT_LINE = re.compile(r"[0-9〇一二三四五六七八九十数]\s*(?:万|千)?\s*(週間|時間|か月|ヶ月|カ月|箇月|分|日|週|年|歳|回|円|度)")
UNIT_OF = {"分": "分", "時間": "時間", "日": "日", "週": "週", "週間": "週", "か月": "月", "ヶ月": "月",
           "カ月": "月", "箇月": "月", "月": "月", "年": "年", "歳": "歳", "回": "回", "度": "回", "円": "円"}


def _retriever_of(pages: list[PageVersion], **overrides) -> OursRetriever:
    settings = Settings.load(env={}, progress=False, index_workers=1, **overrides)
    analyzer = make_analyzer(settings.retrieval)
    return OursRetriever(settings.retrieval, pages, build_data(pages, "v", settings.retrieval, analyzer), analyzer, guideline="default")


def test_the_evidence_read_off_the_index_equals_the_page_matrix_and_fresh_titles(monkeypatch) -> None:
    """retrieval.evidence reads each page's distinct terms, the pages holding a term with its
    weight there, and the best page's title terms from the index (one term matrix, the
    stored titles' terms): the same as the page-term matrix alone and MeCab on the title."""
    import unicodedata

    from guiderag.chatbot.coverage import page_facts
    from guiderag.chatbot.coverage_features import PageFacts
    from guiderag.retrieval import evidence

    pages = _pages_with_every_kind_of_line(31)
    pages[1] = dataclasses.replace(pages[1], lines=(*pages[1].lines, "5年生存率は約70%です。", "10人に1人です"))
    retriever = _retriever_of(pages)
    cache = evidence._cache(retriever)
    page_matrix = retriever.data.level("terms", "pages")  # CSR, one row per page
    assert np.array_equal(cache.lengths, np.diff(page_matrix.indptr))
    by_column = page_matrix.tocsc()
    by_column.sort_indices()
    for col in range(len(retriever.data.term_vocab)):
        rows, values = evidence._page_rows(cache, col)
        lo, hi = by_column.indptr[col], by_column.indptr[col + 1]
        assert np.array_equal(rows, by_column.indices[lo:hi]) and np.array_equal(values, by_column.data[lo:hi])
    odds = units = 0
    for row, page in enumerate(retriever.pages):
        title = unicodedata.normalize("NFKC", page.title)
        assert evidence._title_terms(retriever, cache, row) == frozenset(t.text for t in retriever.analyzer.terms(title))
        facts = page_facts(page, retriever.line_analyses)
        assert facts == PageFacts.of((page.title, *page.lines))
        texts = [unicodedata.normalize("NFKC", t) for t in (page.title, *page.lines)]
        want = any(ODDS_LINE.search(t) for t in texts)
        assert facts.odds == want
        assert facts.units == {UNIT_OF[u] for t in texts for u in UNIT_LINE.findall(t)}
        odds += want
        units += bool(facts.units)
    assert odds > 0 and units > 0


@pytest.mark.parametrize("seed", [41, 42])
def test_the_coverage_decision_on_stored_analyses_equals_it_on_fresh_ones(seed: int) -> None:
    """The coverage model's features (line coverage, the pages' figure kinds and odds, the
    query's evidence) measured on the line analyses the index stored are those measured on
    the same lines analysed afresh by MeCab, question by question, with and without keywords."""
    from guiderag.chatbot.coverage import measure_inputs
    from guiderag.retrieval.lines import ComputedLines

    corpus = generate_corpus(30, 30, seed=seed)
    pages = [*corpus.pages[:24], *_pages_with_every_kind_of_line(seed)]
    retriever = _retriever_of(pages)
    fresh = ComputedLines(retriever.analyze)
    questions = [*corpus.queries, "手術のあと、いつから歩けますか", "費用の自己負担額はいくらですか",
                 "5年生存率は何パーセントですか", "存在しない語彙ばかりの質問です"]
    measured = 0
    for question in questions:
        result = retriever.search(question)
        for keywords in ((), tuple(result.keywords), ("副作用", "費用")):
            stored = measure_inputs(question, result, retriever, retriever.analyze, keywords=keywords)
            again = measure_inputs(question, result, retriever, retriever.analyze, keywords=keywords, lines=fresh)
            assert stored == again, (question, keywords)
            assert stored.measure().values == again.measure().values
            measured += bool(result.passages)
    assert measured > 0
