"""A question as the `ours` pipeline scores it: slots, their weights and their alternatives.

Each distinct term of the question is a slot. A slot has
- a query weight q: nouns 1, verb/adjective lemmas VERB_WEIGHT (times
  UNKNOWN_VERB_WEIGHT when the corpus never uses the verb), a compound or an
  affixed word the corpus never uses whose words it does use UNKNOWN_COMPOUND_WEIGHT;
  and, for a word the corpus never uses, its specificity in general Japanese
  (retrieval.specificity: 髪, 戻る, お金 weigh little; 白血病, 漢方 fully). Proper nouns,
  alphanumeric terms and the guideline's own synonyms keep their weight. A word naming
  the kind of answer asked for (retrieval.framing.ANSWER_FRAMES: 違い, 方法, 時期) weighs
  config.frame_word_weight more;
- a word the corpus never uses that is a word it does use with a light affix (切除後,
  治療中, 年齢的, お餅, 下痢気味: LIGHT_PREFIXES, LIGHT_SUFFIXES) is that word: the slot of
  切除; a light affix also read as a word of its own (気味) is then no slot;
- alternatives: the corpus terms that count as finding it, each with a weight lambda <= 1:
  the term itself (1) when the corpus has it, a corpus term it begins (1; MeCab cut the
  question's compound short: 高額療養 -> 高額療養費制度), and the expansions
  (retrieval.expansion: the patient table for every term, Sudachi's synonyms for a term
  the corpus never uses), below 1;
- parts (with config.compound_parts_weight > 0): a compound the corpus never uses whose
  words it does use (胃切除, 再発胃がん) is found where one line says those words next to
  each other (the bigrams where they join, 胃切, in that line too), at that weight; a
  patient table target the guideline never uses whose words it does (胃切除 where it says
  胃を切除) is found where one line says its words, at patient_table_weight times it.
A slot's idf is its term's when the corpus has it, else that of its best alternative,
else the idf of an unseen term (times scoring.UNKNOWN_TERM_WEIGHT). The scoring formula
is in retrieval.scoring.

The character-bigram channel reads the question's content spans: a span whose term the
corpus never uses gives the bigrams of its best alternative instead (the bigrams of
お尻 would only add unmatched mass where the guideline says 血便), or, without one, its
bigrams at the term's specificity.
"""
from __future__ import annotations

import bisect
import functools
from typing import Callable, Sequence

from guiderag.scopes import RetrievalConfig

from .analyzer import AFFIXED, COMPOUND, NOUN, PROPER, SYNONYM, VERB, Analyzer, reading, tokenize
from .bigrams import char_bigrams
from .expansion import PATIENT, READING, SUDACHI, Expansion, PatientTable, SudachiSynonyms, is_content
from .readings import LazyReadings, kana_runs
from .framing import ANSWER_FRAMES
from .specificity import COMMON_ZIPF, RARE_ZIPF, weight_of_zipf, zipf
from .specificity import table as specificity_table
from .tokens import PREFIX, SUFFIX, Term, Token

from .slots import (LIGHT_PREFIXES, LIGHT_SUFFIXES, PARTS_JOIN, SUDACHI_SPAN, UNKNOWN_COMPOUND_WEIGHT,
                    UNKNOWN_VERB_WEIGHT, VERB_WEIGHT, WORD_MAPS_MAX, Parsed, Query, Slot, lookup_forms, parse_query)

__all__ = ["LIGHT_PREFIXES", "LIGHT_SUFFIXES", "PARTS_JOIN", "SUDACHI_SPAN", "UNKNOWN_COMPOUND_WEIGHT",
           "UNKNOWN_VERB_WEIGHT", "VERB_WEIGHT", "Parsed", "Query", "QueryBuilder", "Slot", "lookup_forms",
           "parse_query"]

# single nouns: what an affixed word's meaning rests on (年齢 of 年齢的)
_WORD_KINDS = frozenset({NOUN, PROPER, SYNONYM})
# kinds whose unknown terms are weighed by their specificity in general Japanese
_GENERAL_KINDS = frozenset({NOUN, VERB, AFFIXED, COMPOUND})


