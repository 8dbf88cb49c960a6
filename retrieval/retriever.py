"""The one interface both pipelines implement: what the answer stage may ask of retrieval."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Sequence

from guiderag.guideline import DEFAULT_GUIDELINE
from guiderag.scopes import RetrievalConfig
from guiderag.store import PageVersion

from .lines import ComputedLines, LineAnalyses
from .result import RetrievalResult, Slots
from .topic import TopicTerm



class Retriever(ABC):
    """search(question, keywords, context) -> RetrievalResult over one corpus version of one guideline.

    Everything the answer stage asks of retrieval is here (chatbot.gate, chatbot.modes):
    `search`, `offline_keywords`, `idf`, `analyze`, `query_weights`, `query_slots`,
    `line_analyses` (what it reads of each reference line, retrieval.lines), and `pages`,
    `corpus_version`, `guideline` (the id of the guideline it serves), `pipeline`.
    """

    pipeline: str = ""

    def __init__(self, config: RetrievalConfig, pages: Sequence[PageVersion], corpus_version: str, *,
                 guideline: str = DEFAULT_GUIDELINE) -> None:
        self.config = config
        self.pages: list[PageVersion] = list(pages)
        self.corpus_version = corpus_version
        self.guideline = guideline
        self._lines: LineAnalyses | None = None

    @abstractmethod
    def search(self, question: str, keywords: Sequence[str] | None = None, *,
               context: Sequence[str] = ()) -> RetrievalResult:
        """The reference for `question`; keywords=None means offline keywords. `context`:
        terms of earlier questions that complete a follow-up (chatbot.conversation): the
        question is searched as completed by them; a pipeline without slots ignores them."""

    @abstractmethod
    def offline_keywords(self, question: str, k: int | None = None) -> list[str]:
        """The question's `k` (default keywords.KEYWORD_COUNT) highest-IDF nouns."""

    @abstractmethod
    def idf(self, term: str) -> float:
        """The corpus IDF of an analyzer term (terms absent from the corpus get the highest)."""

    @abstractmethod
    def analyze(self, text: str) -> list[str]:
        """The analyzer terms of `text` as this retriever sees them (synonyms applied)."""

    @abstractmethod
    def query_slots(self, question: str, keywords: Sequence[str] = (), context: Sequence[str] = ()) -> list[Slots]:
        """The query as slots, for the question alone (completed by `context`, as `search`
        reads it) and (when they add anything) with the keywords; [] when the pipeline has
        no slots (the evidence gate and extract then weigh the question's terms with
        `query_weights`)."""

    def warm(self) -> None:
        """Load now what a first question would load (tables read once per process): a
        server's first patient then does not wait for them, and workers forked after it
        share them. Nothing to load by default."""

    def topic_terms(self, text: str, k: int) -> list[TopicTerm]:
        """At most `k` terms naming what `text` (a question) is about, as this guideline's
        words, heaviest first, with their weights (retrieval.topic); [] for a pipeline
        without slots."""
        return []

    @property
    def line_analyses(self) -> LineAnalyses:
        """The analyses of the pages' lines as the answer stage reads them: computed with
        `analyze` when asked (cached), unless a pipeline stores them (retrieval.lines)."""
        if self._lines is None:
            self._lines = ComputedLines(self.analyze)
        return self._lines

    def query_weights(self, question: str, keywords: Sequence[str] = ()) -> dict[str, float]:
        """Each query term's weight in the question's mass, as the evidence gate weighs it
        (chatbot.extract.line_coverage): by default its idf."""
        terms = [t for text in (question, *keywords) for t in self.analyze(text)]
        return {t: self.idf(t) for t in dict.fromkeys(terms)}

    def empty_result(self, question: str, keywords: Sequence[str], note: str, **extra: Any) -> RetrievalResult:
        """A not-covered result: no candidate, no passage, and why."""
        return RetrievalResult(
            question=question,
            keywords=list(keywords),
            query_terms=list(extra.pop("query_terms", [])),
            candidates=[],
            passages=[],
            threshold=self.config.threshold,
            top_score=float(extra.pop("top_score", 0.0)),
            pipeline=self.pipeline,
            corpus_version=self.corpus_version,
            notes=[note],
            **extra,
        )


def result_slots(retriever: Retriever, question: str, result: RetrievalResult) -> list[Slots]:
    """The query's slots for `result`: the ones its search built (RetrievalResult.slots),
    else the retriever's for the question, the result's keywords and its context (a
    follow-up as read)."""
    if result.slots is not None and result.question == question:
        return result.slots
    return retriever.query_slots(question, result.keywords, *([result.context] if result.context else []))
