"""What a permission question asks permission for (chatbot.asked_about), with real MeCab,
and the coverage feature it gives (chatbot.coverage_features, `permission_unknown`).

- the activity or thing before 〜てもいい / 大丈夫 / できますか / られますか: the noun its
  particle marks, with the nouns that modify it through の; a verbal noun before する or
  できる is the activity itself; a question word between them (いつから) is passed over;
  nothing of a clause before the predicate (…終わったら散歩してもいい) is read as asked;
- a question asking no permission has none; one asking 大丈夫 of a clause of its own has
  nothing asked about;
- the feature: the question's words the guideline never uses that name what is asked about.
"""
from __future__ import annotations

from guiderag.chatbot.answer_type import CAN_I, last_ask
from guiderag.chatbot.asked_about import PermissionObject, permission_object
from guiderag.chatbot.coverage_features import PageFacts, measure
from guiderag.chatbot.coverage_reasons import known_features
from guiderag.retrieval.evidence import QueryEvidence, SlotFact
from guiderag.retrieval.tokens import NOUN


def test_the_thing_a_permission_is_asked_for() -> None:
    got = permission_object("放射線治療のあと、自転車に乗ってもいいですか？")
    assert got == PermissionObject(("自転車",), ("乗っ",))
    # a verbal noun before する is the activity; the noun modifying it through の is asked too
    assert permission_object("抗がん剤の治療中、庭の手入れはしても大丈夫？").nouns == ("手入れ", "庭")
    assert permission_object("抗がん剤の治療中に登山しても大丈夫ですか").nouns == ("登山",)
    # a verbal noun before できる; a question word between object and predicate is passed over
    assert permission_object("手術のあと、水泳はいつから再開できますか").nouns == ("再開", "水泳")
    assert permission_object("手術のあと、コンタクトレンズはいつからつけられますか").nouns == ("コンタクトレンズ",)
    # two particles (お風呂には)
    assert permission_object("退院したら、お風呂にはいつ入れますか").nouns == ("お風呂",)


def test_nothing_of_an_earlier_clause_is_asked_about() -> None:
    assert permission_object("治療が終わったら散歩してもいいですか").nouns == ("散歩",)
    assert permission_object("熱が出たけど、大丈夫でしょうか") == PermissionObject((), ())
    assert permission_object("胃がんの症状は？") is None
    assert last_ask("胃がんの症状は？", CAN_I) is None
    assert last_ask("運動してもいい？お酒は飲んでもいい？", CAN_I) == len("運動してもいい？お酒は飲ん")


def _fact(surface: str, known: bool, mass: float = 1.0) -> SlotFact:
    return SlotFact(term=surface, surface=surface, kind=NOUN, mass=mass, known=known, exact=known, zipf=5.0,
                    pages=3 if known else 0, top_page=1.0 if known else 0.0, top_title=0.0, expansion_only=False)


def test_the_feature_is_what_is_asked_about_when_the_guideline_never_names_it() -> None:
    question = "抗がん剤の治療中に自転車に乗ってもいいですか"
    facts = (_fact("抗がん剤", True, 2.0), _fact("治療中", True), _fact("自転車", False, 0.3))
    evidence = QueryEvidence(facts, 30, 0, True, "Q5 治療中の生活で気をつけることは？", 50, 60.0)
    m = measure(question, 0.5, [0.5, 0.1], True, evidence, 0.6, PageFacts(), PageFacts())
    assert m.permission_unknown == ["自転車"] and m.values["permission_unknown"] == 1.0
    assert m.unknown_common == ["自転車"]  # an everyday word: it weighs little among the unknown words
    refuse = known_features()["permission_unknown"][1](m)
    assert refuse is not None and "『自転車』" in refuse and "触れていない" in refuse
    # the guideline names the thing asked about: no such evidence
    known = (_fact("抗がん剤", True, 2.0), _fact("治療中", True), _fact("自転車", True, 0.3))
    m = measure(question, 0.5, [0.5, 0.1], True, QueryEvidence(known, 30, 0, True, "Q5", 50, 60.0), 0.6,
                PageFacts(), PageFacts())
    assert m.permission_unknown == [] and m.values["permission_unknown"] == 0.0
    # an unknown word elsewhere in a permission question is not what is asked about
    other = (_fact("先生", False, 0.3), _fact("運動", True))
    m = measure("先生に言われたけど、運動してもいいですか", 0.5, [0.5], True,
                QueryEvidence(other, 30, 0, True, "Q5", 50, 60.0), 0.6, PageFacts(), PageFacts())
    assert m.values["permission_unknown"] == 0.0
    # no permission asked: none
    m = measure("自転車の選び方は？", 0.5, [0.5], True, QueryEvidence(facts, 30, 0, True, "Q5", 50, 60.0), 0.6,
                PageFacts(), PageFacts())
    assert m.values["permission_unknown"] == 0.0
