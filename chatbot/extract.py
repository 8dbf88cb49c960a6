"""EXTRACT mode (default, offline, no model): verbatim lines of the reference that answer.

Every line of every reference passage is scored by the question's terms it contains
(the line's analysis: retrieval.lines, made when the index was built, else computed with
the analyzer given), each weighted by the retriever's corpus IDF (else an IDF over the
reference's own lines), plus a character-bigram bonus for wording MeCab splits
differently and a share of its passage's retrieval score. With the retriever's
query slots a line is read with its context: a term found only in its heading or, for a
table row, in the table's header row counts at CONTEXT_WEIGHT (起こる時期 | 食後30分以内
answers a question about 後期ダンピング症候群 named only in the header). Lines are then taken in
this order, each with its page's title line and the heading or introducing sentence it
needs, until about AnswerConfig.answer_chars characters, never cutting a line:
the sentence under the top page's first heading that says as much of the question as any
of its lines (it restates the question, or states the answer); the best lines of the top
passage that has any; every line sharing a question term, by
score damped by its passage's rank (a Q&A page's lines by the page's best passage); the neighbours of the best lines; headings; and,
where room is left, the other lines of the top page when it is a Q&A page (it answers one
question as a whole), best first.
The answer is those stored lines, joined by newlines. Measured on the JSQuAD dev set
(see the chatbot report): about 0.94 of in-scope answers contain the gold answer.
"""
from __future__ import annotations

import math
import unicodedata
from typing import Callable, Mapping, NamedTuple, Sequence

from guiderag.retrieval.normalize import normalize
from guiderag.retrieval.answer_kinds import mask
from guiderag.retrieval.lines import ComputedLines, LineAnalyses
from guiderag.retrieval.passages import is_question_title
from guiderag.retrieval.result import Passage
from guiderag.retrieval.retriever import Slots
from guiderag.store import PageVersion, structure
from guiderag.store.structure import HEADING_MAX_CHARS, is_heading, is_list_item

from .answer import ShownPassage
from .answer_type import asked_kinds
from .shown import Pick, TitleLines, context_line, line_key, render

Analyze = Callable[[str], Sequence[str]]
# Slots: the retriever's query slots (retrieval.retriever): (mass, {corpus term: lambda}) per
# question term; a line finds a slot at the best lambda of the alternatives it holds.
# Bonus of a line that gives the kind of answer the question asks for (chatbot.answer_type:
# a duration for どのくらい, a permission for 〜てもいい), against its overlap score in [0, 1].
ANSWER_TYPE_WEIGHT = 0.35
# A line introducing a list (次のような..., ending with a colon) brings this many of the
# short lines after it: without its items it answers nothing.
LIST_ITEMS_BROUGHT = 6
# Weight of the passage's retrieval score against the line's own overlap score.
PASSAGE_WEIGHT = 0.25
# Weight of the character-bigram overlap (fraction of the question's bigrams in the line),
# a bonus on the line's term overlap. Not retrieval's bigram channel share
# (retrieval.scoring.BIGRAM_WEIGHT, 0.3, a passage's score): a different quantity
# that happened to share its name; this one is used here only, as it always was.
LINE_BIGRAM_WEIGHT = 0.5
# How many of the best lines bring their next and previous lines as fillers.
NEIGHBOUR_SOURCES = 3
# How many lines of the top-ranked passage go before the line-score order.
TOP_PASSAGE_LINES = 2
# A line's score is damped by (its passage's score / the top passage's) ** this.
PASSAGE_RANK_POWER = 2.0
# A line is read with its context: the heading above it and, for a row of a table, the
# table's header row (起こる時間 | 食後30分以内 says nothing without 項目 | 早期ダンピング症候群).
# A question term found only in the context counts at this weight of one found in the line.
CONTEXT_WEIGHT = 0.5


class ScoredLine(NamedTuple):
    """A reference line's score for the question (score_lines)."""

    pick: Pick
    score: float
    overlap: float  # weighted share of the question's terms found in the line
    order: int  # position in the reference (ties keep reading order)


def question_terms(question: str, keywords: Sequence[str], analyze: Analyze) -> list[str]:
    """Distinct terms of the question and the keywords, in order."""
    terms = list(analyze(normalize(question)))
    for kw in keywords:
        terms.extend(analyze(normalize(kw)))
    return list(dict.fromkeys(t for t in terms if t))


