"""Character bigrams of content spans: the second channel of the index and of a question
(retrieval.scoring's bigram channel), beside the MeCab terms of retrieval.analyzer."""
from __future__ import annotations

from typing import Iterable

# Spans whose bigrams are kept (a text's nouns repeat: Zipf), at most this many.
_CACHE_MAX = 500_000
_CACHE: dict[str, tuple[str, ...]] = {}


def char_bigrams(spans: Iterable[str]) -> list[str]:
    """Character bigrams of content spans (a one-character span counts as itself).

    They match what the terms miss: katakana spellings and compounds that MeCab splits
    differently in the question and in the text."""
    out: list[str] = []
    cache = _CACHE
    for span in spans:
        grams = cache.get(span)
        if grams is None:
            if len(cache) > _CACHE_MAX:
                cache.clear()
            grams = cache[span] = (span,) if len(span) == 1 else tuple(
                span[i : i + 2] for i in range(len(span) - 1)
            )
        out.extend(grams)
    return out