class QueryBuilder:
    """Builds Query objects against one index vocabulary."""

    def __init__(self, config: RetrievalConfig, analyzer: Analyzer, vocab: dict[str, int],
                 idf: Callable[[str], float], patient: PatientTable | None,
                 sudachi: SudachiSynonyms | None, parse: Callable[[str], Parsed] | None = None) -> None:
        """`parse`: a question text's (query tokens, analysis), by default the analyzer's
        (the retriever passes its own, which keeps the last questions')."""
        self.config = config
        self.analyzer = analyzer
        self.vocab = vocab
        self.idf = idf
        self.patient = patient
        self.sudachi = sudachi
        self.parse: Callable[[str], Parsed] = parse or functools.partial(parse_query, analyzer)
        self._sorted_terms: list[str] | None = None
        # what MeCab makes of the words of questions (a word's tokens, its terms) and the
        # corpus term a resource's word stands for: maps filled as questions come, so a
        # word is analysed once per process
        self._targets: dict[str, str | None] = {}
        self.readings = LazyReadings(lambda: list(vocab), reading)
        self._word_tokens: dict[str, list[Token]] = {}
        self._word_terms: dict[str, list[Term]] = {}

    def _tokens(self, word: str) -> list[Token]:
        """tokenize(word), remembered (read only)."""
        found = self._word_tokens.get(word)
        if found is None:
            if len(self._word_tokens) > WORD_MAPS_MAX:
                self._word_tokens.clear()
            found = self._word_tokens[word] = tokenize(word)
        return found

    def _terms(self, word: str) -> list[Term]:
        """The analyzer's terms of a word, remembered (read only)."""
        found = self._word_terms.get(word)
        if found is None:
            if len(self._word_terms) > WORD_MAPS_MAX:
                self._word_terms.clear()
            found = self._word_terms[word] = self.analyzer.terms(word)
        return found

    # -- vocabulary helpers ---------------------------------------------------------
    def completion(self, term: str) -> str | None:
        """The shortest corpus term that starts with `term`, a compound the corpus never
        uses: MeCab cut the question's words differently (高額療養費って -> 高額療養 + a
        verb), the corpus has the whole word (高額療養費制度)."""
        if self._sorted_terms is None:
            self._sorted_terms = sorted(self.vocab)
        terms = self._sorted_terms
        i = bisect.bisect_left(terms, term)
        best = None
        for candidate in terms[i : i + 64]:  # a slice: islice would walk from the start
            if not candidate.startswith(term):
                break
            if best is None or len(candidate) < len(best):
                best = candidate
        return best

    def target_term(self, word: str, complete: bool) -> str | None:
        """The corpus term a resource's word stands for: its whole analysis (one word or
        one compound) when the corpus has it, else (with `complete`) a corpus term it begins."""
        key = f"{int(complete)}{word}"
        if key in self._targets:
            return self._targets[key]
        terms = self._terms(word)
        found: str | None = None
        if terms:
            head = terms[0].text
            if head in self.vocab:
                found = head
            elif complete and terms[0].kind in (COMPOUND, AFFIXED, NOUN):
                found = self.completion(head)
        self._targets[key] = found
        return found

    def stem(self, term: Term) -> tuple[str, str] | None:
        """(corpus term, surface) of the word a compound or affixed word the corpus never
        uses is, once its light affixes are taken off (切除後 -> 切除, 抗がん剤治療中 ->
        薬物療法 with the maintainer's synonyms, お餅 -> 餅); None when it has no light affix
        or the rest is no word the corpus uses (御正月 -> 正月, never used: the slot stays)."""
        bare = self.bare(term)
        if bare is None or bare[0] not in self.vocab:
            return None
        return bare

    def affixes(self, term: Term) -> set[str]:
        """The light affixes (as the analyzer's forms) at the ends of a compound or affixed word."""
        tokens = self._tokens(term.surface)
        out: set[str] = set()
        lo, hi = 0, len(tokens)
        while lo < hi and tokens[lo].kind == PREFIX and tokens[lo].form in LIGHT_PREFIXES:
            out.add(tokens[lo].form)
            lo += 1
        while hi > lo and tokens[hi - 1].form in LIGHT_SUFFIXES:
            out.add(tokens[hi - 1].form)
            hi -= 1
        return out

    def bare(self, term: Term) -> tuple[str, str] | None:
        """(term, surface) of a compound or affixed word without its light affixes (御正月 ->
        正月, 下痢気味 -> 下痢), whether or not the corpus uses it; None without one."""
        if term.kind not in (COMPOUND, AFFIXED):
            return None
        tokens = self._tokens(term.surface)
        lo, hi = 0, len(tokens)
        while lo < hi and tokens[lo].kind == PREFIX and tokens[lo].form in LIGHT_PREFIXES:
            lo += 1
        while hi > lo and tokens[hi - 1].form in LIGHT_SUFFIXES:
            hi -= 1
        if hi <= lo or (lo == 0 and hi == len(tokens)):
            return None
        surface = "".join(t.surface for t in tokens[lo:hi])
        terms = self._terms(surface)
        if not terms:
            return None
        return terms[0].text, surface

    def known_words(self, term: Term) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The words of a compound, its light affixes taken off (再発胃がん -> 再発, 胃癌;
        胃切除後 -> 胃, 切除), when the corpus uses every one of them, else (); and the
        character bigrams where they join (胃切)."""
        bare = self.bare(term)
        surface = bare[1] if bare is not None else term.surface
        terms = self._terms(surface)
        if not terms or terms[0].kind != COMPOUND:
            return (), ()
        words: list[str] = []
        joined = ""
        cuts: list[int] = []
        for t in terms[1:]:
            if joined == surface:
                break
            if not surface.startswith(joined + t.surface):
                return (), ()
            if joined:
                cuts.append(len(joined))
            joined += t.surface
            words.append(t.text)
        if joined != surface or len(words) < 2 or not all(w in self.vocab for w in words):
            return (), ()
        junctions = [g for k in cuts for g in char_bigrams([surface[k - 1 : k + 1]])]
        return tuple(dict.fromkeys(words)), tuple(dict.fromkeys(junctions))

    def warm(self) -> None:
        """Read now the tables `build` reads on first use (Sudachi's phrase table, wordfreq's),
        as it would read them: a server's first question then does not wait for them."""
        if self.sudachi is not None and self.config.synonym_dict_weight > 0:
            self.sudachi.phrase_table()
        if self._weighs_specificity:
            specificity_table()

    @property
    def _weighs_specificity(self) -> bool:
        """Whether a word the corpus never uses is weighed by its specificity (wordfreq)."""
        return self.config.specific_min_weight < 1.0

    def specificity(self, term: Term) -> float:
        s = self.config
        if term.kind not in _GENERAL_KINDS or not self._weighs_specificity:
            return 1.0
        return weight_of_zipf(zipf(*lookup_forms(term)), RARE_ZIPF, COMMON_ZIPF,
                              s.specific_min_weight)

    # -- building -----------------------------------------------------------------
    def build(self, texts: Sequence[str], *, known_only: bool = False,
              base: Query | None = None) -> Query:
        """The query of the texts (a question, then keywords). With `known_only`, terms
        with no corpus alternative are left out (keywords from a model may only add)."""
        slots: dict[str, Slot] = {s.term: s for s in base.slots} if base else {}
        bigrams: dict[str, float] = dict(base.bigrams) if base else {}
        expansions: list[Expansion] = list(base.expansions) if base else []
        for text in texts:
            self._add(text, slots, bigrams, expansions, known_only)
        return Query(list(slots.values()), bigrams, expansions)

    def _add(self, text: str, slots: dict[str, Slot], bigrams: dict[str, float],
             expansions: list[Expansion], known_only: bool) -> None:
        s = self.config
        vocab = self.vocab
        tokens, analysis = self.parse(text)
        local: dict[str, Slot] = {}
        stems: dict[str, str] = {}  # surface of a word its stem stands in for -> the stem's surface
        stripped: set[str] = set()  # light affixes taken off such words (気味 of 下痢気味)
        for term in analysis.terms:
            name = term.text
            alternatives: dict[str, float] = {}
            if name in vocab:
                alternatives[name] = 1.0
                w = VERB_WEIGHT if term.kind == VERB else 1.0
                spec = 1.0
            else:
                known = self.completion(name) if term.kind in (COMPOUND, AFFIXED) else None
                if known is not None:
                    # the corpus term it begins stands in for it, as a known noun
                    self._merge(local, Slot(known, 1.0, {known: 1.0}, term.surface, term.kind))
                    continue
                stem = self.stem(term)
                if stem is not None:
                    # the word with a light affix is its word: 切除後 is found where 切除 is
                    self._merge(local, Slot(stem[0], 1.0, {stem[0]: 1.0}, stem[1], NOUN))
                    stems[term.surface] = stem[1]
                    stripped.update(self.affixes(term))
                    continue
                parts: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
                if term.kind == VERB:
                    w = VERB_WEIGHT * UNKNOWN_VERB_WEIGHT
                elif term.kind == COMPOUND:
                    w = UNKNOWN_COMPOUND_WEIGHT
                    if s.compound_parts_weight > 0:
                        parts = self.known_words(term)
                elif term.kind == AFFIXED and any(
                    p.kind in _WORD_KINDS and p.text in vocab and p.text in name for p in analysis.terms
                ):
                    w = UNKNOWN_COMPOUND_WEIGHT  # 年齢的: 年齢 carries it
                else:
                    w = 1.0
                spec = self.specificity(term)
            if name in ANSWER_FRAMES:
                w *= s.frame_word_weight
            slot = Slot(name, w, alternatives, term.surface, term.kind, spec)
            if name not in vocab and parts[0]:
                slot.parts, slot.junctions = parts
                slot.parts_weight = s.compound_parts_weight
            self._merge(local, slot)
        for affix in stripped:
            # a light affix the corpus never uses, also read as a word (気味): no topic
            if affix in local and affix not in vocab and not local[affix].alternatives:
                del local[affix]
        self._expand(tokens, analysis.terms, local, expansions)
        for slot in local.values():
            if slot.term not in vocab:
                slot.weight *= slot.specificity
            if known_only and not slot.alternatives and not slot.parts:
                continue
            self._merge(slots, slot)
        for span in analysis.spans:
            span = stems.get(span, span)
            found = next((x for x in local.values() if x.surface == span or x.term == span), None)
            weight = 1.0
            if found is not None and found.term not in vocab:
                alts = found.alternatives
                if alts:
                    span = max(alts, key=lambda a: (alts[a], self.idf(a)))
                else:
                    if known_only:
                        continue
                    weight = found.specificity
            for gram in char_bigrams([span]):
                if bigrams.get(gram, 0.0) < weight:
                    bigrams[gram] = weight

    @staticmethod
    def _merge(slots: dict[str, Slot], slot: Slot) -> None:
        old = slots.get(slot.term)
        if old is None:
            slots[slot.term] = slot
            return
        old.weight = max(old.weight, slot.weight)
        if slot.parts and slot.parts_weight > old.parts_weight:
            old.parts, old.parts_weight, old.junctions = slot.parts, slot.parts_weight, slot.junctions
        for a, lam in slot.alternatives.items():
            if old.alternatives.get(a, 0.0) < lam:
                old.alternatives[a] = lam

    def _expand(self, tokens: Sequence[Token], terms: list[Term], slots: dict[str, Slot],
                expansions: list[Expansion]) -> None:
        """Alternatives from the patient table (every term) and Sudachi (unknown terms)."""
        s = self.config
        if self.patient is not None and s.patient_table_weight > 0:
            for match in self.patient.matches(tokens):
                surfaces = [tokens[i].surface for i in match.positions]
                source = "".join(t.surface for t in tokens[match.positions[0] : match.positions[-1] + 1])
                covered = [x for x in slots.values()
                           if any(sf in x.surface or x.surface in sf for sf in surfaces if x.surface)]
                own = {tokens[i].form for i in match.positions} | {"".join(tokens[i].form for i in match.positions)}
                found = [self.target_term(t, complete=True) for t in match.targets]
                if not any(found):  # none in this guideline: its words, where they meet
                    for target_word in match.targets:
                        self._target_words(target_word, source, covered, slots, expansions)
                for target in found:
                    if target is None or target in own:
                        continue  # not in this guideline, or the question's own word
                    if not covered:
                        # the phrase's words are no terms (抜ける): the phrase is a slot of its own
                        covered = [Slot(source, VERB_WEIGHT, {}, source, VERB)]
                        slots[source] = covered[0]
                    for x in covered:
                        if x.alternatives.get(target, 0.0) < s.patient_table_weight:
                            x.alternatives[target] = s.patient_table_weight
                    _note(expansions, Expansion(source, target, s.patient_table_weight, PATIENT,
                                                tuple(x.term for x in covered)))
        if self.sudachi is not None and s.synonym_dict_weight > 0:
            self._sudachi(tokens, slots, expansions)
            self._sudachi_phrases(tokens, slots, expansions)
            self._kana_readings(tokens, slots, expansions)

    def _kana_readings(self, tokens: Sequence[Token], slots: dict[str, Slot], expansions: list[Expansion]) -> None:
        """A word typed in kana that the corpus writes in kanji (retrieval.readings): the
        longest stretch of a kana run read as one corpus term becomes an alternative of the
        run's terms the corpus never uses, at synonym_dict_weight."""
        lam = self.config.synonym_dict_weight
        for lo, hi in kana_runs(tokens):
            unknown = [x for x in slots.values() if x.term not in self.vocab and not x.alternatives
                       and any(x.surface == t.surface for t in tokens[lo:hi])]
            if not unknown:
                continue
            readings = self.readings.get()
            i = lo
            while i < hi:
                for j in range(hi, i, -1):
                    kana = "".join(t.surface for t in tokens[i:j])
                    target = readings.term(kana)
                    inside = [x for x in unknown if any(x.surface == t.surface for t in tokens[i:j])]
                    if target is not None and inside:
                        for x in inside:
                            x.alternatives[target] = max(x.alternatives.get(target, 0.0), lam)
                        _note(expansions, Expansion(kana, target, lam, READING, tuple(x.term for x in inside)))
                        i = j - 1
                        break
                i += 1

    def _sudachi_phrases(self, tokens: Sequence[Token], slots: dict[str, Slot], expansions: list[Expansion]) -> None:
        """Sudachi's words written as phrases (次の日 -> 翌日), matched token for token: a
        corpus word of their groups becomes an alternative of the question's terms the
        phrase covers, at synonym_dict_weight, whether or not the corpus knows those terms
        one by one (it knows 次 and 日, not that they say 翌日)."""
        sudachi = self.sudachi
        if sudachi is None:
            return
        lam = self.config.synonym_dict_weight
        table = sudachi.phrase_table()
        for match in table.matches(tokens):
            lo, hi = match.positions[0], match.positions[-1] + 1
            source = "".join(t.surface for t in tokens[lo:hi])
            surfaces = {tokens[i].surface for i in range(lo, hi) if is_content(tokens[i])}
            covered = [x for x in slots.values() if x.surface and (x.surface in surfaces or x.surface == source)]
            if not covered:
                continue
            self._synonyms_of(source, match.targets, {t.form for t in tokens[lo:hi]} | {source}, covered, lam,
                              expansions)

    def _target_words(self, target_word: str, source: str, covered: list[Slot], slots: dict[str, Slot],
                      expansions: list[Expansion]) -> None:
        """A patient table target this guideline never uses as a whole whose words it does
        use (胃切除 where the guideline says 胃の切除): the phrase is found, at
        patient_table_weight * compound_parts_weight, where the words meet (Slot.parts)."""
        s = self.config
        if s.compound_parts_weight <= 0:
            return
        terms = self._terms(target_word)
        # reviewed words: said together on one line, not necessarily next to each other
        words = self.known_words(terms[0])[0] if terms else ()
        if not words:
            return
        lam = s.patient_table_weight * s.compound_parts_weight
        if not covered:
            covered.append(Slot(source, VERB_WEIGHT, {}, source, VERB))
            slots[source] = covered[0]
        for x in covered:
            if x.parts_weight < lam and not (set(words) <= {x.term}):
                x.parts, x.parts_weight, x.junctions = words, lam, ()
        _note(expansions, Expansion(source, PARTS_JOIN.join(words), lam, PATIENT, tuple(x.term for x in covered)))

    def _sudachi(self, tokens: Sequence[Token], slots: dict[str, Slot], expansions: list[Expansion]) -> None:
        """Sudachi's synonyms for the words of the question the corpus never uses: every run
        of up to SUDACHI_SPAN tokens inside a word group (お産 of お産のあと -> 御産後) is
        looked up, by surface and by lemmas; a corpus word of its groups becomes an
        alternative of the unknown terms that contain it."""
        lam = self.config.synonym_dict_weight
        sudachi = self.sudachi
        if sudachi is None:
            return
        known_parts = [x.surface for x in slots.values() if x.alternatives and x.surface]
        unknown = [x for x in slots.values()
                   if x.term not in self.vocab and not x.alternatives and x.kind not in (PROPER, SYNONYM)
                   # a compound whose word the corpus knows is found through that word already
                   and not any(p != x.surface and p in x.surface for p in known_parts)]
        if not unknown:
            return
        # each token read once: whether a span may hold it, whether it is an affix
        wordlike = [is_content(t) or t.kind == PREFIX for t in tokens]
        affix = [t.kind in (PREFIX, SUFFIX) for t in tokens]
        for i in range(len(tokens)):
            surface = form = ""
            affixes_only = True
            # the spans i..j grow by one token: a span fails where its last token does
            for j in range(i + 1, min(len(tokens), i + SUDACHI_SPAN) + 1):
                if not wordlike[j - 1]:
                    break
                surface += tokens[j - 1].surface
                form += tokens[j - 1].form
                affixes_only = affixes_only and affix[j - 1]
                if affixes_only:
                    continue  # an affix alone (病 of 糖尿病) is no word of the question
                words = sudachi.synonyms(surface) or sudachi.synonyms(form)
                if not words:
                    continue
                # the word with its affixes (お産のあと: お + 産 + 後) must be the whole term
                lo, hi = i, j
                while lo > 0 and tokens[lo - 1].kind == PREFIX:
                    lo -= 1
                while hi < len(tokens) and tokens[hi].kind == SUFFIX:
                    hi += 1
                whole = {"".join(t.surface for t in tokens[a:b]) for a in range(lo, i + 1) for b in range(j, hi + 1)}
                holders = [x for x in unknown if x.surface in whole or x.term == surface]
                if not holders:
                    continue
                self._synonyms_of(surface, words, {surface, form}, holders, lam, expansions)

    def _synonyms_of(self, source: str, words: Sequence[str], own: set[str], holders: Sequence[Slot], lam: float,
                     expansions: list[Expansion]) -> None:
        """The corpus words among Sudachi's `words` for `source` (not its own forms) become
        alternatives of the slots holding it, at `lam`."""
        for other in words:
            target = self.target_term(other, complete=False)
            if target is None or target in own:
                continue
            for x in holders:
                if target != x.term and x.alternatives.get(target, 0.0) < lam:
                    x.alternatives[target] = lam
                    _note(expansions, Expansion(source, target, lam, SUDACHI, (x.term,)))


def _note(expansions: list[Expansion], e: Expansion) -> None:
    """Add an expansion unless the same source already reaches the same target."""
    if not any(x.source == e.source and x.target == e.target and x.origin == e.origin for x in expansions):
        expansions.append(e)
