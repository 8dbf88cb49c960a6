"""A question as the `ours` pipeline scores it, the data: slots (retrieval.query builds them),
the query they make, the query weights and the light affixes.

See retrieval.query for what a slot is, its weight and its alternatives; retrieval.scoring
for how a query scores a passage.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .analyzer import Analysis, Analyzer
from .expansion import Expansion
from .tokens import Term, Token

# How an expansion to a compound's words names its target (胃+切除: Slot.parts).
PARTS_JOIN = "+"

# Sudachi is looked up for runs of at most this many tokens (お+産, 目+やに).
SUDACHI_SPAN = 3

# Query weights, relative to a noun's 1. Constants, not settings: like the scoring formula's
# (retrieval.pipeline_ours) they shape the scores the threshold is calibrated on; measured on
# JSQuAD and the patient-worded sample set (issue 11), never set outside tests.
# A verb/adjective lemma: a patient's verb is rarely the topic.
VERB_WEIGHT = 0.5
# A compound the corpus never uses whose words it does (手術のあと息切れ -> 後息切れ is an
# accident of joining; its words 後 and 息切れ carry the meaning), and an affixed word found
# nowhere whose noun is found (年齢的, 治療中 -> 年齢, 治療): relative to the unseen idf.
UNKNOWN_COMPOUND_WEIGHT = 0.5
# The same for a verb/adjective lemma found nowhere (払える, 痛い, おかしい), after VERB_WEIGHT:
# a noun the guideline never uses often is the topic, a verb rarely.
UNKNOWN_VERB_WEIGHT = 0.5



@dataclass
class Slot:
    """One question term: its query weight and the corpus terms that count as finding it."""

    term: str
    weight: float
    alternatives: dict[str, float] = field(default_factory=dict)
    surface: str = ""
    kind: str = ""
    specificity: float = 1.0  # applied to `weight` when the corpus never uses the term
    # a compound the corpus never uses whose words it does: found, at parts_weight, where
    # all its words are (胃切除 where 胃 and 切除 are), the least of their weights
    parts: tuple[str, ...] = ()
    parts_weight: float = 0.0
    # the character bigrams where those words join (胃切除: 胃切): said next to each other
    junctions: tuple[str, ...] = ()


@dataclass
class Query:
    """The slots of a question (and its keywords), the bigram weights, the expansions."""

    slots: list[Slot]
    bigrams: dict[str, float]
    expansions: list[Expansion]

    @property
    def terms(self) -> list[str]:
        return [s.term for s in self.slots]

    def slot(self, term: str) -> Slot | None:
        for s in self.slots:
            if s.term == term:
                return s
        return None


def copied(query: Query) -> Query:
    """A copy of `query` that building on it cannot change (QueryBuilder.build(base=) merges
    into the base's slots): its slots and their alternatives copied, the rest as lists."""
    slots = []
    for s in query.slots:
        c = object.__new__(Slot)
        c.__dict__.update(s.__dict__)
        c.alternatives = dict(s.alternatives)
        slots.append(c)
    return Query(slots, dict(query.bigrams), list(query.expansions))


_HONORIFIC = ("お", "ご", "御")
# Affixes that say when, how or whose, never what a word is about (切除後, 治療中, 年齢的,
# 3日目, お餅), as the analyzer's forms (御 for お and ご; 後 also for 手術のあと, see
# retrieval.framing.join_after). Not 抗, 再, 非 (抗がん剤), nor the suffixes that make
# another word of it: 剤, 病, 炎, 率, 症, 法, 線 (糖尿病 is no 糖尿).
LIGHT_PREFIXES = frozenset({"御"})
LIGHT_SUFFIXES = frozenset({"後", "中", "前", "時", "的", "目", "頃", "以降", "以後", "直後", "明け", "等", "達", "気味"})


def lookup_forms(term: Term) -> list[str]:
    """The spellings of a term to look up in the general frequency table, which was cut
    into words by another dictionary: the lemma, the surface, the surface in the other
    kana, and without the honorific prefix (お酒 is listed as お + 酒, so as 酒)."""
    forms = [term.text, term.surface]
    for form in (term.text, term.surface):
        if form.startswith(_HONORIFIC) and len(form) > 1:
            forms.append(form[1:])
    forms += [_other_kana(f) for f in list(forms)]
    return list(dict.fromkeys(f for f in forms if f))


# Hiragana to katakana and back (U+3041..3096 <-> U+30A1..30F6): one str.translate.
_KANA_SWAP = {**{c: c + 0x60 for c in range(0x3041, 0x3097)}, **{c: c - 0x60 for c in range(0x30A1, 0x30F7)}}


def _other_kana(text: str) -> str:
    """Hiragana as katakana and katakana as hiragana (さらさら / サラサラ)."""
    return text.translate(_KANA_SWAP)


# A question text as the query builder reads it: its query tokens (Analyzer.query_tokens)
# and their analysis.
Parsed = tuple[tuple[Token, ...], Analysis]

# Entries of each of the query builder's word maps before it starts again.
WORD_MAPS_MAX = 50_000


def parse_query(analyzer: Analyzer, text: str) -> Parsed:
    """A question text's query tokens and their analysis (framing words no terms)."""
    tokens = analyzer.query_tokens(text)
    return tuple(tokens), analyzer.analysis_of_query_tokens(tokens)
