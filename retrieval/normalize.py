"""Text normalisation shared by the index and the questions: NFKC, and numbers written two ways.

Every text the analyzer reads goes through `normalize` first (lines at index time, the
question at query time, the answer stage's line views), so the two sides agree:

- NFKC: full-width alphanumerics and symbols to ASCII (ＥＧＦＲ -> EGFR), half-width
  katakana to full;
- a stage, grade or phase in Roman numerals as digits (ステージⅣ, Ⅲ期, 第Ⅱ相 -> 4, 3, 2):
  guidelines write the numerals, patients type ステージ4;
- a count in kanji before its counter as digits (一回, 三十分 -> 1回, 30分), which
  guidelines write in digits.

Only the analysis sees the normalised text; what is shown stays the stored line, verbatim.
A change here changes the terms of stored texts: bump analyzer.ANALYZER_VERSION with it.
"""
from __future__ import annotations

import re
import unicodedata

# Roman numerals of a stage, grade or phase. NFKC spells Ⅳ as the letters IV, which is
# also an abbreviation (IV = intravenous), so letters are read as a numeral only next to
# a word that counts with one: after ステージ / stage / 病期 / グレード / grade / 第 or
# before 期 / 相 / 度 / 型; a numeral listed after one of those (ステージⅡ・Ⅲ, ステージ0からⅠ)
# counts too. A sub-stage letter may follow (ⅢA -> 3A).
_ROMAN = "IV|V?I{1,3}|IX|X|V"
_ROMAN_VALUE = {"I": 1, "II": 2, "III": 3, "IV": 4, "V": 5, "VI": 6, "VII": 7, "VIII": 8, "IX": 9, "X": 10}
_ROMAN_AFTER = re.compile(
    rf"(?:ステージ|病期|グレード|第|(?<![A-Za-z])(?:stage|grade))\s?((?:\d+|{_ROMAN})[A-Ca-c]?"
    rf"(?:(?:・|、|,|/|-|~|〜|から|または|か|や|と)(?:{_ROMAN})[A-Ca-c]?)*)(?![A-Za-z])", re.IGNORECASE)
_ROMAN_BEFORE = re.compile(rf"(?<![A-Za-z])({_ROMAN})(?=[A-Ca-c]?(?:期|相|度|型))")
_ROMAN_ONE = re.compile(rf"(?<![A-Za-z])({_ROMAN})(?=[A-Ca-c]?(?![A-Za-z]))")


def _roman_digits(match: re.Match[str]) -> str:
    group = match.group(1)
    digits = _ROMAN_ONE.sub(lambda m: str(_ROMAN_VALUE[m.group(1)]), group)
    return match.group(0)[: match.start(1) - match.start(0)] + digits


# A count written in kanji before its counter (一回, 二週間, 三十分): guidelines write
# digits (1回, 2週間), patients often kanji. 十分 is じゅうぶん (enough), never ten minutes.
_KANJI_DIGIT = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_KANJI_COUNT = re.compile(
    r"(?<![一二三四五六七八九十百千万])([一二三四五六七八九]?十[一二三四五六七八九]?|[一二三四五六七八九])"
    r"(?=(?:回|日|週間|週|か月|ヶ月|カ月|ケ月|箇月|年|時間|分|秒|錠|歳|才|代|人|杯|種類|倍|割|度|食|本)"
    r"|(?:mg|g|kg|cm|mm|ml)(?![A-Za-z]))")


def _kanji_count(match: re.Match[str]) -> str:
    numeral = match.group(1)
    if numeral == "十" and match.string.startswith("分", match.end()):
        return numeral
    if "十" not in numeral:
        return str(_KANJI_DIGIT[numeral])
    tens, _, ones = numeral.partition("十")
    return str(_KANJI_DIGIT.get(tens, 1) * 10 + _KANJI_DIGIT.get(ones, 0))


def normalize(text: str) -> str:
    """NFKC (full-width alphanumerics and symbols to ASCII, half-width katakana to full),
    stage / grade / phase numerals to digits (ステージⅣ -> ステージ4) and counts in kanji
    before a counter to digits (一回 -> 1回)."""
    text = unicodedata.normalize("NFKC", text)
    if "I" in text or "V" in text or "X" in text or "i" in text or "v" in text:
        text = _ROMAN_AFTER.sub(_roman_digits, text)
        text = _ROMAN_BEFORE.sub(lambda m: str(_ROMAN_VALUE[m.group(1)]), text)
    # (a count's numeral holds one of these: a one-character search rules out most texts
    # at a seventh of the cost of looking for a count at every position)
    if _KANJI_NUMERAL.search(text) and _KANJI_COUNT.search(text):
        text = _KANJI_COUNT.sub(_kanji_count, text)
    return text


_KANJI_NUMERAL = re.compile("[一二三四五六七八九十]")
