"""The coverage decision's measurement of one retrieval: features in, for the model to weigh.

`measure_result(question, result, retriever, analyze)` reads what the coverage model
weighs (chatbot.coverage_features) off a retrieval result: the query's evidence
(retrieval.evidence), the best reference line's coverage (chatbot.extract.line_coverage),
the lines of the best page and of the reference's pages, and whether the legacy threshold
was cleared. Only the `ours` pipeline has query slots; the protocol pipeline keeps its
published threshold.
"""
from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING, Callable, Sequence

from dataclasses import dataclass

from guiderag.retrieval.evidence import QueryEvidence, query_evidence
from guiderag.retrieval.lines import LineAnalyses
from guiderag.retrieval.passages import is_question_title
from guiderag.retrieval.result import RetrievalResult
from guiderag.retrieval.retriever import result_slots
from guiderag.scopes import RetrievalConfig
from guiderag.store import PageVersion

from .coverage_features import Measured, PageFacts, measure
from .extract import line_coverage

if TYPE_CHECKING:
    from guiderag.retrieval.pipeline_ours import OursRetriever

Analyze = Callable[[str], Sequence[str]]


def cleared_threshold(result: RetrievalResult, config: RetrievalConfig) -> bool:
    """Whether the best passage clears the retrieval threshold (threshold ** qa_threshold_exponent
    on a Q&A page): the decision before the coverage model, kept as one of its features."""
    if not result.passages:
        return False
    limit = config.threshold
    if is_question_title(result.passages[0].page.title):
        limit = config.threshold ** config.qa_threshold_exponent
    return float(result.top_score) >= limit - 1e-9


def measure_result(question: str, result: RetrievalResult, retriever: OursRetriever, analyze: Analyze,
                   *, cleared: bool | None = None, keywords: Sequence[str] = (),
                   lines: LineAnalyses | None = None) -> Measured:
    """The coverage features of `result` (the ours pipeline) for `question` (with the
    keywords' known terms added to the query, when given)."""
    return measure_inputs(question, result, retriever, analyze, cleared=cleared, keywords=keywords,
                          lines=lines).measure()


def adds_terms(retriever: OursRetriever, question: str, keywords: Sequence[str], context: Sequence[str] = ()) -> bool:
    """Whether the keywords add terms the corpus knows to the question's query (completed by
    a follow-up's `context`)."""
    return bool(keywords) and retriever.query(question, keywords, context)[1] is not None


def measure_inputs(question: str, result: RetrievalResult, retriever: OursRetriever, analyze: Analyze,
                   *, cleared: bool | None = None, keywords: Sequence[str] = (),
                   lines: LineAnalyses | None = None) -> MeasureInputs:
    """What the features of `result` are computed from (see MeasureInputs). `lines`: the
    lines' analyses to read (default: the retriever's, stored with its index); only the
    question is analysed."""
    lines = retriever.line_analyses if lines is None else lines
    evidence = query_evidence(retriever, question, result, keywords)
    # a follow-up is measured as read: completed by the terms it leans on (chatbot.conversation);
    # the slots its search built when the keywords are the search's
    slots = result_slots(retriever, question, result) if tuple(keywords) == tuple(result.keywords) \
        else retriever.query_slots(question, keywords, *([result.context] if result.context else []))
    coverage = (line_coverage(question, result.passages, analyze, slots=slots[-1], lines=lines)
                if slots and result.passages else 0.0)
    top = PageFacts()
    if evidence.top_page is not None:
        top = page_facts(retriever.pages[evidence.top_page], lines)
    reference = PageFacts()
    seen: set[tuple[str, int]] = set()
    for p in result.passages:
        key = (p.page.url, p.page.version)
        if key not in seen:
            seen.add(key)
            reference = reference | page_facts(p.page, lines)
    return MeasureInputs(
        unicodedata.normalize("NFKC", question), float(result.top_score),
        [float(c.score) for c in result.candidates[:5]],
        (result.governed if result.cleared is not None else cleared_threshold(result, retriever.config))
        if cleared is None else cleared,
        evidence, coverage, top, reference,
    )


def page_facts(page: PageVersion, lines: LineAnalyses) -> PageFacts:
    """What a page version's title and lines give (figure kinds, odds, the units of its
    figures), from what its lines give as the index stored it (retrieval.lines)."""
    return PageFacts.of_mask(lines.page_gives(page, title=True), lines.page_units(page, title=True))


@dataclass
class MeasureInputs:
    """What chatbot.coverage_features.measure reads, kept together (research records keep it
    to recompute features without retrieving again)."""

    question: str
    top_score: float
    page_scores: list[float]
    cleared: bool
    evidence: QueryEvidence
    line_coverage: float
    top_page: PageFacts
    reference: PageFacts

    def measure(self) -> Measured:
        return measure(self.question, self.top_score, self.page_scores, self.cleared, self.evidence,
                       self.line_coverage, self.top_page, self.reference)