def _bigrams(text: str) -> set[str]:
    t = "".join(ch for ch in normalize(text).lower() if ch.isalnum())
    return {t[i : i + 2] for i in range(len(t) - 1)}


def slot_overlap(slots: Slots, terms: set[str] | frozenset[str],
                 context: set[str] | frozenset[str] = frozenset(), context_weight: float = CONTEXT_WEIGHT,
                 total: float | None = None) -> float:
    """The share of the slots' mass a set of terms finds (each slot at its best lambda);
    terms found only in `context` (a line's heading, its table's header row) count at
    `context_weight`. `total`: the slots' mass, when the caller summed it once for many lines."""
    return _overlap(_items(slots), terms, context, context_weight,
                    sum(m for m, _ in slots) if total is None else total)


Items = list[tuple[float, tuple[tuple[str, float], ...]]]


def _items(slots: Slots) -> Items:
    """The slots as (mass, its alternatives' (term, lambda) pairs): read once for many lines."""
    return [(mass, tuple(alternatives.items())) for mass, alternatives in slots]


def _overlap(slots: Items, terms: set[str] | frozenset[str], context: set[str] | frozenset[str],
             context_weight: float, total: float) -> float:
    """slot_overlap of slots read by _items."""
    if total <= 0:
        return 0.0
    found = 0.0
    for mass, alternatives in slots:
        best = 0.0
        for a, lam in alternatives:
            if a in terms:
                if lam > best:
                    best = lam
            elif context and a in context:
                lam = lam * context_weight
                if lam > best:
                    best = lam
        found += mass * best
    return found / total


def table_header(page: PageVersion, number: int) -> int | None:
    """The header row (the first row) of the table that line `number` is a later row of."""
    return structure.table_header(page.lines, number)


def line_context(page: PageVersion, number: int, heading_max_chars: int = HEADING_MAX_CHARS) -> list[int]:
    """The lines a line is read with: its heading (or the sentence introducing its list) and,
    for a table row, the table's header row."""
    out = []
    c = context_line(page, number, heading_max_chars)
    if c is not None:
        out.append(c)
    h = table_header(page, number)
    if h is not None and h not in out:
        out.append(h)
    return out


def _lines(analyze: Analyze, lines: LineAnalyses | None, heading_max_chars: int) -> LineAnalyses:
    """The line analyses to read: the retriever's when given, else computed with `analyze`."""
    return lines if lines is not None else ComputedLines(analyze, heading_max_chars)


def distinct_passages(passages: Sequence[Passage]) -> list[Passage]:
    """The passages without those of a page whose text another URL already gave (the same
    page reached as page.html and page.html?from=toc): its lines would be shown twice."""
    first_url: dict[str, str] = {}
    out = []
    for p in passages:
        url = first_url.setdefault(p.page.content_hash or p.page.url, p.page.url)
        if url == p.page.url:
            out.append(p)
    return out


