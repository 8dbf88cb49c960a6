"""gives_mask searches a line without a numeral for the kinds' words only; pinned to every
pattern searched on every line, on the bench corpus and on random text."""
from __future__ import annotations

import random

from guiderag.retrieval import answer_kinds
from guiderag.retrieval.bench import generate_corpus
from guiderag.retrieval.normalize import normalize


def _plain(text: str) -> int:
    out = 0
    for kind, pattern in answer_kinds.GIVES.items():
        if pattern.search(text):
            out |= answer_kinds.BITS[kind]
    return out


def test_gives_mask_equals_every_pattern_searched() -> None:
    texts = [normalize(line) for p in generate_corpus(40, 1).pages for line in (p.title, *p.lines)]
    rng = random.Random(20261203)
    alphabet = list("0123456789０１２〇一二三四五六七八九十数百日週間か月年時間分歳回度円割万%％人に ") + [
        "以内", "目安", "程度", "ごと", "毎", "負担", "無料", "できます", "ください", "相談", "パーセント", "手術", "の", "は"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(5000)]
    texts += ["", "2週間後", "10人に1人", "3割負担", "一日一回", "数日以内", "１０％", "毎日", "可能です"]
    hits = 0
    for text in texts:
        want = _plain(text)
        assert answer_kinds.gives_mask(text, normalized=True) == want, text
        hits += want != 0
    assert hits > 1000


def test_normalize_looks_for_kanji_counts_only_in_texts_with_a_kanji_numeral() -> None:
    """normalize's one-character pre-check changes nothing: pinned to the count rewrite
    applied to every text."""
    import unicodedata

    from guiderag.retrieval import normalize as module

    def plain(text: str) -> str:
        text = unicodedata.normalize("NFKC", text)
        if "I" in text or "V" in text or "X" in text or "i" in text or "v" in text:
            text = module._ROMAN_AFTER.sub(module._roman_digits, text)
            text = module._ROMAN_BEFORE.sub(lambda m: str(module._ROMAN_VALUE[m.group(1)]), text)
        return module._KANJI_COUNT.sub(module._kanji_count, text)

    rng = random.Random(7)
    alphabet = list("一二三四五六七八九十百千万回日週間か月年時間分秒錠歳才代人杯種類倍割度食本mgkgcml十分ステージⅣIV期 ")
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10))) for _ in range(20000)]
    texts += [line for p in generate_corpus(20, 1).pages for line in p.lines] + ["一回", "三十分", "十分", "五十代"]
    for text in texts:
        assert normalize(text) == plain(text), text
