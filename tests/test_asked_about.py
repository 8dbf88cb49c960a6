"""What a permission question asks permission for (chatbot.asked_about), with real MeCab,
and the coverage feature it gives (chatbot.coverage_features, `permission_unknown`).

- the activity or thing before 〜てもいい / 大丈夫 / できますか / られますか: the noun its
  particle marks, with the nouns that modify it through の; a verbal noun before する or
  できる is the activity itself; a question word between them (いつから) is passed over;
  nothing of a clause before the predicate (…終わったら散歩してもいい) is read as asked;
- a question asking no permission has none; one asking 大丈夫 of a clause of its own has
  nothing asked about;
"""
from __future__ import annotations

from guiderag.chatbot.answer_type import CAN_I, last_ask
from guiderag.chatbot.asked_about import PermissionObject, permission_object


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
