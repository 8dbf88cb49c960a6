"""What a question is about, as this guideline's words: the topic terms a follow-up leans on.

A conversation's follow-up (「入院はどれくらい？」) drops the topic its earlier question
named (「胃がんの手術」). The topic of a question, as chatbot.conversation carries it, is
the content nouns of its query that the guideline knows (a slot with a corpus
alternative: the term itself, a term it begins, a patient-table or Sudachi expansion), by
weight (the slot's q * idf, retrieval.scoring): never a verb, a word naming the kind of
answer (方法, 時期: retrieval.framing.ANSWER_FRAMES), an adverb-like noun (前, 今, あと),
which say when or how, not what, a suffix standing alone (やすい of 酔いやすく, 的) or a
quantity (a counter, a numeral: 4 of 「4だと言われました」 is found in 4週間 as well). A compound the patient wrote (大腸カメラ, 胃がん検診)
stands for its words and weighs as the heaviest of them; its parts are not repeated.
Each term is returned as the patient wrote it (its surface), so that carrying it reads it
again exactly as the question did.
"""
from __future__ import annotations

import re
from typing import Callable, NamedTuple, Sequence

from .framing import ANSWER_FRAMES, COUNTERS
from .query import Query, Slot
from .tokens import ADVERBIAL, AFFIXED, ASCII, COMPOUND, NOUN, PROPER, SUFFIX, SYNONYM, Token

# Slot kinds that name a thing (retrieval.tokens): verbs and framing never do.
TOPIC_KINDS = frozenset({NOUN, PROPER, ASCII, SYNONYM, COMPOUND, AFFIXED})
_JOINED = frozenset({COMPOUND, AFFIXED})
# Quantities are no topic: a counter (回, 日, 年: retrieval.framing) or a numeral (一回の一, 4).
_NUMERAL = re.compile(r"^(?:[一二三四五六七八九十百千万〇数]+|[0-9][0-9.,]*)$")


class TopicTerm(NamedTuple):
    """A topic term as the patient wrote it, and its weight in the question (q * idf)."""

    surface: str
    weight: float


def topic_terms(query: Query, tokens: Sequence[Token], mass: Callable[[Slot], float], k: int) -> list[TopicTerm]:
    """At most `k` topic terms of a question's `query` (its `tokens` tell the adverb-like
    nouns), heaviest first (see the module docstring)."""
    adverbial = {t.surface for t in tokens if t.kind in (ADVERBIAL, SUFFIX)}  # say when or how, not what
    found: list[tuple[float, str, bool]] = []
    for slot in query.slots:
        surface = slot.surface or slot.term
        if (not slot.alternatives or slot.kind not in TOPIC_KINDS or slot.term in ANSWER_FRAMES
                or surface in adverbial or slot.term in COUNTERS or _NUMERAL.match(slot.term)):
            continue
        found.append((mass(slot), surface, slot.kind in _JOINED))
    weighed = []
    for weight, surface, joined in found:
        if joined:  # a compound weighs as its heaviest part
            weight = max([weight] + [w for w, s, j in found if not j and s in surface])
        weighed.append((weight, surface, joined))
    weighed.sort(key=lambda f: (-f[0], not f[2]))
    chosen: list[TopicTerm] = []
    for weight, surface, _ in weighed:
        if len(chosen) >= k:
            break
        if any(surface in c.surface or c.surface in surface for c in chosen):
            continue  # a part of a chosen compound, or a compound of a chosen part
        chosen.append(TopicTerm(surface, float(weight)))
    return chosen
