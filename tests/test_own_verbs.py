"""analyzer._own_verbs (only the places of a 非自立可能 verb visited, tokens made without
the named tuple's __new__) gives what the plain loop it replaced gives, kept here as the
reference, on random token sequences of particles, framing words, stop verbs and
auxiliaries in a row, and on MeCab's tokens of real sentences."""
from __future__ import annotations

import random

import pytest

from guiderag.retrieval import analyzer
from guiderag.retrieval.analyzer import _MAYBE_AUX, _OWN_AFTER, _own_verbs
from guiderag.retrieval.framing import FRAMING_WORDS
from guiderag.retrieval.tokens import NOUN, OTHER, STOP_VERBS, VERB, Token


def _reference(tokens: list[Token]) -> list[Token]:
    out = list(tokens)
    for i, t in enumerate(out):
        if t.kind == _MAYBE_AUX:
            own = (i > 0 and out[i - 1].kind == OTHER and out[i - 1].surface in _OWN_AFTER
                   and not (i > 1 and out[i - 2].form in FRAMING_WORDS))
            out[i] = t._replace(kind=VERB if own and t.form not in STOP_VERBS else OTHER)
    return out


_FRAMING = sorted(FRAMING_WORDS)[:5]
_POOL = (
    [Token(p, p, OTHER) for p in sorted(_OWN_AFTER)]
    + [Token("の", "の", OTHER), Token("て", "て", OTHER)]
    + [Token(w, w, NOUN) for w in _FRAMING] + [Token("治療", "治療", NOUN), Token("髪", "髪", NOUN)]
    + [Token("続け", "続ける", _MAYBE_AUX), Token("出し", "出す", _MAYBE_AUX),
       Token("い", "いる", _MAYBE_AUX, True),
       # spelled like a particle: the token after it reads its decided kind, as the loop did
       Token("で", "出る", _MAYBE_AUX)]
    + [Token(v, v, _MAYBE_AUX) for v in sorted(STOP_VERBS)[:3]]
    + [Token("飲み", "飲む", VERB)]
)


@pytest.mark.parametrize("seed", range(4))
def test_own_verbs_is_the_plain_loop(seed):
    rng = random.Random(seed)
    for _ in range(2000):
        tokens = [rng.choice(_POOL) for _ in range(rng.randint(1, 12))]
        kinds = [t.kind for t in tokens]
        if _MAYBE_AUX not in kinds:
            continue
        got = _own_verbs(tokens, kinds)
        assert got == _reference(tokens), tokens
        assert all(type(t) is Token for t in got)


@pytest.mark.parametrize("text", ["治療を続ける", "薬を飲み続けています", "髪が抜けてくる", "気をつけてください",
                                  "完全に治すことはできますか", "薬を出してもらう"])
def test_tokenize_reads_auxiliaries_as_before(text, monkeypatch):
    expected = analyzer.tokenize(text)
    analyzer._TOKEN_CACHE.clear()
    monkeypatch.setattr(analyzer, "_own_verbs", lambda tokens, kinds: _reference(tokens))
    assert analyzer.tokenize(text) == expected
