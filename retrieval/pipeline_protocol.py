"""The published protocol, literally, for reproduction side by side with ours.

Per page: strip HTML and every non-Japanese character, keep MeCab (default dictionary)
nouns, space-joined. Per query: scikit-learn `TfidfVectorizer()` with its DEFAULT
parameters fitted over the page texts plus the keyword text, cosine similarity of each
page to the keywords, rank, keep pages scoring at least the threshold (0.2), concatenate
their texts in rank order, collapse whitespace, truncate to 4,096 characters.

Its known faults are kept on purpose (one-character nouns dropped by the default
token_pattern, EGFR deleted, compounds split, IDF refitted per query...).

Only the page preprocessing (text -> nouns) is cached: it does not depend on the query.
For the answer contract, the literal reference is also expressed as Passages of whole
lines: the lines of the kept pages, in rank order, that lie entirely inside the
truncated literal reference (the literal string, cut mid-line, is in
`RetrievalResult.literal_reference`).
"""
from __future__ import annotations

import math
import re
from collections import Counter
from typing import Sequence

import numpy as np

from guiderag.guideline import DEFAULT_GUIDELINE
from guiderag.scopes import PROTOCOL, RetrievalConfig
from guiderag.store import PageVersion
from guiderag.store.structure import title_line

from .analyzer import Analyzer
from .protocol_text import protocol_nouns
from .keywords import KEYWORD_COUNT, clean_keywords
from .result import Candidate, Passage, RetrievalResult
from .retriever import Retriever, Slots

_WS = re.compile(r"\s+")


def starts_with_title(page: PageVersion) -> bool:
    """True when the page's first line is its title (store.structure's title line)."""
    return title_line(page.title, page.lines) == 1


def page_text(page: PageVersion) -> str:
    """The page's text as the protocol saw it: its title (when not already its first
    line) and its lines."""
    lines = list(page.lines)
    if page.title and not starts_with_title(page):
        lines.insert(0, page.title)
    return "\n".join(lines)


def collapse(text: str) -> str:
    return _WS.sub(" ", text).strip()


def protocol_scores(docs: Sequence[str], keyword_text: str) -> np.ndarray:
    """Cosine of each document to the keyword text, TF-IDF refitted on docs + keywords."""
    from sklearn.feature_extraction.text import TfidfVectorizer  # the protocol's only need of it

    vectorizer = TfidfVectorizer()
    try:
        matrix = vectorizer.fit_transform(list(docs) + [keyword_text])
    except ValueError:  # "empty vocabulary": nothing the default token_pattern keeps
        return np.zeros(len(docs))
    # rows are L2-normalised (norm='l2'), so the dot product is the cosine
    return np.asarray((matrix[:-1] @ matrix[-1].T).todense()).ravel()


def literal_reference(texts: Sequence[str], limit: int) -> str:
    """Concatenate in rank order, collapse whitespace, truncate to `limit` characters."""
    return collapse(" ".join(texts))[:limit]


class ProtocolRetriever(Retriever):
    """The literal protocol over the store's current pages (no index: it refits per query)."""

    pipeline = PROTOCOL

    def __init__(self, config: RetrievalConfig, pages: Sequence[PageVersion], corpus_version: str,
                 docs: Sequence[str] | None = None, *, guideline: str = DEFAULT_GUIDELINE) -> None:
        super().__init__(config, pages, corpus_version, guideline=guideline)
        self.texts = [page_text(p) for p in self.pages]
        self.docs = list(docs) if docs is not None else [protocol_nouns(t) for t in self.texts]
        df: Counter[str] = Counter()
        for doc in self.docs:
            df.update(set(doc.split()))
        self._df = df
        self._analyzer = Analyzer()

    def idf(self, term: str) -> float:
        n = len(self.docs)
        return math.log((1 + n) / (1 + self._df.get(term, 0))) + 1.0  # sklearn's smooth idf

    def analyze(self, text: str) -> list[str]:
        return self._analyzer(text)

    def query_slots(self, question: str, keywords: Sequence[str] = (), context: Sequence[str] = ()) -> list[Slots]:
        """None: the protocol searches with its keywords' nouns, not with slots."""
        return []

    def offline_keywords(self, question: str, k: int | None = None) -> list[str]:
        """The protocol's own nouns of the question with the highest IDF over its page texts."""
        k = KEYWORD_COUNT if k is None else k
        nouns = list(dict.fromkeys(protocol_nouns(question).split()))
        ranked = sorted(range(len(nouns)), key=lambda i: (-self.idf(nouns[i]), i))
        return [nouns[i] for i in ranked[:k]]

    def search(self, question: str, keywords: Sequence[str] | None = None, *,
               context: Sequence[str] = ()) -> RetrievalResult:
        """As published: the keywords' nouns, never a conversation's `context` (the protocol
        reads every question alone)."""
        question = question or ""
        keywords = self.offline_keywords(question) if keywords is None else clean_keywords(keywords)
        if not keywords:
            return self.empty_result(
                question, keywords,
                "protocol: no keywords (the question has no Japanese nouns): not covered",
            )
        keyword_text = " ".join(keywords)
        scores = protocol_scores(self.docs, keyword_text)
        threshold = self.config.threshold
        order = [int(i) for i in np.argsort(-scores, kind="stable") if scores[i] >= threshold]
        top = float(scores.max()) if len(scores) else 0.0
        candidates = [Candidate(self.pages[i].url, self.pages[i].title, float(scores[i]), row=i) for i in order]
        literal = literal_reference([self.texts[i] for i in order], self.config.reference_chars)
        passages = self._line_passages(order, scores)
        notes: list[str] = []
        if not candidates:
            notes.append(f"protocol: no page scored at least the threshold {threshold} (best {top:.3f})")
        else:
            shown = sum(len(p.lines) for p in passages)
            total = sum(len([l for l in self.pages[i].lines if l.strip()]) for i in order)
            if shown < total:
                notes.append(
                    f"protocol: the literal reference was cut at {self.config.reference_chars} "
                    f"characters (mid-line); passages hold the {shown} whole lines inside it, of {total}"
                )
        return RetrievalResult(
            question=question,
            keywords=list(keywords),
            query_terms=keyword_text.split(),
            candidates=candidates,
            passages=passages,
            threshold=threshold,
            top_score=top,
            pipeline=self.pipeline,
            corpus_version=self.corpus_version,
            notes=notes,
            literal_reference=literal,
        )

    def _line_passages(self, order: Sequence[int], scores: np.ndarray) -> list[Passage]:
        """The whole lines of the kept pages lying inside the truncated literal reference."""
        limit = self.config.reference_chars
        position = 0  # characters of the literal reference consumed so far
        out: list[Passage] = []
        for i in order:
            page = self.pages[i]
            pieces: list[tuple[int, str]] = []
            if page.title and not starts_with_title(page):
                pieces.append((0, page.title))  # the title is in the literal text, not a line
            pieces.extend((n, line) for n, line in enumerate(page.lines, start=1))
            picked: list[int] = []
            for n, line in pieces:
                if not collapse(line):
                    continue
                # the raw line is never shorter than its collapsed form in the literal
                # text, so whole lines counted this way stay inside it and the budget
                cost = len(line) + (1 if position else 0)
                if position + cost > limit:
                    position = limit
                    break
                position += cost
                if n:
                    picked.append(n)
            if picked:
                out.append(Passage(page=page, lines=tuple(picked), score=float(scores[i])))
            if position >= limit:
                break
        return out
