"""The coverage features' word rules, against plain inputs (issue 20, round 2).

- a lab value that is high (CEAが高い) asks no price; a price, a fee or 無料 does;
- the units a figure is asked in (何時間, 何歳) are read, 何回も (many times) is not one;
- the parts of an unknown word the analyser also read (じん of じんましん) are not a second
  unknown disease, so the reasons never quote them;
- an unknown compound of known words is a paraphrase only when one line of the best page
  says its words together (胃を切除 for 胃切除), else an unknown partial word (確定申告 where
  確定 and 申告 are in two different lines): real MeCab, a real store and index.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from guiderag.chatbot.answer_type import HOW_MUCH, asked_kinds
from guiderag.chatbot.coverage_features import PageFacts, asked_units, measure
from guiderag.retrieval.evidence import QueryEvidence, SlotFact
from guiderag.retrieval.tokens import COMPOUND, NOUN


def test_a_high_test_value_asks_no_price_and_a_fee_does() -> None:
    assert HOW_MUCH not in asked_kinds("CEAが高いとどういう意味？")
    assert HOW_MUCH not in asked_kinds("前立腺がんのPSA値が高いと言われました")
    assert HOW_MUCH in asked_kinds("S-1って薬代は1か月いくらくらいかかるんですか？")
    assert HOW_MUCH in asked_kinds("お金が心配です。手術や抗がん剤ってすごく高いんでしょうか")  # お金
    assert HOW_MUCH in asked_kinds("乳がん検診は無料で受けられますか")
    assert HOW_MUCH in asked_kinds("セカンドオピニオンの料金は？")


def test_the_units_a_figure_is_asked_in() -> None:
    assert asked_units("シスプラチンの点滴は1回何時間かかりますか") == frozenset({"時間"})
    assert asked_units("子宮頸がんワクチンは何歳で打つのがいいですか") == frozenset({"歳"})
    assert asked_units("何か月ごとに検査しますか") == frozenset({"月"})
    assert asked_units("何回も吐いてしまいます") == frozenset()
    assert PageFacts.of(["治療は2時間ほどかかります。"]).units == frozenset({"時間"})


def _fact(surface: str, known: bool, kind: str = NOUN, mass: float = 1.0, term: str = "") -> SlotFact:
    return SlotFact(term=term or surface, surface=surface, kind=kind, mass=mass, known=known, exact=known, zipf=2.0,
                    pages=3 if known else 0, top_page=1.0 if known else 0.0, top_title=0.0, expansion_only=False)


def test_the_parts_of_an_unknown_word_are_no_second_disease() -> None:
    # as MeCab reads it: the compound じんましん (腎麻疹) and its parts じん (腎, an organ) and ましん
    facts = (_fact("造影剤", True), _fact("じんましん", False, COMPOUND, term="腎麻疹"),
             _fact("じん", False, term="腎"), _fact("ましん", False, term="麻疹"))
    evidence = QueryEvidence(facts, 30, 0, True, "Q8 検査", 50, 60.0)
    m = measure("造影剤でじんましんが出たことがあります", 0.3, [0.3, 0.1], True, evidence, 0.4, PageFacts(), PageFacts())
    assert "じん" not in m.unknown_diseases and "じん" not in m.unknown_named
    assert m.unknown_specific == ["じんましん"]  # one unknown word, not three
    # a disease word that is no part of another is still one (白血病 of a gastric guidebook)
    other = (_fact("治療", True), _fact("白血病", False))
    m = measure("白血病の治療", 0.2, [0.2], True, QueryEvidence(other, 30, 0, True, "Q1", 50, 60.0), 0.3,
                PageFacts(), PageFacts())
    assert m.unknown_diseases == ["白血病"] and m.values["unknown_disease"] == 1.0


# A small Q&A guidebook: its after-surgery page says 胃を切除 in one line, and 確定 and 申告
# only in two different lines (a diagnosis confirmed; symptoms reported to the doctor).
PARAPHRASE_PAGES = {
    f"http://guide.test/q{i}.html": (title, *lines) for i, (title, lines) in enumerate([
        ("Q1 手術のあとの生活はどうなりますか？",
         ("手術後の生活", "胃を切除したあとは、食事を少しずつとるようにします。",
          "病理検査で診断が確定したら、術後の治療を決めます。",
          "体調の変化は、遠慮せずに医師に申告してください。")),
        ("Q2 検査にはどのようなものがありますか？",
         ("主な検査", "内視鏡検査、CT検査、血液検査などを行います。")),
        ("Q3 治療費の負担を軽くする制度はありますか？",
         ("高額療養費制度", "医療費の自己負担が上限額を超えた分は、高額療養費制度で払い戻されます。")),
        ("Q4 薬物療法の副作用にはどのようなものがありますか？",
         ("主な副作用", "吐き気、口内炎、しびれなどが起こることがあります。")),
    ], 1)
}


@pytest.fixture(scope="module")
def paraphrase_guide(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from chatbot_helpers import indexed_settings

    from guiderag import retrieval

    settings = indexed_settings(Path(tmp_path_factory.mktemp("coverage-paraphrase")), PARAPHRASE_PAGES)
    return retrieval.load_retriever(settings.retrieval, settings.storage)


def _measured(retriever: Any, question: str) -> Any:
    from guiderag.chatbot.coverage import measure_inputs

    inputs = measure_inputs(question, retriever.search(question, None), retriever, retriever.analyze)
    return inputs, inputs.measure()


def test_a_compound_is_a_paraphrase_only_when_one_line_says_its_words_together(paraphrase_guide: Any) -> None:
    """胃切除 where a line of the best page says 胃を切除 is the page's own topic in other words;
    確定申告 (a tax return), whose 確定 and 申告 the page says only in two different lines, is
    another topic in the guideline's words: an unknown (partial) word, weighing against."""
    inputs, m = _measured(paraphrase_guide, "胃切除のあとの食事はどうすればいいですか？")
    assert inputs.evidence.top_title.startswith("Q1")
    assert any("胃切除" in w for w in m.unknown_paraphrase), (m.unknown_paraphrase, m.unknown_partial)
    assert not any("胃切除" in w for w in m.unknown_partial)
    inputs, m = _measured(paraphrase_guide, "確定申告をすると戻ってくるって聞いたんですけど、どうやるんですか？")
    assert inputs.evidence.top_title.startswith("Q1")
    parts = {f.surface: f for f in inputs.evidence.slots if f.surface in ("確定", "申告")}
    assert set(parts) == {"確定", "申告"} and all(f.top_page > 0 for f in parts.values())  # both on the page ...
    assert not set(parts["確定"].top_lines) & set(parts["申告"].top_lines)  # ... in no line together
    assert "確定申告" in m.unknown_partial and "確定申告" not in m.unknown_paraphrase
    assert m.values["unknown_partial"] == 1.0 and m.values["unknown_paraphrase"] == 0.0


