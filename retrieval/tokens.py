"""The vocabulary of the analyzer: token kinds, stop words, and the Token and Term tuples.

Apart from retrieval.analyzer so that the modules working on tokens (framing, synonyms)
and the analyzer that makes them can import it without importing each other: the
analyzer applies a maintainer's synonyms as a `TokenRewrite` (retrieval.synonyms'
SynonymTable is one), which it knows by this interface only.
"""
from __future__ import annotations

from typing import NamedTuple, Protocol

# Token kinds.
NOUN, PROPER, PREFIX, SUFFIX, ASCII, VERB, SYNONYM, OTHER = "N", "P", "pre", "suf", "A", "V", "S", "X"
COMPOUND = "C"  # a term joined from several words (胸腺腫瘍, 遺伝子変異)
AFFIXED = "Naf"  # one noun with its prefixes or suffixes (副作用, 治療中, 年齢的)
ADVERBIAL = "Nadv"  # an adverb-like noun (あと, 毎日, 今): a term of its own, never glued
NOUN_KINDS = frozenset({NOUN, PROPER, ASCII, SYNONYM, COMPOUND, AFFIXED})

# Question words and empty nouns: they break compounds and are never terms (何年 must not
# become an unseen compound that makes every question look out of scope).
STOP_NOUNS = frozenset({"何", "幾つ", "幾ら", "幾", "何れ", "事", "物", "為", "様", "所", "方", "的", "時"})
# Verbs that carry no content (する, ある, いる, なる, できる...): their lemmas.
STOP_VERBS = frozenset({"為る", "有る", "居る", "成る", "出来る", "言う", "思う", "れる", "られる", "せる", "させる", "ない", "無い", "良い", "いい", "宜しい"})


class Token(NamedTuple):
    """One MeCab token reduced to what term building needs."""

    surface: str
    form: str  # the normalised form terms are made of
    kind: str
    space_before: bool = False


class Term(NamedTuple):
    """An index term, the surface it came from and its kind (N, P, C compound, A, V, S)."""

    text: str
    surface: str
    kind: str

    @property
    def is_noun(self) -> bool:
        return self.kind in NOUN_KINDS


class TokenRewrite(Protocol):
    """Tokens in, tokens out, with a fingerprint of the rules (an index built with other
    rules is rebuilt): retrieval.synonyms.SynonymTable."""

    def apply(self, tokens: list[Token]) -> list[Token]: ...

    def fingerprint(self) -> str: ...
