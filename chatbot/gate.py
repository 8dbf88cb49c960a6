"""The evidence gate: does what retrieval found govern the question, or is it a refusal?

One object decides it for answering (chatbot.bot) and for routing (chatbot.library), in
two halves, so that the decision can be replaced without touching what is measured:

- `EvidenceGate.measure(question, result) -> Measures`: the evidence a retrieval result
  holds for a question: the best passage's score and whether one cleared the threshold,
  how much of the question the best reference line speaks to (`line_coverage`,
  chatbot.extract), and which asked figure no line of the reference's pages gives
  (`asked_figure_missing`, chatbot.answer_type). Both read the lines' analyses that were
  made with the index (the retriever's `line_analyses`, retrieval.lines) and the query's
  slots the search built (`query_slots`): only the question is analysed per ask;
- a `Decision` reads the measures and returns a `Verdict`: covered or not, the measures,
  and which rule refused. `ThresholdRules` is the rules' decision (AnswerConfig.min_line_coverage,
  AnswerConfig.require_asked_figure), used with AnswerConfig.coverage_decision = rules.

With AnswerConfig.coverage_decision = model (the default, issue 20) the `ours` pipeline's
results are decided by the coverage model instead (chatbot.coverage_decision: P(governed)
from its own, richer measures, refused below the operating point of the guideline's
calibration, else of the shipped model of its form); its verdict is the Verdict's
`coverage`, and the retrieval JSON records it (`coverage_model`).

The answer's retrieval JSON is built from the verdict (`Verdict.retrieval_json`): the
result's own JSON, the line coverage with the cut it was held to when it was measured,
and the missing figure when that refused the question.

The protocol pipeline stays as published: neither measure applies to it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, cast

from guiderag.retrieval.result import RetrievalResult
from guiderag.retrieval.retriever import result_slots as query_slots
from guiderag.scopes import COVERAGE_MODEL as COVERAGE_MODEL_DECISION
from guiderag.scopes import OURS, PROTOCOL, AnswerConfig

from .answer_type import missing_figure_of_masks
from .coverage_decision import CoverageDecision, CoverageVerdict
from .extract import line_coverage

if TYPE_CHECKING:
    from guiderag.retrieval import Retriever
    from guiderag.retrieval.pipeline_ours import OursRetriever
    from guiderag.store import Store

Analyze = Callable[[str], list[str]]

# The rule that refused a question (Verdict.refused_by).
THRESHOLD = "threshold"  # no passage cleared the retrieval threshold
LINE_COVERAGE = "line_coverage"  # no reference line speaks to enough of the question
ASKED_FIGURE = "asked_figure"  # the question asks for a figure no reference line gives
COVERAGE_MODEL = "coverage_model"  # P(governed) below the coverage model's operating point
REASONS = {
    THRESHOLD: "nothing in the guideline cleared the retrieval threshold",
    LINE_COVERAGE: "no reference line speaks to enough of the question (evidence gate)",
    ASKED_FIGURE: "the question asks for a figure no reference line gives",
    COVERAGE_MODEL: "the coverage model refused it (P(governed) below its operating point)",
}


@dataclass(frozen=True)
class Measures:
    """The evidence one retrieval result holds for one question. A measure that does not
    apply is None: the line coverage when nothing cleared the threshold, for the protocol
    pipeline, or with AnswerConfig.min_line_coverage 0; the missing figure likewise, or with
    AnswerConfig.require_asked_figure off, or when judged with asked_figure=False (an empty
    set: no figure asked for is missing)."""

    pipeline: str
    over_threshold: bool  # a passage cleared the retrieval threshold (RetrievalResult.governed)
    top_score: float
    line_coverage: float | None
    asked_figure_missing: frozenset[str] | None  # the figure kinds asked for and given nowhere


@dataclass(frozen=True)
class Verdict:
    """Whether the guideline governs the question, on what evidence, and if not, why."""

    covered: bool
    measures: Measures
    refused_by: str | None = None  # THRESHOLD | LINE_COVERAGE | ASKED_FIGURE | COVERAGE_MODEL; None when covered
    min_line_coverage: float | None = None  # the cut the line coverage was held to
    coverage: CoverageVerdict | None = None  # the coverage model's verdict, when it decided

    @property
    def reason(self) -> str:
        """Why the question is refused, in words ("" when covered)."""
        if self.refused_by == COVERAGE_MODEL and self.coverage is not None:
            return (f"the coverage model refused it (P(governed) {self.coverage.probability:.3f} below "
                    f"{self.coverage.operating_point:.3f})")
        return REASONS.get(self.refused_by or "", "")

    def retrieval_json(self, result: RetrievalResult) -> dict[str, Any]:
        """The answer's `retrieval` object: the result's, with what the gate measured."""
        data = result.to_json()
        if self.coverage is not None:
            data["coverage_model"] = self.coverage.to_json()
        coverage = self.measures.line_coverage
        if coverage is not None:
            data["line_coverage"] = round(coverage, 4)
            data["min_line_coverage"] = self.min_line_coverage
        if self.refused_by == ASKED_FIGURE and self.measures.asked_figure_missing:
            data["asked_figure_missing"] = sorted(self.measures.asked_figure_missing)
        return data


class Decision(Protocol):
    """Measures in, Verdict out: what a question needs to count as covered."""

    def decide(self, measures: Measures) -> Verdict: ...


class ThresholdRules:
    """Today's decision, rule by rule: a passage over the retrieval threshold; one reference
    line (with its page title) holding AnswerConfig.min_line_coverage of the question's mass;
    and, for a question asking for a figure (when, how long, how often, how much), a line
    of the reference's pages giving one (AnswerConfig.require_asked_figure): the guideline
    names the topic, not what is asked about it (禁煙外来の費用, 再発までの期間)."""

    def __init__(self, config: AnswerConfig) -> None:
        self.min_line_coverage = config.min_line_coverage

    def decide(self, measures: Measures) -> Verdict:
        cut = self.min_line_coverage
        refused: str | None = None
        if not measures.over_threshold:
            refused = THRESHOLD
        elif measures.line_coverage is not None and measures.line_coverage < cut:
            refused = LINE_COVERAGE
        elif measures.asked_figure_missing:
            refused = ASKED_FIGURE
        return Verdict(covered=refused is None, measures=measures, refused_by=refused, min_line_coverage=cut)


class EvidenceGate:
    """The gate of one guideline: its retriever's view of the question, measured, then
    decided (the coverage model, or ThresholdRules under the rules, unless another
    Decision is given). Thread-safe: a Library keeps one per guideline for every ask and
    routing. It reads the reference lines' analyses stored with the index (`lines`,
    retrieval.lines: the protocol pipeline's are computed and cached)."""

    def __init__(self, config: AnswerConfig, retriever: Retriever, *, decision: Decision | None = None) -> None:
        self.config = config
        self.retriever = retriever
        self.decision: Decision = decision or ThresholdRules(config)
        # a Decision given decides; else the coverage model does (AnswerConfig.coverage_decision)
        self._coverage_model = decision is None and config.coverage_decision == COVERAGE_MODEL_DECISION
        self.analyze: Analyze = retriever.analyze  # a text's terms as the retriever sees them
        self.lines = retriever.line_analyses
        # (calibration stamp, the coverage decision made at it): see _decision
        self._kept: tuple[str, CoverageDecision] | None = None

    def judge(self, question: str, result: RetrievalResult, *, asked_figure: bool = True,
              store: Store | None = None, keywords: Sequence[str] = ()) -> Verdict:
        """The verdict on `result` for `question`. With AnswerConfig.coverage_decision = model
        (the ours pipeline) the coverage model decides, with the guideline's calibration
        read from `store`; a model's `keywords` may only raise its P. Under the rules,
        asked_figure=False leaves the asked-figure rule out (neither measured nor decided):
        what routing and the choice between model keywords and the question's own ask, the
        threshold and line coverage only."""
        if self._coverage_model and result.pipeline == OURS:
            return self._model_verdict(question, result, store, keywords)
        return self.decision.decide(self.measure(question, result, asked_figure=asked_figure))

    def _model_verdict(self, question: str, result: RetrievalResult, store: Store | None,
                       keywords: Sequence[str]) -> Verdict:
        from guiderag.retrieval.pipeline_ours import OursRetriever

        retriever = cast(OursRetriever, self.retriever)  # the ours pipeline (or a proxy of it, in tests)
        decision = self._decision(retriever, store)  # the calibration as it is now
        cut = self.config.coverage_operating_point
        coverage = decision.judge(question, result, retriever, self.analyze, None if cut < 0 else cut,
                                  keywords=keywords, lines=self.lines)
        measures = Measures(pipeline=result.pipeline, over_threshold=result.governed,
                            top_score=float(result.top_score), line_coverage=None, asked_figure_missing=None)
        return Verdict(covered=coverage.covered, measures=measures,
                       refused_by=None if coverage.covered else COVERAGE_MODEL, coverage=coverage)

    def _decision(self, retriever: OursRetriever, store: Store | None) -> CoverageDecision:
        """The guideline's coverage decision as the store holds it now: its calibration's
        stamp is read (one row, store.calibration.stamp) and the calibration itself only
        when the stamp differs from the one the kept decision was made at, so a `calibrate`
        in any process is used from the next ask on."""
        if store is None:
            return CoverageDecision.for_retriever(retriever, None)
        from guiderag.store import calibration

        stamp = calibration.stamp(store)
        kept = self._kept
        if kept is not None and kept[0] == stamp:
            return kept[1]
        decision = CoverageDecision.for_retriever(retriever, store)
        self._kept = (stamp, decision)  # one assignment: a thread reads the old pair or the new
        return decision

    def measure(self, question: str, result: RetrievalResult, *, asked_figure: bool = True) -> Measures:
        """What `result` holds for `question` (see Measures for the ones that do not apply)."""
        applies = result.governed and result.pipeline != PROTOCOL
        figure: frozenset[str] | None = None
        if applies and asked_figure and self.config.require_asked_figure:
            pages = {(p.page.url, p.page.version): p.page for p in result.passages}
            figure = missing_figure_of_masks(question, (self.lines.page_gives(page) for page in pages.values()))
        return Measures(
            pipeline=result.pipeline,
            over_threshold=result.governed,
            top_score=float(result.top_score),
            line_coverage=self._line_coverage(question, result) if applies else None,
            asked_figure_missing=figure,
        )

    def _line_coverage(self, question: str, result: RetrievalResult) -> float | None:
        """How much of the question the best reference line speaks to (None: the gate is
        off). The retriever's own query slots weigh it (verbs, unseen compounds and everyday
        words count less than topic nouns; expansions count), and keywords may only add
        evidence: the better of the question's coverage alone and with the keywords'
        known terms. A retriever without slots weighs the question's terms by
        `query_weights`."""
        if self.config.min_line_coverage <= 0:
            return None
        slots = query_slots(self.retriever, question, result)  # a follow-up's with the terms it leans on
        if not slots:
            weights = self.retriever.query_weights(question, result.keywords)
            return line_coverage(question, result.passages, self.analyze, weights, result.keywords, lines=self.lines)
        return max(line_coverage(question, result.passages, self.analyze, slots=s, lines=self.lines) for s in slots)
