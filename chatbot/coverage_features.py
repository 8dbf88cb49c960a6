"""The evidence the coverage decision weighs, as named numbers (one question, one guideline).

`measure(question, result, evidence, line_coverage, page_lines)` turns what retrieval found
into the features of FEATURES, each a plain number, plus the words behind them (which
question word the guideline never uses, which disease it names) for the reasons an
evaluator reads. The features, in groups:

- how well the best passage and page score: `score` (the square root of the best passage's
  score: the share of the question's mass it finds), `margin` over the next page;
- how much of the question the guideline speaks to: the best reference line
  (`line_coverage`, the old evidence gate's measure), the best page (`page_coverage`), its
  title (`title_coverage`, a Q&A page asking the question), the corpus at all
  (`known_mass`), and how much of the best page's share came only through an expansion
  (`expansion_mass`: the patient table, Sudachi's synonyms);
- the words the guideline never uses, by how specific they are in general Japanese
  (`unknown_specific`, `unknown_common`: wordfreq, retrieval.specificity) and by what they
  look like (`unknown_disease`, `unknown_drug`: chatbot.word_kinds); a disease the guideline
  names on one or two pages only, in passing (`rare_disease`);
- what the question asks about against what the best page gives: a figure (when, how
  long, how often, how much; `figure_missing` on the best page, `figure_missing_reference`
  on every reference page, chatbot.answer_type), odds (`odds_missing`: a survival rate, a
  percentage), a recommendation of a named hospital or product (`asks_recommendation`),
  and, of a question asking whether the patient may do something, the activity or thing it
  asks about when the guideline never uses its words (`permission_unknown`: 運転 of 車の運転は
  してもいい, コーヒー of コーヒーは飲んでもいい; chatbot.asked_about);
- the question's size (`terms`).
Which of them the shipped model uses, and with what weight, is data/coverage_model.json.
"""
from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from guiderag.retrieval import answer_kinds
from guiderag.retrieval.evidence import QueryEvidence, SlotFact, compound_parts
from guiderag.retrieval.tokens import NOUN_KINDS

from .answer_type import CAN_I, FIGURE_KINDS, asked_kinds, gives
from .asked_about import permission_object
from .word_kinds import DISEASE, DRUG, ORGAN, is_katakana, word_kind

# A word the corpus never uses counts as specific at or below this Zipf value (wordfreq:
# about 3 for 白血病, 5 for お金), the value settings.specific_rare_zipf gives the retrieval.
SPECIFIC_ZIPF = 3.5
# Counts are capped: the second unknown disease adds little to the first.
COUNT_CAP = 2
# A disease the guideline names on at most this many pages is mentioned in passing.
RARE_PAGES = 2
_NOUNISH = NOUN_KINDS  # ASCII words (EGFR, S-1) are nouns here too

_ODDS_ASKED = re.compile(r"何\s*[%％]|何パーセント|何割|確率|生存率|余命|治る見込み|再発率")
_ODDS_GIVEN = answer_kinds.GIVES[answer_kinds.ODDS]  # one rule, read at index time (retrieval.answer_kinds)
_RECOMMEND = re.compile(r"ランキング|おすすめ|お勧め|オススメ|お薦め|上手|うまい|評判|名医|メーカー|ブランド|"
                        r"どこの病院|いい病院|良い病院|どの病院")

