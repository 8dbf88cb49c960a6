"""What a permission question asks permission for: the activity or thing before 〜てもいい.

A patient asks whether they may do something (車の運転はしてもいいですか, コーヒーは飲んでも
いいですか, 孫を抱っこしても大丈夫ですか, 仕事は続けられますか). A guideline answers such a
question only when it speaks of that activity or thing: a gastric guidebook that discusses
飲酒, 運動 and 入浴 after surgery does not govern 運転 or コーヒー, although every other word
of the question (抗がん剤治療中, 胃を取ったあと) is its own. The coverage decision
(chatbot.coverage_features, `permission_unknown`) weighs whether the guideline ever uses the
words asked about here.

`permission_object(question)` reads the question's MeCab tokens (retrieval.analyzer): at the
last place the question asks permission (chatbot.answer_type's CAN_I wording: てもいい,
大丈夫, できますか, られますか), back over the predicate (飲んで, して, 続けられ: a verbal noun
before する is the activity itself, 運転して, 抱っこして), to the case particle that marks its
object (は, を, が, に, も, で, へ, と; of a verbal noun は, を, が, も: 治療中に登山して asks
about 登山 alone) and the noun phrase before it, with the nouns that modify it through の (車の運転, お正月のおもち, むし歯の治療). No word list: the phrase is
found by the shape of the sentence only. A question that asks permission without saying of
what (大丈夫でしょうか after a clause of its own) has none.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from guiderag.retrieval.analyzer import tokenize
from guiderag.retrieval.tokens import ASCII, NOUN, OTHER, PREFIX, PROPER, SUFFIX, SYNONYM, VERB

from .answer_type import CAN_I, last_ask

# The particles that mark what the predicate is about: 運転は, 孫を, お風呂に, 海外旅行に行って.
CASE_PARTICLES = frozenset({"は", "を", "が", "に", "も", "で", "へ", "と"})
# A verbal noun's object is marked by these (孫を抱っこ, 運転は); に, で of it are its setting
# (治療中に登山して, 病院で相談して).
OBJECT_PARTICLES = frozenset({"は", "を", "が", "も"})
_NOUNISH = frozenset({NOUN, PROPER, ASCII, PREFIX, SUFFIX, SYNONYM})
_DO = "為る"  # the lemma of する: a verbal noun before it is the activity (運転して)
_OF = "の"  # a noun modifying the next one (車の運転)
_STOPS = frozenset("、。,.?!？！・")  # punctuation ends the clause
# Question words (their lemmas) asked together with the predicate (いつから, どこで), and how
# many particles may follow one.
_ASKING = frozenset({"いつ", "何時", "どこ", "何処", "何", "どう", "どれ", "何れ", "どの", "どちら"})
_ASKING_REACH = 3


@dataclass(frozen=True)
class PermissionObject:
    """The nouns (each a run of the question's words, 海外旅行, お正月) and the predicate's
    content verbs (飲む, 入る) of what a permission question asks about."""

    nouns: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()


def permission_object(question: str) -> PermissionObject | None:
    """What the question's last request for permission is about (module docstring); None
    when the question asks no permission."""
    text = unicodedata.normalize("NFKC", question or "")
    tokens = tokenize(text)
    joined = "".join(t.surface for t in tokens)
    start = last_ask(joined, CAN_I)
    if start is None:
        return None
    i, pos = 0, 0
    while i < len(tokens) and pos + len(tokens[i].surface) <= start:
        pos += len(tokens[i].surface)
        i += 1
    if pos == start or i == len(tokens):
        i -= 1  # the token before the permission's wording (else it begins inside one: 入れますか)
    nouns: list[str] = []
    verbs: list[str] = []
    marks = CASE_PARTICLES
    # the predicate: its endings (て, で, られ, し), then its content verbs (飲ん, 飼い) or a
    # verbal noun before する (運転して); nothing of the clause before it (終わったら献血して)
    while i >= 0 and tokens[i].kind == OTHER and tokens[i].surface not in CASE_PARTICLES \
            and tokens[i].surface != _OF and tokens[i].surface not in _STOPS \
            and not (tokens[i].form == _DO and i > 0 and tokens[i - 1].kind == NOUN):
        i -= 1
    if i > 0 and tokens[i].form == _DO and tokens[i - 1].kind == NOUN:
        nouns.append(tokens[i - 1].surface)
        i -= 2
        marks = OBJECT_PARTICLES
    elif i >= 0 and tokens[i].kind == NOUN:  # a verbal noun before できる: 妊娠できますか, 再開できますか
        nouns.append(tokens[i].surface)
        i -= 1
        marks = OBJECT_PARTICLES
    else:
        while i >= 0 and tokens[i].kind == VERB:
            verbs.append(tokens[i].surface)
            i -= 1
    # a question word asked with the predicate stands between it and its object (ブラジャーは
    # いつからつけられますか, 検査はどこで受けられますか): skipped, with its particles
    k = i
    while k >= 0 and i - k < _ASKING_REACH and tokens[k].kind == OTHER and tokens[k].form not in _ASKING \
            and tokens[k].surface not in _STOPS:
        k -= 1
    if k >= 0 and tokens[k].form in _ASKING:
        i = k - 1
    # its object: a case particle, the noun phrase before it and the nouns modifying it through の
    if i >= 0 and tokens[i].kind == OTHER and tokens[i].surface in marks:
        i -= 1
        if i >= 0 and tokens[i].kind == OTHER and tokens[i].surface in CASE_PARTICLES:
            i -= 1  # two of them: お風呂には, 病院では
        while i >= 0:
            run: list[str] = []
            while i >= 0 and tokens[i].kind in _NOUNISH:
                run.append(tokens[i].surface)
                i -= 1
            if not run:
                break
            nouns.append("".join(reversed(run)))
            if i >= 0 and tokens[i].surface == _OF:
                i -= 1
                continue
            break
    return PermissionObject(tuple(nouns), tuple(verbs))
