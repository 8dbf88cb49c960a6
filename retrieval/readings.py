"""Words typed in kana that the guideline writes in kanji: だんぴんぐしょうこうぐん -> ダンピング症候群.

Patients type a word they cannot spell in kanji as its reading (じんましん, ふっこうきょう).
MeCab then cuts the kana into pieces the corpus never uses (だん, ぴん, しょうこう), and the
question looks as if it asked about something the guideline never mentions. A run of kana
in the question is read as katakana and looked up among the readings of the corpus's own
terms (MeCab's reading of each term, made once per index when a question first needs it);
a reading found for exactly one term makes that term an alternative of the run's unknown
terms (retrieval.query, at the Sudachi synonyms' weight: a reading is a guess at a spelling).

Only long enough runs are read (MIN_READING kana): short readings are homophones of many
words (きかん: 期間, 器官, 機関).
"""
from __future__ import annotations

import re
import threading
from typing import Callable, Iterable, Sequence

from .tokens import Token

# Shortest reading looked up, in kana; fewest hiragana in a run worth reading.
MIN_READING = 4
MIN_HIRAGANA = 3

_KANA = re.compile(r"^[\u3041-\u3096\u30a1-\u30fa\u30fc]+$")
_HIRAGANA = re.compile(r"[\u3041-\u3096]")
_IDEOGRAPH = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def katakana(text: str) -> str:
    """Hiragana as katakana (the readings MeCab gives are katakana)."""
    return "".join(chr(ord(ch) + 0x60) if "\u3041" <= ch <= "\u3096" else ch for ch in text)


def kana_runs(tokens: Sequence[Token]) -> list[tuple[int, int]]:
    """(start, end) of each run of two or more tokens written in kana only, with at least
    MIN_HIRAGANA hiragana (a katakana word, with or without its particle, is a loanword the
    analyzer reads as it is)."""
    runs: list[tuple[int, int]] = []
    start = None
    for i, tok in enumerate([*tokens, None]):
        if tok is not None and tok.surface and _KANA.match(tok.surface):
            if start is None:
                start = i
            continue
        if start is not None and i - start >= 2 and \
                sum(len(_HIRAGANA.findall(t.surface)) for t in tokens[start:i]) >= MIN_HIRAGANA:
            runs.append((start, i))
        start = None
    return runs


class Readings:
    """The corpus's terms written with kanji, by their katakana reading (unique ones only)."""

    def __init__(self, terms: Iterable[str], reading_of: Callable[[str], str]) -> None:
        found: dict[str, str | None] = {}
        for term in terms:
            if not _IDEOGRAPH.search(term):
                continue
            reading = reading_of(term)
            if len(reading) < MIN_READING or not _KANA.match(reading):
                continue
            found[reading] = None if reading in found and found[reading] != term else term
        self._terms = {r: t for r, t in found.items() if t is not None}

    def term(self, kana: str) -> str | None:
        """The one corpus term read `kana` (hiragana or katakana), if any."""
        return self._terms.get(katakana(kana)) if len(kana) >= MIN_READING else None

    def __len__(self) -> int:
        return len(self._terms)


class LazyReadings:
    """Readings of a vocabulary made on first use, once (thread-safe)."""

    def __init__(self, terms: Callable[[], Iterable[str]], reading_of: Callable[[str], str]) -> None:
        self._source = terms
        self._reading_of = reading_of
        self._made: Readings | None = None
        self._lock = threading.Lock()

    def get(self) -> Readings:
        if self._made is None:
            with self._lock:
                if self._made is None:
                    self._made = Readings(self._source(), self._reading_of)
        return self._made