# (name, what it measures): the order of the model file's vectors.
FEATURES: tuple[tuple[str, str], ...] = (
    ("score", "the best passage's share of the question (square root of its score)"),
    ("margin", "how far the best page scores above the next one"),
    ("cleared", "the best passage clears the retrieval threshold (0.2; 0.16 on a Q&A page)"),
    ("line_coverage", "the share of the question one line of the reference speaks to"),
    ("page_coverage", "the share of the question the best page holds"),
    ("title_coverage", "the share of the question the best page's title holds"),
    ("known_mass", "the share of the question's words the guideline uses at all"),
    ("expansion_mass", "the share of the best page's match reached only through an expansion"),
    ("unknown_specific", "specific words the guideline never uses"),
    ("unknown_common", "everyday words the guideline never uses"),
    ("unknown_partial", "compounds the guideline never uses, of words it does use"),
    ("unknown_paraphrase", "compounds the guideline never uses whose words one line of the best page says together (胃切除 where it says 胃を切除)"),
    ("passing_named", "a disease or organ the guideline names only in passing (on a few pages, in no title)"),
    ("unknown_when", "adverb-like nouns the guideline never uses (先月, 来週)"),
    ("unknown_mass", "the share of the question's mass in words the guideline never uses"),
    ("log_score", "the best passage's score (log)"),
    ("log_line_coverage", "the best line's share of the question (log)"),
    ("log_page_coverage", "the best page's share of the question (log)"),
    ("missing_top", "the heaviest question word the best page lacks (its share)"),
    ("specificity_unknown", "how specific the rarest word the guideline never uses is (5.5 - Zipf)"),
    ("unknown_disease", "a disease, organ or procedure the guideline never names"),
    ("unknown_drug", "a drug or other loanword the guideline never names"),
    ("rare_disease", "a disease the guideline names only in passing"),
    ("asks_figure", "the question asks for a time, duration, frequency or amount"),
    ("figure_missing", "the best page gives no figure of the kind asked for"),
    ("unit_missing", "the question asks a figure in a unit (何時間) no figure of the best page is in"),
    ("figure_missing_reference", "no reference page gives a figure of the kind asked for"),
    ("odds_missing", "odds are asked (a survival rate, a percentage) and the best page gives none"),
    ("asks_recommendation", "a named hospital, doctor or product is asked for"),
    ("permission_unknown", "the question asks whether the patient may do something (してもいい, 大丈夫) "
                           "and the guideline never names that activity or thing (運転, コーヒー)"),
    ("terms", "how many words the question has (log)"),
    ("qa_page", "the best page is a Q&A page (its title asks a question)"),
    ("known_page_coverage", "the share of the question's known words the best page holds"),
    ("page_weight", "how much the best page says the question's words (BM25-saturated frequency)"),
    ("chance_coverage", "the share of the question a page holds by chance (its words' page frequency)"),
    ("surprise", "page coverage above chance"),
    ("page_length", "how long the best page is (log of its distinct terms)"),
    ("relative_length", "the best page's length against the guideline's average (log)"),
)
NAMES: tuple[str, ...] = tuple(n for n, _ in FEATURES)


@dataclass
class Measured:
    """A question's features and the words behind them (for the reasons)."""

    values: dict[str, float]
    unknown_specific: list[str] = field(default_factory=list)
    unknown_common: list[str] = field(default_factory=list)
    unknown_partial: list[str] = field(default_factory=list)  # unknown compounds of known words
    unknown_paraphrase: list[str] = field(default_factory=list)  # ... said together in a line of the best page
    passing_named: list[str] = field(default_factory=list)  # diseases, organs named only in passing
    missing_units: list[str] = field(default_factory=list)  # units asked (何時間) the best page gives no figure in
    unknown_when: list[str] = field(default_factory=list)  # unknown adverb-like nouns (先月, 来週)
    unknown_named: list[str] = field(default_factory=list)  # diseases, organs, procedures, drugs
    rare_diseases: list[str] = field(default_factory=list)
    unknown_diseases: list[str] = field(default_factory=list)  # diseases (organs) the guideline never names
    figure_kinds: list[str] = field(default_factory=list)
    permission_unknown: list[str] = field(default_factory=list)  # what a permission is asked for, never used
    top_title: str = ""

    def vector(self, names: Sequence[str] = NAMES) -> list[float]:
        return [float(self.values.get(n, 0.0)) for n in names]