def score_lines(
    question: str,
    keywords: Sequence[str],
    passages: Sequence[Passage],
    analyze: Analyze,
    idf: Mapping[str, float] | Callable[[str], float] | None = None,
    slots: Slots | None = None,
    heading_max_chars: int = HEADING_MAX_CHARS,
    lines: LineAnalyses | None = None,
) -> list[ScoredLine]:
    """Every distinct non-blank reference line with its score, best first.

    With `slots` (the retriever's), a line's overlap is the share of their mass it finds,
    expansions included (a line saying 脱毛 finds 髪が抜ける); else the IDF share of the
    question's terms. On an article page (a title naming its subject, not asking a
    question) the words its title holds do not add to a line's score, only to its overlap:
    every line of the page is about its subject, and the title is shown above the line;
    a line that also says what else the question asks is the one that answers it. A line
    giving the kind of answer asked for (chatbot.answer_type) gains ANSWER_TYPE_WEIGHT. `lines`: the lines' analyses (the retriever's, stored with
    its index), else computed with `analyze`."""
    lines = _lines(analyze, lines, heading_max_chars)
    q_bigrams = _bigrams(question)
    kinds = mask(asked_kinds(question))
    stored_context = lines.heading_max_chars == heading_max_chars
    # per line: its pick, its terms, how many of the question's bigrams it holds, whether
    # it gives the kind of answer asked for, the terms of the lines it is read with, the
    # terms of its page's title when that names the page's subject (an article's)
    entries: list[tuple[Pick, frozenset[str], int, bool, frozenset[str], frozenset[str]]] = []
    seen: set[tuple[str, int, int]] = set()
    for passage in distinct_passages(passages):
        page = passage.page
        score = float(passage.score)
        subject = frozenset() if is_question_title(page.title) else lines.terms(page, 0)
        for n in passage.lines:
            key = line_key(page, n)
            if key in seen or not page.line(n).strip():
                continue
            seen.add(key)
            pick = Pick(page, n, score)
            view = lines.line(page, n)
            context: frozenset[str] = frozenset()
            if slots and CONTEXT_WEIGHT > 0:
                around = view.context if stored_context else line_context(page, n, heading_max_chars)
                if len(around) == 1:
                    context = lines.terms(page, around[0])
                elif around:
                    context = frozenset().union(*(lines.terms(page, c) for c in around))
            # a question bigram is in the line when it is two neighbours of its letters
            found = sum(map(view.flat.__contains__, q_bigrams))
            entries.append((pick, view.terms, found, bool(kinds & view.gives), context, subject))
    top_passage = max((float(p.score) for p in passages), default=0.0) or 1.0
    weight: dict[str, float] = {}
    q_terms: list[str] = []
    if not slots:  # the IDF share of the question's terms
        q_terms = question_terms(question, keywords, analyze)
        weight = _weights(q_terms, [terms for _, terms, _, _, _, _ in entries], idf)
    max_weight = sum(weight.values()) or 1.0
    slot_mass = sum(m for m, _ in slots) if slots else 0.0
    items = _items(slots) if slots else []
    scored = []
    for order, (pick, terms, found, gives_kind, context, subject) in enumerate(entries):
        if slots:
            overlap = _overlap(items, terms, context, CONTEXT_WEIGHT, slot_mass)
            own = _overlap(items, terms - subject, context - subject, CONTEXT_WEIGHT, slot_mass) if subject else overlap
        else:
            overlap = sum(weight[t] for t in q_terms if t in terms) / max_weight
            own = sum(weight[t] for t in q_terms if t in terms and t not in subject) / max_weight
        bigram = found / len(q_bigrams) if q_bigrams else 0.0
        score = own * (1.0 + LINE_BIGRAM_WEIGHT * bigram) + PASSAGE_WEIGHT * pick.score / top_passage
        if gives_kind:
            score += ANSWER_TYPE_WEIGHT
        scored.append(ScoredLine(pick, score, overlap, order))
    scored.sort(key=lambda s: (-(s.overlap > 0), -s.score, s.order))
    return scored


def line_coverage(
    question: str,
    passages: Sequence[Passage],
    analyze: Analyze,
    idf: Mapping[str, float] | Callable[[str], float] | None = None,
    keywords: Sequence[str] = (),
    slots: Slots | None = None,
    lines: LineAnalyses | None = None,
) -> float:
    """How much of the question the best single reference line speaks to, in [0, 1].

    The IDF mass of the question's terms found in one line (read with its page title),
    over the IDF mass of all the question's terms, including terms the corpus never uses
    (the retriever gives those the highest IDF). A passage can clear the retrieval
    threshold on terms scattered over a page; a question the guideline answers usually
    has one line naming most of what it asks about. Measured on the JSQuAD dev set this
    separates out-of-scope questions better than the passage score alone. Keywords (from a
    model) count as question terms: they bridge a patient's words to the guideline's.
    With `slots` (the retriever's query, expansions included), the share of their mass
    one line with its title finds, each slot at its best alternative's lambda. `lines`:
    the lines' analyses (the retriever's, stored with its index), else computed with
    `analyze`.
    """
    lines = _lines(analyze, lines, HEADING_MAX_CHARS)
    if slots is not None:
        best = 0.0
        mass = sum(m for m, _ in slots)
        items = _items(slots)
        for p in passages:
            title = lines.terms(p.page, 0)  # read as the line's own terms (weight 1), not as context
            for n in p.lines:
                best = max(best, _overlap(items, lines.terms(p.page, n), title, 1.0, mass))
        return best
    q_terms = question_terms(question, keywords, analyze)
    if not q_terms:
        return 0.0
    line_terms = [lines.terms(p.page, n) for p in passages for n in p.lines]
    weight = _weights(q_terms, line_terms, idf)
    total = sum(weight.values())
    if total <= 0:
        return 0.0
    best = 0.0
    index = 0
    for p in passages:
        title = lines.terms(p.page, 0)
        for _ in p.lines:
            terms = line_terms[index] | title
            index += 1
            best = max(best, sum(weight[t] for t in q_terms if t in terms) / total)
    return best


