"""The coverage decision: does this guideline govern the question? P(governed), refused below the operating point.

One `CoverageDecision` per guideline: the model of its form (a Q&A guidebook or articles:
retrieval.evidence.guideline_form) shipped in data/coverage_model.json, or the guideline's
own calibration (`guiderag calibrate`, stored in the store: store.calibration), which every
process reads when it opens the decision for a guideline. `judge(question, result)`
measures the retrieval (chatbot.coverage) and returns a CoverageVerdict: covered or not,
P, the operating point, the reasons (chatbot.coverage_reasons), where the model came from.

Safety is unchanged: the decision only chooses between the verbatim answer retrieval and
extract would give and the refusal; it adds no text. Model keywords may only add
evidence (chatbot.bot asks the decision with and without them).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from guiderag.retrieval.evidence import guideline_form
from guiderag.retrieval.lines import LineAnalyses

from . import coverage_model as cm
from .coverage import adds_terms, measure_result
from .coverage_reasons import explain, near, quote, unknown_words

if TYPE_CHECKING:
    from guiderag.retrieval.pipeline_ours import OursRetriever
    from guiderag.retrieval.result import RetrievalResult
    from guiderag.store import Store

Analyze = Callable[[str], Sequence[str]]
SHIPPED, CALIBRATED = "shipped", "calibrated"


@dataclass(frozen=True)
class CoverageVerdict:
    """The coverage model's decision on one question."""

    covered: bool
    probability: float
    operating_point: float
    reasons: tuple[str, ...]
    source: str  # SHIPPED or CALIBRATED
    form: str
    features: dict[str, float] = field(default_factory=dict)
    ms: float = 0.0  # what measuring and deciding took
    model_operating_point: float | None = None  # the model's own, when another was applied

    def to_json(self) -> dict[str, Any]:
        """The answer's retrieval.coverage_model block (the probability and reasons are top-level fields)."""
        own = self.operating_point if self.model_operating_point is None else self.model_operating_point
        # exact: the decision compares these; the answer's coverage_probability is rounded for reading
        return {"source": self.source, "form": self.form, "operating_point": self.operating_point,
                "model_operating_point": own, "probability": self.probability,
                "features": {k: round(v, 4) for k, v in self.features.items()}, "ms": round(self.ms, 3)}


class CoverageDecision:
    """The coverage model of one guideline and how to apply it."""

    def __init__(self, model: cm.CoverageModel, *, source: str = SHIPPED, form: str = cm.QA,
                 corpus_version: str = "") -> None:
        self.model = model
        self.source = source
        self.form = form
        self.corpus_version = corpus_version  # the calibration's (empty for the shipped model)

    @classmethod
    def for_retriever(cls, retriever: OursRetriever, store: Store | None = None) -> CoverageDecision:
        """The guideline's calibration when the store holds one, else the shipped model of its form."""
        form = guideline_form(retriever)
        if store is not None:
            from guiderag.store import calibration

            cal = calibration.load(store, retriever.guideline)
            if cal is not None:
                return cls(cm.CoverageModel.from_json(cal.model, f"the calibration of {retriever.guideline}"),
                           source=CALIBRATED, form=str(cal.model.get("meta", {}).get("form", form)),
                           corpus_version=cal.corpus_version)
        return cls(cm.shipped().for_form(form), source=SHIPPED, form=form)

    def judge(self, question: str, result: RetrievalResult, retriever: OursRetriever, analyze: Analyze,
              operating_point: float | None = None, *, keywords: Sequence[str] = (),
              lines: LineAnalyses | None = None) -> CoverageVerdict:
        """Measure the retrieval, weigh it, explain it; refused below the model's operating
        point, or `operating_point` when given (an evaluation sweep). A model's `keywords`
        may only add evidence: P is the better of the question alone and with them."""
        started = time.perf_counter()
        cut = self.model.operating_point if operating_point is None else operating_point
        own = None if operating_point is None else self.model.operating_point
        measured = measure_result(question, result, retriever, analyze, lines=lines)
        if result.passages and adds_terms(retriever, question, keywords, result.context):
            with_keywords = measure_result(question, result, retriever, analyze, keywords=keywords, lines=lines)
            if self.model.probability(with_keywords.values) > self.model.probability(measured.values):
                measured = with_keywords
        if not result.passages:  # nothing shares a word with the question: nothing to weigh
            named = unknown_words(measured)
            reason = (f"質問の{quote(named)}はこのガイドラインに一度も出てこない" if named
                      else "質問の語がガイドラインのどこにも出てこない")
            return CoverageVerdict(False, 0.0, cut, (reason,), self.source, self.form,
                                   ms=(time.perf_counter() - started) * 1000.0, model_operating_point=own)
        p = self.model.probability(measured.values)
        covered = p >= cut
        reasons = explain(self.model.contributions(measured.values), measured, covered, near(p, cut))
        used = {n: measured.values.get(n, 0.0) for n in self.model.features}
        return CoverageVerdict(covered, p, cut, tuple(reasons), self.source, self.form,
                               used, (time.perf_counter() - started) * 1000.0, own)