def _named(fact: SlotFact) -> str | None:
    """What an unknown word names, by its shape (a compound ending in がん after an organ
    is a cancer of that organ)."""
    kind = word_kind(fact.surface) or word_kind(fact.term)
    return kind


# The units a figure is asked in (何時間, 何日, 何歳) and given in (2時間, 3日, 50歳), each
# spelling read as one; on the time scale a neighbour answers too (何日 by 2週間).
# (the line side, given units, is retrieval.answer_kinds': the index stores each line's)
_UNIT_OF = answer_kinds.UNIT_OF
_TIME_SCALE = ("分", "時間", "日", "週", "月", "年")
_UNITS = answer_kinds.UNITS
_ASKED_UNIT = re.compile(rf"何\s*({_UNITS})(?!も)")  # not 何回も, 何年も: many times, not how many
_GIVEN_UNIT = answer_kinds.GIVEN_UNIT


def asked_units(text: str) -> frozenset[str]:
    """The units the question asks a figure in (何時間 -> 時間), NFKC text."""
    return frozenset(_UNIT_OF[u] for u in _ASKED_UNIT.findall(text))


def _answers_unit(asked: str, given: frozenset[str]) -> bool:
    if asked in given:
        return True
    if asked in _TIME_SCALE:
        i = _TIME_SCALE.index(asked)
        return any(u in given for u in _TIME_SCALE[max(0, i - 1):i + 2])
    return False


@dataclass(frozen=True)
class PageFacts:
    """What some pages' lines give: the figure kinds (chatbot.answer_type), odds, and the
    units its figures are in."""

    gives: frozenset[str] = frozenset()
    odds: bool = False
    units: frozenset[str] = frozenset()

    def __or__(self, other: "PageFacts") -> "PageFacts":
        return PageFacts(self.gives | other.gives, self.odds or other.odds, self.units | other.units)

    @classmethod
    def of_mask(cls, gives_mask: int, unit_mask: int = 0) -> "PageFacts":
        """The facts of lines that give the kinds `gives_mask` in the units `unit_mask`
        (retrieval.answer_kinds bits, the index stores them: retrieval.lines.LineAnalyses
        .page_gives and .page_units)."""
        kinds = frozenset(k for k in FIGURE_KINDS if gives_mask & answer_kinds.BITS[k])
        return cls(kinds, bool(gives_mask & answer_kinds.BITS[answer_kinds.ODDS]), answer_kinds.units_of(unit_mask))

    @classmethod
    def of(cls, lines: Iterable[str]) -> "PageFacts":
        kinds: set[str] = set()
        units: set[str] = set()
        odds = False
        for line in lines:
            for kind in FIGURE_KINDS - kinds:
                if gives(line, frozenset({kind})):
                    kinds.add(kind)
            text = unicodedata.normalize("NFKC", line)
            if not odds and _ODDS_GIVEN.search(text):
                odds = True
            units.update(_UNIT_OF[u] for u in _GIVEN_UNIT.findall(text))
        return cls(frozenset(kinds), odds, frozenset(units))


# Disease words too general to say which disease (a cancer, a tumour, a disease).
_GENERIC_DISEASE = frozenset({"がん", "ガン", "癌", "腫瘍", "病気", "病", "症", "炎", "疾患", "腫"})


def _own_disease(fact: SlotFact, facts: Sequence[SlotFact]) -> bool:
    """An unknown disease name that is a disease the guideline names, with a modifier
    (再発胃がん, 進行胃がん: 胃がん is the guideline's): some known question word naming a
    disease, not a generic one (がん), ends it."""
    for f in facts:
        if f.known and f.surface != fact.surface and fact.surface.endswith(f.surface) \
                and f.surface not in _GENERIC_DISEASE and word_kind(f.surface) == DISEASE:
            return True
    return False


def _inside_another(fact: SlotFact, facts: Sequence[SlotFact]) -> bool:
    """The word is a part of another of `facts` (正月 of お正月)."""
    return any(g.surface != fact.surface and fact.surface in g.surface for g in facts)


