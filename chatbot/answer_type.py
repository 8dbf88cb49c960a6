"""What kind of answer a question asks for, and whether a line gives that kind.

A patient asks when (いつから), how long (どのくらい, 何日), how often (何年おき, 頻度),
how much (いくら, 費用), whether they may (〜てもいい, できますか, 大丈夫) or what to do
(どうすれば, 気をつけること). The line that answers says a time, a duration, an interval,
an amount, a permission or an instruction, often without repeating the question's words;
extract mode (chatbot.extract) prefers, among the reference lines, those that give the kind
of answer asked for. Patterns are read on NFKC text; one question may ask for several kinds.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Iterable

WHEN, HOW_LONG, HOW_OFTEN, HOW_MUCH, CAN_I, WHAT_TO_DO = "when", "how long", "how often", "how much", "can I", "what to do"

_NUM = r"[0-9０-９〇一二三四五六七八九十数]+"
_TIME_UNIT = r"(?:日|週間?|か月|ヶ月|カ月|箇月|年|時間|分|歳)"

# question side: what kind of answer is asked for
_ASKS: dict[str, re.Pattern[str]] = {
    WHEN: re.compile(r"いつ|何時頃|時期|何日目|何歳から|どの段階|タイミング"),
    HOW_LONG: re.compile(r"どれ(?:くらい|ぐらい|位)|どの(?:くらい|ぐらい)|何(?:日|週|か月|ヶ月|カ月|年|時間)|期間|いつまで|長さ|ずっと続"),
    HOW_OFTEN: re.compile(r"何回|頻度|間隔|おき|ごとに|毎(?:日|週|月|年)"),
    # (not 高い / 安い alone: 「CEAが高い」「PSA値が高い」 ask about a test value, not a price)
    HOW_MUCH: re.compile(r"いくら|費用|お金|金額|値段|料金|負担|代は|無料|有料"),
    CAN_I: re.compile(r"(?:て|で)も(?:いい|よい|良い|大丈夫|平気|かまわ|構わ)|できますか|できる\?|できるの|られますか|れますか|大丈夫|平気|ダメ|だめ|いけない|可能"),
    WHAT_TO_DO: re.compile(r"どうすれば|どうしたら|どうやって|何をすれば|どうす(?:る|べき)|対処|気をつけ|注意(?:する|点)|工夫|予防|防ぐ|やっておいた"),
}

# line side: the kind of answer a line gives
_GIVES: dict[str, re.Pattern[str]] = {
    WHEN: re.compile(rf"{_NUM}\s*{_TIME_UNIT}|以内|以降|直後|翌日|当日|前日|始まる|から再開|目安"),
    HOW_LONG: re.compile(rf"{_NUM}\s*{_TIME_UNIT}|程度|前後|目安|以内|くらい|ほど"),
    HOW_OFTEN: re.compile(rf"{_NUM}\s*(?:回|度)|ごと|おき|毎|定期的|間隔"),
    HOW_MUCH: re.compile(rf"{_NUM}\s*(?:円|割|万)|負担|費用|上限|払い戻|助成|給付|対象外|無料|無償|かかりません"),
    CAN_I: re.compile(r"でき(?:ます|る)|可能|かまいません|構いません|問題ありません|差し支え|控え|避け|いけません|ないでください|わけではありません|大丈夫"),
    WHAT_TO_DO: re.compile(r"ください|しましょう|ましょう|大切です|必要です|心がけ|すすめ|勧め|とよい|と良い|とよいでしょう|相談"),
}


def asked_kinds(question: str) -> frozenset[str]:
    """The kinds of answer the question asks for (often none: 「〜とは何ですか」)."""
    text = unicodedata.normalize("NFKC", question or "")
    return frozenset(kind for kind, pattern in _ASKS.items() if pattern.search(text))


def gives(line: str, kinds: frozenset[str]) -> bool:
    """True when the line gives one of the asked kinds of answer."""
    if not kinds:
        return False
    text = unicodedata.normalize("NFKC", line or "")
    return any(_GIVES[k].search(text) for k in kinds)


# The kinds whose answer is a figure (a time, a duration, an interval, an amount).
FIGURE_KINDS = frozenset({WHEN, HOW_LONG, HOW_OFTEN, HOW_MUCH})


def missing_figure(question: str, lines: Iterable[str]) -> frozenset[str]:
    """The figure kinds the question asks for when none of the lines gives any of them
    (else the empty set): a guideline that names the topic but gives no figure for it
    does not answer 「禁煙外来の費用はいくら」."""
    kinds = asked_kinds(question) & FIGURE_KINDS
    if not kinds:
        return frozenset()
    return frozenset() if any(gives(line, kinds) for line in lines) else kinds
