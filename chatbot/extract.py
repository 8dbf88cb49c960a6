"""EXTRACT mode (default, offline, no model): verbatim lines of the reference that answer.

Every line of every reference passage is scored by the question's terms it contains
(retrieval.analyzer terms, NFKC), each weighted by its IDF: the retriever's corpus IDF
when it exposes one, else an IDF over the reference's own lines; a character-bigram
overlap breaks ties for wording MeCab splits differently. Lines are then taken best
first, each with its page's title line and the heading or introducing sentence it needs,
until about settings.answer_chars characters, never cutting a line; then the neighbours
of the best lines fill what is left. The answer is those stored lines, joined by newlines.
"""
from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from retrieval.result import Passage

from .answer import ShownPassage
from .shown import Pick, render

Analyze = Callable[[str], Sequence[str]]
# Weight of the passage's retrieval score against the line's own overlap score.
PASSAGE_WEIGHT = 0.25
# Weight of the character-bigram overlap (fraction of the question's bigrams in the line).
BIGRAM_WEIGHT = 0.5
# How many of the best lines bring their next and previous lines as fillers.
NEIGHBOUR_SOURCES = 3


@dataclass(frozen=True)
class ScoredLine:
    pick: Pick
    score: float
    overlap: float  # weighted share of the question's terms found in the line
    order: int  # position in the reference (ties keep reading order)


def question_terms(question: str, keywords: Sequence[str], analyze: Analyze) -> list[str]:
    """Distinct terms of the question and the keywords, in order."""
    terms = list(analyze(unicodedata.normalize("NFKC", question)))
    for kw in keywords:
        terms.extend(analyze(unicodedata.normalize("NFKC", kw)))
    return list(dict.fromkeys(t for t in terms if t))


def _bigrams(text: str) -> set[str]:
    t = "".join(ch for ch in unicodedata.normalize("NFKC", text).lower() if ch.isalnum())
    return {t[i : i + 2] for i in range(len(t) - 1)}


def score_lines(
    question: str,
    keywords: Sequence[str],
    passages: Sequence[Passage],
    analyze: Analyze,
    idf: Mapping[str, float] | Callable[[str], float] | None = None,
) -> list[ScoredLine]:
    """Every distinct non-blank reference line with its score, best first."""
    q_terms = question_terms(question, keywords, analyze)
    q_bigrams = _bigrams(question)
    entries: list[tuple[Pick, set[str], str]] = []
    seen: set[tuple[str, int, int]] = set()
    for passage in passages:
        for n in passage.lines:
            pick = Pick(passage.page, n, float(passage.score))
            text = passage.page.line(n)
            if pick.key in seen or not text.strip():
                continue
            seen.add(pick.key)
            entries.append((pick, set(analyze(unicodedata.normalize("NFKC", text))), text))
    weight = _weights(q_terms, [terms for _, terms, _ in entries], idf)
    top_passage = max((float(p.score) for p in passages), default=0.0) or 1.0
    max_weight = sum(weight.values()) or 1.0
    scored = []
    for order, (pick, terms, text) in enumerate(entries):
        overlap = sum(weight[t] for t in q_terms if t in terms) / max_weight
        bigram = len(q_bigrams & _bigrams(text)) / len(q_bigrams) if q_bigrams else 0.0
        score = overlap * (1.0 + BIGRAM_WEIGHT * bigram) + PASSAGE_WEIGHT * pick.score / top_passage
        scored.append(ScoredLine(pick, score, overlap, order))
    scored.sort(key=lambda s: (-(s.overlap > 0), -s.score, s.order))
    return scored


def line_coverage(
    question: str,
    passages: Sequence[Passage],
    analyze: Analyze,
    idf: Mapping[str, float] | Callable[[str], float] | None = None,
    keywords: Sequence[str] = (),
) -> float:
    """How much of the question the best single reference line speaks to, in [0, 1].

    The IDF mass of the question's terms found in one line (read with its page title),
    over the IDF mass of all the question's terms, including terms the corpus never uses
    (the retriever gives those the highest IDF). A passage can clear the retrieval
    threshold on terms scattered over a page; a question the guideline answers usually
    has one line naming most of what it asks about. Measured on the JSQuAD dev set this
    separates out-of-scope questions better than the passage score alone. Keywords (from a
    model) count as question terms: they bridge a patient's words to the guideline's.
    """
    q_terms = question_terms(question, keywords, analyze)
    if not q_terms:
        return 0.0
    lines = [set(analyze(unicodedata.normalize("NFKC", p.page.line(n)))) for p in passages for n in p.lines]
    weight = _weights(q_terms, lines, idf)
    total = sum(weight.values())
    if total <= 0:
        return 0.0
    best = 0.0
    titles: dict[tuple[str, int], set[str]] = {}
    index = 0
    for p in passages:
        key = (p.page.url, p.page.version)
        if key not in titles:
            titles[key] = set(analyze(unicodedata.normalize("NFKC", p.page.title)))
        title = titles[key]
        for _ in p.lines:
            terms = lines[index] | title
            index += 1
            best = max(best, sum(weight[t] for t in q_terms if t in terms) / total)
    return best


def _weights(
    q_terms: Sequence[str],
    line_terms: Sequence[set[str]],
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
) -> tuple[str, list[ShownPassage]]:
    """The verbatim answer (lines joined by newlines) and where each line came from.

    Returns ("", []) when the reference has no non-blank line.
    """
    scored = score_lines(question, keywords, passages, analyze, idf)
    if not scored:
        return "", []
    positive = [s.pick for s in scored if s.overlap > 0]
    ordered = positive or [scored[0].pick]
    # Fillers: the lines around the best ones (an answer often runs on to the next line).
    fillers: list[Pick] = []
    for best in ordered[:NEIGHBOUR_SOURCES]:
        page = best.page
        for n in (best.line + 1, best.line - 1):
            if 1 <= n <= len(page.lines):
                fillers.append(Pick(page, n, best.score))
    return render(ordered + fillers, budget)