def test_a_benefit_asked_is_a_money_question() -> None:
    """助成金, 給付金, 手当 ask about money as いくら does; 術後補助化学療法 does not."""
    assert HOW_MUCH in asked_kinds("医療用ウィッグの購入に助成金は出ますか")
    assert HOW_MUCH in asked_kinds("傷病手当金はもらえますか")
    assert HOW_MUCH not in asked_kinds("術後補助化学療法はいつから開始しますか。")


def test_a_compound_is_joined_only_where_a_line_says_its_words_next_to_each_other(tmp_path: Path) -> None:
    """胃切除 where a line says 「胃を切除」, 再発胃がん where it says 「胃がんの再発」 (either
    order, a particle between) are the page's words; がん保険 where one line says 「がん」 and,
    far from it, 「医療保険」 is another topic in them."""
    from chatbot_helpers import indexed_settings

    from guiderag import retrieval

    pages = {
        "http://guide.test/q1.html": ("Q1 治療費はどのくらいかかりますか？", "治療費",
                                      "がんの治療にかかる医療費の多くは、公的な医療保険の対象となります。",
                                      "胃を切除したあとは、食事を少しずつとります。",
                                      "胃がんの再発には、いくつかの種類があります。"),
        "http://guide.test/q2.html": ("Q2 検査にはどのようなものがありますか？", "主な検査",
                                      "内視鏡検査、CT検査、血液検査などを行います。"),
    }
    settings = indexed_settings(tmp_path, pages)
    r = retrieval.load_retriever(settings.retrieval, settings.storage)
    for question, joined in (("がん保険の給付金はどうやって請求しますか？", False),
                             ("胃切除のあとの治療費はどのくらい？", True),
                             ("再発胃がんの治療費はどのくらい？", True)):
        inputs, _ = _measured(r, question)
        assert inputs.evidence.top_title.startswith("Q1"), question
        compound = next(f.surface for f in inputs.evidence.slots if not f.known and f.surface[:2] in ("がん", "胃切", "再発"))
        assert (compound in inputs.evidence.joined) is joined, (question, inputs.evidence.joined)