def _weights(
    q_terms: Sequence[str],
    line_terms: Sequence[frozenset[str]],
    idf: Mapping[str, float] | Callable[[str], float] | None,
) -> dict[str, float]:
    """IDF of each question term: the corpus's when given, else over the reference lines."""
    weights: dict[str, float] = {}
    n = len(line_terms)
    for t in q_terms:
        value: float | None = None
        if callable(idf):
            value = idf(t)
        elif idf is not None:
            value = idf.get(t)
        if value is None:
            df = sum(1 for terms in line_terms if t in terms)
            value = math.log(1.0 + (n + 1) / (df + 0.5)) if df else 0.0
        weights[t] = max(0.0, float(value))
    return weights


def extract(
    question: str,
    keywords: Sequence[str],
    passages: Sequence[Passage],
    budget: int,
    analyze: Analyze,
    idf: Mapping[str, float] | Callable[[str], float] | None = None,
    *,
    heading_max_chars: int = HEADING_MAX_CHARS,
    slots: Slots | None = None,
    lines: LineAnalyses | None = None,
) -> tuple[str, list[ShownPassage]]:
    """The verbatim answer (lines joined by newlines) and where each line came from.

    Returns ("", []) when the reference has no non-blank line. `lines`: the reference
    lines' analyses (the retriever's), else computed with `analyze`.
    """
    passages = distinct_passages(passages)
    rest = rest_of_page(passages)
    scored = score_lines(question, keywords, [*passages, *rest], analyze, idf, slots, heading_max_chars, lines)
    rest_keys = {line_key(p.page, n) for p in rest for n in p.lines}
    # the top Q&A page's lines the reference does not hold: shown only where room is left
    rest_picks = [sl.pick for sl in scored if sl.pick.key in rest_keys]
    scored = [sl for sl in scored if sl.pick.key not in rest_keys]
    if not scored:
        return "", []
    by_key = {sl.pick.key: sl for sl in scored}
    titles = TitleLines()  # shared with render: each page's title line looked for once

    heads: dict[tuple[int, int], bool] = {}  # by page object and line: asked of a line again and again

    def heading(pick: Pick) -> bool:
        at = (id(pick.page), pick.line)
        found = heads.get(at)
        if found is None:
            found = heads[at] = titles(pick.page) == pick.line or is_heading(pick.page.line(pick.line),
                                                                            heading_max_chars)
        return found

    # Retrieval ranked the passages with more than words (page title, bigrams, BM25): the
    # best lines of the first passage that has any come first; then every line sharing a
    # question term, by its score damped by its passage's rank. Headings and title lines
    # are not answers on their own: they come in as the heading of a picked line, or last.
    # A passage is headed by its page's title, so the top one may score by the title alone
    # (a Q&A page whose question is the patient's) with no line of its own sharing a
    # term: the other passages of that page are looked at before any other page's.
    first: list[Pick] = []
    top_page = passages[0].page.url if passages else None
    for passage in sorted(passages, key=lambda p: p.page.url != top_page):
        in_passage = sorted(
            (by_key[k] for n in passage.lines if (k := line_key(passage.page, n)) in by_key),
            key=lambda sl: (-sl.score, sl.order),
        )
        first = [sl.pick for sl in in_passage if sl.overlap > 0 and not heading(sl.pick)][:TOP_PASSAGE_LINES]
        if first:
            break
    lead = _lead_line(scored, passages[0].page, heading, titles, heading_max_chars) if passages else None
    if lead is not None:
        first = list(dict.fromkeys([lead, *first]))
    top = max((float(p.score) for p in passages), default=0.0) or 1.0
    rank_of = _rank_scores(passages)
    ranked = sorted(
        (sl for sl in scored if sl.overlap > 0),
        key=lambda sl: (-sl.score * (max(rank_of.get(_page_key(sl.pick.page), sl.pick.score), 0.0) / top)
                        ** PASSAGE_RANK_POWER, sl.order),
    )
    positive: list[Pick] = []
    headings: list[Pick] = []
    for sl in ranked:
        (headings if heading(sl.pick) else positive).append(sl.pick)
    ordered = first + positive or headings or [scored[0].pick]
    ordered = _with_list_items(ordered, heading_max_chars)
    # Fillers: the lines around the best ones (an answer often runs on to the next line).
    fillers: list[Pick] = []
    for best in list(dict.fromkeys(ordered))[:NEIGHBOUR_SOURCES]:
        page = best.page
        for n in (best.line + 1, best.line - 1):
            if 1 <= n <= len(page.lines):
                fillers.append(Pick(page, n, best.score))
    return render(ordered + fillers + headings + rest_picks, budget, heading_max_chars=heading_max_chars,
                  titles=titles)


