"""The evidence gate (chatbot.gate): one object judges a retrieval for answering and for
routing; what it measures is apart from what it decides, so the decision can be replaced.

Real components: a real store and index (tests/chatbot_helpers.py), MeCab, the real
retrievers of both pipelines. The pages are written for these tests."""
from __future__ import annotations

from pathlib import Path

import pytest

from chatbot_helpers import indexed_settings
from guiderag.chatbot.config import BotConfig
from guiderag import retrieval
from guiderag.chatbot import Chatbot, Library
from guiderag.chatbot.gate import ASKED_FIGURE, LINE_COVERAGE, REASONS, THRESHOLD, EvidenceGate, Measures, Verdict

REHAB = (
    "Q8 手術のあとのリハビリはどのように進めますか？",
    "リハビリの進め方",
    "手術の翌日から、ベッドの上で手足を動かす練習を始めます。",
    "退院後に続けたいときは、リハビリ外来に通う方法もあります。",
)
AID = (
    "Q9 医療費の支払いが心配なときはどうすればよいですか？",
    "医療費の助成",
    "入院や外来でかかった医療費の自己負担には、所得に応じた上限があります。",
)
PAGES = {"http://guide.test/q8.html": REHAB, "http://guide.test/q9.html": AID}
COVERED = "医療費の自己負担はいくらまでですか"
NO_FIGURE = "リハビリ外来の費用はいくらかかりますか"  # the guideline names リハビリ外来, never its cost
NOTHING = "骨折したときのギプスの巻き方を教えてください"


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory):
    """The rules' decision (the threshold, the line coverage, the asked figure), whose rules
    these tests take one by one; the coverage model's verdict is tested last."""
    return indexed_settings(tmp_path_factory.mktemp("gate"), PAGES, coverage_decision="rules")


def test_the_verdict_says_which_rule_refused_and_the_json_is_built_from_it(settings) -> None:
    retriever = retrieval.load_retriever(settings.retrieval, settings.storage)
    gate = EvidenceGate(settings.answer, retriever)
    covered = gate.judge(COVERED, retriever.search(COVERED))
    assert covered.covered and covered.refused_by is None and covered.reason == ""
    assert covered.measures.line_coverage is not None and covered.measures.line_coverage >= 0.5
    figure = gate.judge(NO_FIGURE, result := retriever.search(NO_FIGURE))
    assert not figure.covered and figure.refused_by == ASKED_FIGURE and figure.reason == REASONS[ASKED_FIGURE]
    data = figure.retrieval_json(result)
    assert data["asked_figure_missing"] == ["how much"] and data["min_line_coverage"] == settings.answer.min_line_coverage
    assert {k: v for k, v in data.items() if k not in ("line_coverage", "min_line_coverage", "asked_figure_missing")} \
        == result.to_json()
    # routing and the keywords' check leave the asked-figure rule out: not measured, not decided
    lenient = gate.judge(NO_FIGURE, result, asked_figure=False)
    assert lenient.covered and lenient.measures.asked_figure_missing is None
    nothing = gate.judge(NOTHING, result := retriever.search(NOTHING))
    assert nothing.refused_by == THRESHOLD and nothing.measures.line_coverage is None
    assert nothing.retrieval_json(result) == result.to_json()
    # the line-coverage rule: the same result held to a cut it cannot reach
    strict = EvidenceGate(settings.replace(min_line_coverage=0.99).answer, retriever)
    mixed = "リハビリ外来と医療費の助成と手術の翌日"
    verdict = strict.judge(mixed, result := retriever.search(mixed))
    assert verdict.measures.over_threshold and verdict.refused_by == LINE_COVERAGE
    assert verdict.retrieval_json(result)["line_coverage"] < 0.99


def test_the_chatbot_answers_by_the_verdict(settings) -> None:
    with Chatbot(BotConfig.of(settings)) as bot:
        refused = bot.ask(NO_FIGURE)
        answered = bot.ask(COVERED)
    assert refused.coverage == "not_governed" and refused.retrieval["asked_figure_missing"] == ["how much"]
    assert answered.coverage == "governed" and "上限" in answered.answer


class Everything:
    """A decision that covers whatever cleared the threshold (a stand-in for another model)."""

    def __init__(self) -> None:
        self.seen: list[Measures] = []

    def decide(self, measures: Measures) -> Verdict:
        self.seen.append(measures)
        return Verdict(covered=measures.over_threshold, measures=measures,
                       refused_by=None if measures.over_threshold else THRESHOLD)


def test_the_decision_is_replaceable_without_touching_the_measures(settings) -> None:
    retriever = retrieval.load_retriever(settings.retrieval, settings.storage)
    decision = Everything()
    gate = EvidenceGate(settings.answer, retriever, decision=decision)
    with Chatbot(BotConfig.of(settings), retriever=retriever, gate=gate) as bot:
        answer = bot.ask(NO_FIGURE)
    assert answer.coverage == "governed" and "リハビリ外来" in answer.answer  # the rules would have refused it
    [measures] = decision.seen
    assert measures.asked_figure_missing == {"how much"}  # measured all the same


def test_routing_and_answers_judge_with_one_gate_per_guideline(tmp_path: Path) -> None:
    settings = indexed_settings(tmp_path, PAGES)
    with Library(BotConfig.of(settings)) as library:
        [gid] = library.ids
        gate = library.gate(gid)
        with library.chatbot(gid, None) as bot:
            assert bot.gate is gate and bot.retriever is library.retriever(gid)
        evidence = library.evidence(gid, NO_FIGURE)
        verdict = gate.judge(NO_FIGURE, library.retriever(gid).search(NO_FIGURE), asked_figure=False)
        assert (evidence.governed, evidence.line_coverage) == (verdict.covered, verdict.measures.line_coverage)


def test_the_protocol_pipeline_is_measured_by_the_threshold_only(tmp_path: Path) -> None:
    settings = indexed_settings(tmp_path, PAGES, pipeline="protocol")
    retriever = retrieval.load_retriever(settings.retrieval, settings.storage)
    assert retriever.query_slots(COVERED) == []  # the interface, answered: no slots
    result = retriever.search(NO_FIGURE)
    verdict = EvidenceGate(settings.answer, retriever).judge(NO_FIGURE, result)
    assert verdict.measures.line_coverage is None and verdict.measures.asked_figure_missing is None
    assert verdict.covered is result.governed


def test_the_coverage_model_decides_in_the_gate_and_its_verdict_is_in_the_json(settings) -> None:
    model = settings.replace(coverage_decision="model")
    retriever = retrieval.load_retriever(model.retrieval, model.storage)
    gate = EvidenceGate(model.answer, retriever)
    covered = gate.judge(COVERED, result := retriever.search(COVERED))
    assert covered.covered and covered.coverage is not None and covered.refused_by is None
    assert covered.retrieval_json(result)["coverage_model"]["probability"] == covered.coverage.probability
    refused = gate.judge(NOTHING, result := retriever.search(NOTHING))
    assert not refused.covered and refused.refused_by == "coverage_model" and "P(governed)" in refused.reason
    assert refused.coverage is not None and refused.coverage.probability < refused.coverage.operating_point
    with Chatbot(BotConfig.of(model), retriever=retriever, gate=gate) as bot:
        answer = bot.ask(NOTHING)
    assert answer.coverage == "not_governed" and answer.coverage_probability is not None
    assert answer.coverage_reasons and answer.passages == []
