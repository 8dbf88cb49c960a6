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

from guiderag.retrieval.answer_kinds import (CAN_I, HOW_LONG, HOW_MUCH, HOW_OFTEN, WHAT_TO_DO, WHEN, gives_mask,
                                             mask)

__all__ = ["CAN_I", "FIGURE_KINDS", "HOW_LONG", "HOW_MUCH", "HOW_OFTEN", "WHAT_TO_DO", "WHEN", "asked_kinds",
           "gives", "last_ask", "missing_figure", "missing_figure_of_masks"]

# question side: what kind of answer is asked for (the line side, retrieval.answer_kinds,
# is read at index time)
_ASKS: dict[str, re.Pattern[str]] = {
    WHEN: re.compile(r"いつ|何時頃|時期|何日目|何歳から|どの段階|タイミング"),
    HOW_LONG: re.compile(r"どれ(?:くらい|ぐらい|位)|どの(?:くらい|ぐらい)|何(?:日|週|か月|ヶ月|カ月|年|時間)|期間|いつまで|長さ|ずっと続"),
    HOW_OFTEN: re.compile(r"何回|頻度|間隔|おき|ごとに|毎(?:日|週|月|年)"),
    # (not 高い / 安い alone: 「CEAが高い」「PSA値が高い」 ask about a test value, not a price)
    HOW_MUCH: re.compile(r"いくら|費用|お金|金額|値段|料金|負担|代は|無料|有料|助成|給付|手当|支給|補助金"),
    CAN_I: re.compile(r"(?:て|で)も(?:いい|よい|良い|大丈夫|平気|かまわ|構わ)|できますか|できる\?|できるの|られますか|れますか|大丈夫|平気|ダメ|だめ|いけない|可能"),
    WHAT_TO_DO: re.compile(r"どうすれば|どうしたら|どうやって|何をすれば|どうす(?:る|べき)|対処|気をつけ|注意(?:する|点)|工夫|予防|防ぐ|やっておいた"),
}


def asked_kinds(question: str) -> frozenset[str]:
    """The kinds of answer the question asks for (often none: 「〜とは何ですか」)."""
    text = unicodedata.normalize("NFKC", question or "")
    return frozenset(kind for kind, pattern in _ASKS.items() if pattern.search(text))


def last_ask(text: str, kind: str) -> int | None:
    """Where in `text` (NFKC) the last wording asking for `kind` begins (None: it asks for
    no such answer): chatbot.asked_about reads what is asked about from there."""
    found = None
    for found in _ASKS[kind].finditer(text):
        pass
    return found.start() if found is not None else None


def gives(line: str, kinds: frozenset[str]) -> bool:
    """True when the line gives one of the asked kinds of answer."""
    if not kinds:
        return False
    return bool(gives_mask(line) & mask(kinds))


# The kinds whose answer is a figure (a time, a duration, an interval, an amount).
FIGURE_KINDS = frozenset({WHEN, HOW_LONG, HOW_OFTEN, HOW_MUCH})


def missing_figure(question: str, lines: Iterable[str]) -> frozenset[str]:
    """The figure kinds the question asks for when none of the lines gives any of them
    (else the empty set): a guideline that names the topic but gives no figure for it
    does not answer 「禁煙外来の費用はいくら」."""
    return missing_figure_of_masks(question, (gives_mask(line) for line in lines))


def missing_figure_of_masks(question: str, masks: Iterable[int]) -> frozenset[str]:
    """`missing_figure` from what the lines give as bits (retrieval.answer_kinds; the index
    stores a page's, retrieval.lines.LineAnalyses.page_gives)."""
    kinds = asked_kinds(question) & FIGURE_KINDS
    if not kinds:
        return frozenset()
    wanted = mask(kinds)
    return frozenset() if any(m & wanted for m in masks) else kinds
