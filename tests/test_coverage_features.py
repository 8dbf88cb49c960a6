"""The coverage features' word rules, against plain inputs (issue 20, round 2).

- a lab value that is high (CEAが高い) asks no price; a price, a fee or 無料 does;
- the units a figure is asked in (何時間, 何歳) are read, 何回も (many times) is not one;
- the parts of an unknown word the analyser also read (じん of じんましん) are not a second
  unknown disease, so the reasons never quote them.
"""
from __future__ import annotations

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