def _lead_line(scored: Sequence[ScoredLine], page: PageVersion, heading: Callable[[Pick], bool],
               titles: TitleLines, heading_max_chars: int) -> Pick | None:
    """The line under the first heading of the top page that says as much of the question
    as any line of the page (a heading that restates the question, or states the page's
    answer to it: the sentence under it is that answer, often in words of its own), when
    that line is not a heading itself; else None. The page's title line is no such heading."""
    own = [sl for sl in scored if _page_key(sl.pick.page) == _page_key(page)]
    best = max((sl.overlap for sl in own if not heading(sl.pick)), default=0.0)
    title = titles(page)
    for sl in sorted(own, key=lambda sl: sl.pick.line):
        n = sl.pick.line
        if n == title or not heading(sl.pick) or sl.overlap <= 0 or sl.overlap < best:
            continue
        if n < len(page.lines) and page.line(n + 1).strip() and not is_heading(page.line(n + 1), heading_max_chars):
            return Pick(page, n + 1, sl.pick.score)
        return None
    return None


def _rank_scores(passages: Sequence[Passage]) -> dict[tuple[str, int, str], float]:
    """The score a Q&A page's lines are damped by: its best passage's (by page: URL, version
    and title, a PDF's sections sharing the first two). The page answers one question as a
    whole; which of its sections retrieval scored higher says little about which of its
    lines answers. A line of an article page is damped by its own passage's score."""
    out: dict[tuple[str, int, str], float] = {}
    for p in passages:
        if is_question_title(p.page.title):
            key = _page_key(p.page)
            out[key] = max(out.get(key, 0.0), float(p.score))
    return out


def _page_key(page: PageVersion) -> tuple[str, int, str]:
    return (page.url, page.version, page.title)


def rest_of_page(passages: Sequence[Passage]) -> list[Passage]:
    """The lines of the top passage's page that no reference passage holds, as one passage
    scored like the page's lowest passage, when that page is a Q&A page (its title asks one
    question: retrieval.passages.is_question_title): the page answers its question as a
    whole, and the line that answers a patient's wording may lie in a section retrieval
    ranked under the threshold (出産経験がない, under リスクを高める要因, for 子どもを産んでいないと
    なりやすい). Empty for an article page or when the reference holds the whole page."""
    if not passages:
        return []
    page = passages[0].page
    if not is_question_title(page.title):
        return []
    own = [p for p in passages if _page_key(p.page) == _page_key(page)]
    held = {n for p in own for n in p.lines}
    missing = tuple(n for n in range(1, len(page.lines) + 1) if n not in held and page.line(n).strip())
    if not missing:
        return []
    return [Passage(page, missing, min(float(p.score) for p in own))]


_INTRODUCES = ("次のような", "次の", "以下のような", "以下の", "主な")


def introduces_list(line: str) -> bool:
    """A sentence announcing the lines after it (次のような場合があります。/ 主な症状：)."""
    text = unicodedata.normalize("NFKC", line).strip()
    return text.endswith((":", "：")) or (any(w in text for w in _INTRODUCES) and text.endswith(("。", "す")))


def _with_list_items(picks: list[Pick], heading_max_chars: int) -> list[Pick]:
    """Each of the first picks that introduces a list is followed by its items: the short
    lines after it, up to the next sentence (items are often stored without bullets)."""
    out: list[Pick] = []
    for index, pick in enumerate(picks):
        out.append(pick)
        if index >= NEIGHBOUR_SOURCES or not introduces_list(pick.page.line(pick.line)):
            continue
        page = pick.page
        for n in range(pick.line + 1, min(len(page.lines), pick.line + LIST_ITEMS_BROUGHT) + 1):
            text = page.line(n)
            if not text.strip() or not (is_list_item(text) or is_heading(text, heading_max_chars) or "|" in text):
                break
            out.append(Pick(page, n, pick.score))
    return out