def _permission_unknown(question: str, kinds: frozenset[str], unknown: Sequence[SlotFact]) -> list[str]:
    """The question's words the guideline never uses (`unknown`) that name what it asks
    permission for (chatbot.asked_about: 車, 運転 of 車の運転はしてもいい), when it asks one."""
    if CAN_I not in kinds or not unknown:
        return []
    asked = permission_object(question)
    if asked is None or not asked.nouns:
        return []
    return [f.surface for f in unknown if f.surface and any(f.surface in w or w in f.surface for w in asked.nouns)]


def _unknown_disease(fact: SlotFact, facts: Sequence[SlotFact]) -> bool:
    """An unknown word that names a disease or organ not the guideline's own (乳腺炎, 大腸炎)."""
    return _named(fact) in (DISEASE, ORGAN) and not _own_disease(fact, facts)


def measure(
    question: str,
    top_score: float,
    page_scores: Sequence[float],
    cleared: bool,
    evidence: QueryEvidence,
    line_coverage: float | None,
    top_page: PageFacts,
    reference: PageFacts,
) -> Measured:
    """The features of one question against one guideline's retrieval (module docstring)."""
    facts = evidence.slots
    mass = sum(f.mass for f in facts) or 1.0
    second = page_scores[1] if len(page_scores) > 1 else 0.0
    best = page_scores[0] if page_scores else 0.0
    m = Measured(values={}, top_title=evidence.top_title)
    text = unicodedata.normalize("NFKC", question)
    unknown = [f for f in facts if not f.known]
    known_surfaces = [f.surface for f in facts if f.known and f.surface]
    for f in unknown:
        named = _named(f)
        if (named in (DISEASE, ORGAN, DRUG) or (named is not None and f.kind in _NOUNISH)) \
                and not _inside_another(f, unknown):
            m.unknown_named.append(f.surface)
        if f.kind not in _NOUNISH or _inside_another(f, unknown):
            # words, not their parts: a part of an unknown word the analyzer also read (正月 of
            # お正月, じん and ましん of じんましん) is no second unknown word
            continue
        parts = compound_parts(f, facts)
        if parts and all(g.known for g in parts) and f.surface in evidence.joined and not _unknown_disease(f, facts):
            m.unknown_paraphrase.append(f.surface)  # 胃切除 where a line of the best page says 胃を切除 (evidence.joined)
        elif any(k != f.surface and k in f.surface for k in known_surfaces):
            # a compound of words the guideline uses, never said next to each other (確定申告 where one
            # line says 確定 and another 申告): another topic in the guideline's words
            m.unknown_partial.append(f.surface)
        elif f.zipf is None or f.zipf <= SPECIFIC_ZIPF:
            m.unknown_specific.append(f.surface)
        elif f.adverbial:
            m.unknown_when.append(f.surface)  # 先月, 来週: when the patient asks, not what about
        else:
            m.unknown_common.append(f.surface)
    n = max(1, evidence.n_pages)
    passing = [f for f in facts if f.known and f.title_pages == 0 and f.surface not in _GENERIC_DISEASE
               and (word_kind(f.surface) in (DISEASE, ORGAN) or word_kind(f.term) in (DISEASE, ORGAN))]
    m.passing_named = [f.surface for f in passing if not _inside_another(f, passing)]
    for f in facts:
        if f.known and (word_kind(f.surface) == DISEASE or word_kind(f.term) == DISEASE) \
                and f.pages <= RARE_PAGES and n >= 5 * RARE_PAGES and f.top_page <= 0:
            m.rare_diseases.append(f.surface)
    kinds = asked_kinds(question)
    figure = kinds & FIGURE_KINDS
    m.figure_kinds = sorted(figure)
    odds = bool(_ODDS_ASKED.search(text))
    v = m.values
    v["score"] = math.sqrt(max(0.0, top_score))
    v["margin"] = math.sqrt(max(0.0, best)) - math.sqrt(max(0.0, second))
    v["cleared"] = 1.0 if cleared else 0.0
    v["line_coverage"] = float(line_coverage or 0.0)
    v["page_coverage"] = sum(f.mass * f.top_page for f in facts) / mass
    v["title_coverage"] = sum(f.mass * f.top_title for f in facts) / mass
    v["known_mass"] = sum(f.mass for f in facts if f.known) / mass
    v["expansion_mass"] = sum(f.mass * f.top_page for f in facts if f.expansion_only) / mass
    v["unknown_specific"] = float(min(COUNT_CAP, len(m.unknown_specific)))
    v["unknown_common"] = float(min(COUNT_CAP, len(m.unknown_common)))
    v["unknown_partial"] = float(min(COUNT_CAP, len(m.unknown_partial)))
    v["unknown_when"] = float(min(COUNT_CAP, len(m.unknown_when)))
    v["unknown_paraphrase"] = float(min(COUNT_CAP, len(m.unknown_paraphrase)))
    v["passing_named"] = 1.0 if m.passing_named else 0.0
    v["unknown_mass"] = sum(f.mass for f in unknown) / mass
    v["log_score"] = math.log(max(top_score, 1e-4))
    v["log_line_coverage"] = math.log(max(float(line_coverage or 0.0), 1e-2))
    v["log_page_coverage"] = math.log(max(v["page_coverage"], 1e-2))
    v["missing_top"] = max((f.mass / mass for f in facts if f.top_page <= 0), default=0.0)
    v["specificity_unknown"] = max(((SPECIFIC_ZIPF + 2.0 - min(f.zipf if f.zipf is not None else 0.0, SPECIFIC_ZIPF + 2.0))
                                    for f in unknown if f.kind in _NOUNISH
                                    and f.surface not in m.unknown_partial), default=0.0)
    diseases = [f for f in unknown if f.kind in _NOUNISH and _named(f) in (DISEASE, ORGAN)
                and not _own_disease(f, facts) and not _inside_another(f, unknown)]
    m.unknown_diseases = [f.surface for f in diseases]
    v["unknown_disease"] = 1.0 if diseases else 0.0
    v["unknown_drug"] = float(any(_named(f) == DRUG or is_katakana(f.surface) for f in unknown if f.kind in _NOUNISH))
    v["rare_disease"] = 1.0 if m.rare_diseases else 0.0
    v["asks_figure"] = 1.0 if figure else 0.0
    v["figure_missing"] = 1.0 if figure and not figure & top_page.gives else 0.0
    v["figure_missing_reference"] = 1.0 if figure and not figure & reference.gives else 0.0
    m.missing_units = sorted(u for u in asked_units(text) if not _answers_unit(u, top_page.units))
    v["unit_missing"] = 1.0 if m.missing_units else 0.0
    v["odds_missing"] = 1.0 if odds and not top_page.odds else 0.0
    v["asks_recommendation"] = 1.0 if _RECOMMEND.search(text) else 0.0
    m.permission_unknown = _permission_unknown(question, kinds, unknown)
    v["permission_unknown"] = 1.0 if m.permission_unknown else 0.0
    v["terms"] = math.log1p(len(facts))
    v["qa_page"] = 1.0 if evidence.top_page_qa else 0.0
    known = [f for f in facts if f.known]
    kmass = sum(f.mass for f in known) or 1.0
    v["known_page_coverage"] = sum(f.mass * f.top_page for f in known) / kmass
    v["page_weight"] = sum(f.mass * f.top_weight for f in facts) / mass
    v["chance_coverage"] = sum(f.mass * f.pages / n for f in known) / mass
    v["surprise"] = v["page_coverage"] - v["chance_coverage"]
    v["page_length"] = math.log1p(evidence.top_page_terms)
    v["relative_length"] = math.log((evidence.top_page_terms + 1.0) / (evidence.mean_page_terms + 1.0))
    return m
