"""What kind of answer a line gives: a time, a duration, an interval, an amount, a
permission or an instruction (chatbot.answer_type asks which kind a question wants), and
whether it gives odds (chatbot.coverage_features).

Read on NFKC text. A property of a line's text alone, so the index computes it for every
line once (retrieval.lines stores it as a bit mask, `gives_mask`), and the answer stage
reads the mask: which kinds a reference line gives, which figure no line of a page gives.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Iterable

WHEN, HOW_LONG, HOW_OFTEN, HOW_MUCH, CAN_I, WHAT_TO_DO = "when", "how long", "how often", "how much", "can I", "what to do"
# Odds (a percentage, 何割, 10人に1人): no kind a question asks for by its wording
# (chatbot.answer_type), a fact of a page the coverage decision weighs (chatbot.coverage_features).
ODDS = "odds"

NUM = r"[0-9０-９〇一二三四五六七八九十数]+"
TIME_UNIT = r"(?:日|週間?|か月|ヶ月|カ月|箇月|年|時間|分|歳)"

# the kind of answer a line gives, by kind (the order gives each kind its bit): a figure
# (its branches need a numeral: NUM's characters) or words, either
_FIGURES: dict[str, str] = {
    WHEN: rf"{NUM}\s*{TIME_UNIT}",
    HOW_LONG: rf"{NUM}\s*{TIME_UNIT}",
    HOW_OFTEN: rf"{NUM}\s*(?:回|度)",
    HOW_MUCH: rf"{NUM}\s*(?:円|割|万)",
    ODDS: r"[0-9０-９]+\s*(?:[%％]|パーセント|割)|人に\s*[0-9０-９一二三四五六七八九十]+\s*人",
}
_WORDS: dict[str, str] = {
    WHEN: r"以内|以降|直後|翌日|当日|前日|始まる|から再開|目安",
    HOW_LONG: r"程度|前後|目安|以内|くらい|ほど",
    HOW_OFTEN: r"ごと|おき|毎|定期的|間隔",
    HOW_MUCH: r"負担|費用|上限|払い戻|助成|給付|手当|支給|対象外|無料|無償|かかりません",
    CAN_I: r"でき(?:ます|る)|可能|かまいません|構いません|問題ありません|差し支え|控え|避け|いけません|ないでください|わけではありません|大丈夫",
    WHAT_TO_DO: r"ください|しましょう|ましょう|大切です|必要です|心がけ|すすめ|勧め|とよい|と良い|とよいでしょう|相談",
}
_KINDS = (WHEN, HOW_LONG, HOW_OFTEN, HOW_MUCH, CAN_I, WHAT_TO_DO, ODDS)
GIVES: dict[str, re.Pattern[str]] = {
    kind: re.compile("|".join(p for p in (_FIGURES.get(kind), _WORDS.get(kind)) if p)) for kind in _KINDS
}
# A numeral any figure branch needs: a line without one gives a kind only by its words.
_NUMERAL = re.compile(NUM[:-1])
BITS: dict[str, int] = {kind: 1 << i for i, kind in enumerate(GIVES)}

# The units a figure is given in (2時間, 3日, 50歳; chatbot.coverage_features asks which one a
# question wants, 何時間), each spelling read as one unit.
UNIT_OF = {"分": "分", "時間": "時間", "日": "日", "週": "週", "週間": "週", "か月": "月", "ヶ月": "月",
           "カ月": "月", "箇月": "月", "月": "月", "年": "年", "歳": "歳", "回": "回", "度": "回", "円": "円"}
UNITS = "週間|時間|か月|ヶ月|カ月|箇月|分|日|週|年|歳|回|円"
GIVEN_UNIT = re.compile(rf"[0-9〇一二三四五六七八九十数]\s*(?:万|千)?\s*({UNITS}|度)")
# each unit its bit (retrieval.lines stores a line's as `units`, uint16)
UNIT_BITS: dict[str, int] = {unit: 1 << i for i, unit in enumerate(dict.fromkeys(UNIT_OF.values()))}

# Changes whenever a pattern does: the index fingerprint holds it (masks are stored).
RULES_DIGEST = hashlib.sha256(
    ("\n".join(f"{k}={p.pattern}" for k, p in GIVES.items()) + f"\nunits={GIVEN_UNIT.pattern}"
     + "".join(f"|{k}={v}" for k, v in UNIT_OF.items())).encode("utf-8")).hexdigest()[:12]


def mask(kinds: Iterable[str]) -> int:
    """The bits of the kinds."""
    out = 0
    for kind in kinds:
        out |= BITS[kind]
    return out


def gives_mask(line: str, *, normalized: bool = False) -> int:
    """The kinds of answer a line gives, as bits (`normalized`: the line is NFKC already)."""
    text = line if normalized else unicodedata.normalize("NFKC", line or "")
    out = 0
    if _NUMERAL.search(text):
        by_bit = _BY_BIT
    elif _ANY_WORD.search(text):
        by_bit = _WORDS_BY_BIT  # a line without a numeral (most) gives a kind by its words only
    else:
        return 0  # none of the words: one search instead of one per kind
    for bit, pattern in by_bit:
        if pattern.search(text):
            out |= bit
    return out


_BY_BIT = tuple((BITS[kind], pattern) for kind, pattern in GIVES.items())
_WORDS_BY_BIT = tuple((BITS[kind], re.compile(words)) for kind, words in _WORDS.items())
# any kind's words: their alternatives side by side (wrapped in groups, sre would no longer
# skip ahead to the characters that can start one: eight times slower)
_ANY_WORD = re.compile("|".join(_WORDS.values()))


def unit_mask(line: str, *, normalized: bool = False) -> int:
    """The units the line gives a figure in, as bits (UNIT_BITS; `normalized`: NFKC already)."""
    text = line if normalized else unicodedata.normalize("NFKC", line or "")
    out = 0
    for unit in GIVEN_UNIT.findall(text):
        out |= UNIT_BITS[UNIT_OF[unit]]
    return out


def units_of(mask_: int) -> frozenset[str]:
    """The units of a unit mask."""
    return frozenset(u for u, bit in UNIT_BITS.items() if mask_ & bit)
