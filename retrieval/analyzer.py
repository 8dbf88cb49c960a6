"""Japanese text -> index terms, with MeCab (unidic-lite).

Why not the protocol's "nouns, space-joined, sklearn default tokens": that drops
one-character nouns (肺, 癌), deletes EGFR / PD-L1 / 80mg with the non-Japanese filter,
splits compounds (副作用 -> 副 + 作用) and misses full-width text. Here:

- retrieval.normalize first: NFKC (ＥＧＦＲ -> EGFR, full-width digits and brackets), stage
  numerals and counts in kanji as digits (ステージⅣ -> ステージ4, 一回 -> 1回);
- nouns read from each node's UniDic feature string (the same as `parseToNode` gives; unknown
  words carry only 6 fields), printed by one `parse()` call per text (see tokenize);
- a run of nouns with its prefixes and suffixes is rejoined into one compound term
  (副作用, 遺伝子, 胸腺腫, 治療法), and its noun parts are emitted too;
- adjacent ASCII tokens are glued into one lower-cased term (egfr, pd-l1, 5-fu, 80mg);
- common nouns use the UniDic lemma, which unifies spellings (肺がん / 肺癌, がん / ガン / 癌);
  proper nouns keep their surface (the lemma of 東京 is トウキョウ);
- verb and adjective lemmas as a second kind of term;
- a maintainer's synonym groups (retrieval.synonyms) replace any member's token
  sequence by the group's canonical term, at index and at query time.

`analyze(text)` is module-level and picklable (the MeCab tagger is created lazily,
once per process). `Analyzer` is the configured, picklable variant.
"""
from __future__ import annotations

import operator
import os
import re
import threading
from dataclasses import dataclass, field
from typing import cast

import MeCab

from .framing import FRAMING_WORDS, drop_framing
from .normalize import normalize
from .tokens import (
    ADVERBIAL,
    AFFIXED,
    ASCII,
    COMPOUND,
    NOUN,
    NOUN_KINDS,
    OTHER,
    PREFIX,
    PROPER,
    STOP_NOUNS,
    STOP_VERBS,
    SUFFIX,
    SYNONYM,
    VERB,
    Term,
    Token,
    TokenRewrite,
)

# Bumped whenever the terms produced for the same text change: the index fingerprint
# includes it, so an index built by an older analyzer is rebuilt.
ANALYZER_VERSION = "9"

_ASCII_TOKEN = re.compile(r"^[A-Za-z0-9]+$")
_ASCII_JOINER = frozenset("-.+/")

_TAGGER: MeCab.Tagger | None = None
_TAGGER_PID: int | None = None
# A node list lives in the tagger's lattice until its next parse: threads (the app serves
# several sessions) take turns, one whole parse-and-read at a time.
_TAGGER_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked index worker starts with its own tagger and an unheld lock."""
    global _TAGGER, _TAGGER_PID, _LINE_TAGGER, _LINE_TAGGER_PID, _TAGGER_LOCK
    _TAGGER, _TAGGER_PID, _TAGGER_LOCK = None, None, threading.Lock()
    _LINE_TAGGER, _LINE_TAGGER_PID = None, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def tagger() -> MeCab.Tagger:
    """The process's MeCab tagger (unidic-lite), created on first use."""
    global _TAGGER, _TAGGER_PID
    if _TAGGER is None or _TAGGER_PID != os.getpid():
        _TAGGER = MeCab.Tagger()
        _TAGGER_PID = os.getpid()
    return _TAGGER


# One output line per node: the surface with the whitespace before it (%M), a tab and the
# node's features as the dictionary stores them (%H, the same string as node.feature, for
# unknown words too); nothing for BOS and EOS. One parse() call and one split per text
# cost less than walking parseToNode's nodes from Python, attribute by attribute.
_LINE_FORMAT = r'-O "" -F "%M\t%H\n" -U "%M\t%H\n" -B "" -E ""'
_LINE_TAGGER: MeCab.Tagger | None = None
_LINE_TAGGER_PID: int | None = None
# The whitespace MeCab skips besides the space (tab, newline, vertical tab): inside %M it
# would break the output's lines or the surface. (Other control characters are symbol
# nodes of their own, as before.)
_OTHER_SPACE = re.compile(r"[\t\n\x0b]")


def _line_tagger() -> MeCab.Tagger:
    """The process's tagger printing _LINE_FORMAT, created on first use."""
    global _LINE_TAGGER, _LINE_TAGGER_PID
    if _LINE_TAGGER is None or _LINE_TAGGER_PID != os.getpid():
        _LINE_TAGGER = MeCab.Tagger(_LINE_FORMAT)
        _LINE_TAGGER_PID = os.getpid()
    return _LINE_TAGGER


def reading(text: str) -> str:
    """The katakana reading of NFKC `text`, word by word (UniDic's lemma reading, lForm: the
    reading of 症候群 is ショウコウグン); a word without one (unknown) counts as written."""
    with _TAGGER_LOCK:
        out = tagger().parse(normalize(text))
    parts = []
    for line in out.split("\n"):
        if not line or line == "EOS":
            continue
        cols = line.split("\t")
        parts.append(cols[2] if len(cols) > 2 and cols[2] else cols[0])
    return "".join(parts)


def nodes(text: str) -> list[tuple[str, str]]:
    """(surface, features) of every MeCab node of `text`, BOS and EOS too (empty surfaces), as
    the dictionary gives them: what the published protocol reads (retrieval.protocol_text)."""
    out = []
    with _TAGGER_LOCK:
        node = tagger().parseToNode(text)
        while node is not None:
            out.append((node.surface, node.feature))
            node = node.next
    return out


def _lemma(feature: list[str], surface: str) -> str:
    if len(feature) <= 7:
        return surface  # unknown word: 6 fields, no lemma
    lemma = feature[7]
    if not lemma or lemma == "*":
        return surface
    # Loanwords carry their origin: "タグ-tag" -> "タグ".
    dash = lemma.find("-", 1)
    return lemma[:dash] if dash > 0 else lemma


def tokenize(text: str, *, normalized: bool = False) -> list[Token]:
    """MeCab tokens of NFKC-normalised `text`, ASCII runs glued (PD-L1, 5-FU, 80mg)
    (`normalized`: retrieval.normalize has read the text already)."""
    if not normalized:
        text = normalize(text)
    if _OTHER_SPACE.search(text):
        text = _OTHER_SPACE.sub(" ", text)  # the same nodes, one per output line
    cache = _TOKEN_CACHE
    if len(cache) > _TOKEN_CACHE_MAX:
        cache.clear()
    with _TAGGER_LOCK:
        out = _line_tagger().parse(text)
    lines = out.split("\n")
    lines.pop()  # after the last node's newline
    found: list[Token | None] = list(map(cache.get, lines))
    if None in found:
        for i, token in enumerate(found):
            if token is None:
                found[i] = cache[lines[i]] = _line_token(lines[i])
    tokens = cast("list[Token]", found)  # every None was filled in above
    kinds = list(map(_KIND, tokens))
    if _MAYBE_AUX in kinds:
        tokens = _own_verbs(tokens, kinds)
    # glueing is a no-op without ASCII tokens (_own_verbs makes none)
    return _glue_ascii(tokens) if ASCII in kinds else tokens


# A verb UniDic marks 非自立可能 (it can follow another verb as an auxiliary: 飲み続ける,
# 受けてみる, 抜けてくる) is a word of its own after a particle: 治療を続ける, 完全に治す,
# 髪が抜ける, 薬を出す. Its token carries this kind until `_own_verbs` decides.
_MAYBE_AUX = "Vx"
_OWN_AFTER = frozenset({"を", "が", "に", "は", "も", "で", "と", "へ", "から", "まで", "や", "より"})


def _own_verbs(tokens: list[Token], kinds: list[str]) -> list[Token]:
    """Each 非自立可能 verb a VERB after a particle (its own word), unless the particle
    follows a framing word (retrieval.framing: 気をつける), else OTHER (an auxiliary).
    `kinds` are the tokens' kinds; only the places of _MAYBE_AUX are visited."""
    out = list(tokens)
    i = kinds.index(_MAYBE_AUX)
    while True:
        t = out[i]
        before = out[i - 1] if i else None  # decided already when it was one too
        own = (before is not None and before[2] == OTHER and before[0] in _OWN_AFTER
               # 気をつける, 気が済む: a set phrase of a framing word, no topic of its own
               and not (i > 1 and out[i - 2][1] in FRAMING_WORDS))
        out[i] = _new(Token, (t[0], t[1], VERB if own and t[1] not in STOP_VERBS else OTHER, t[3]))
        try:
            i = kinds.index(_MAYBE_AUX, i + 1)
        except ValueError:
            return out


_KIND = operator.itemgetter(2)  # Token.kind
# a Token or a Term from a tuple of its fields, without the named tuple's Python-level __new__
_new = tuple.__new__


def _line_token(line: str) -> Token:
    """The Token of one line of _line_tagger's output: "<spaces><surface>\t<features>"."""
    spaced, _, features = line.partition("\t")
    surface = spaced.lstrip(" ")
    token = _classify(surface, features)
    return token._replace(space_before=True) if len(surface) < len(spaced) else token


# output line (spaces, surface, features) -> Token: a text's words repeat (Zipf),
# classifying each once per process keeps the Python work per MeCab node small.
_TOKEN_CACHE: dict[str, Token] = {}
_TOKEN_CACHE_MAX = 500_000


def _classify(surface: str, features: str) -> Token:
    """The Token of one MeCab node, from its UniDic features (unknown words: 6 fields)."""
    feature = features.split(",", 8)
    pos1 = feature[0]
    pos2 = feature[1] if len(feature) > 1 else "*"
    if surface.isascii() and _ASCII_TOKEN.match(surface):
        return Token(surface, surface.lower(), ASCII)
    if pos1 == "名詞":
        if pos2 == "固有名詞":
            return Token(surface, surface, PROPER)
        form = _lemma(feature, surface)
        if form in STOP_NOUNS or surface in STOP_NOUNS:
            return Token(surface, form, OTHER)
        if len(feature) > 2 and feature[2] == "副詞可能":
            return Token(surface, form, ADVERBIAL)
        return Token(surface, form, NOUN)
    if pos1 == "形状詞" and pos2 != "助動詞語幹":
        # adjectival nouns (温暖, 重要) are content words and head compounds (温暖化)
        return Token(surface, _lemma(feature, surface), NOUN)
    if pos1 == "接頭辞":
        return Token(surface, _lemma(feature, surface), PREFIX)
    if pos1 == "接尾辞":
        return Token(surface, _lemma(feature, surface), SUFFIX)
    if pos1 in ("動詞", "形容詞"):
        form = _lemma(feature, surface)
        if pos2 == "非自立可能":
            # an auxiliary after a verb, a word of its own after a particle (`_own_verbs`);
            # either way its lemma lets a synonym phrase match any conjugation
            # (髪が抜ける / 髪が抜けます / 髪が抜けて)
            return Token(surface, form, _MAYBE_AUX if pos1 == "動詞" else OTHER)
        return Token(surface, form, OTHER if form in STOP_VERBS else VERB)
    return Token(surface, surface, OTHER)


def _glue_ascii(tokens: list[Token]) -> list[Token]:
    """Join ASCII tokens written without spaces, through - . + / (PD-L1, 5-FU, 0.5mg)."""
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.kind != ASCII:
            out.append(tok)
            i += 1
            continue
        surface = tok.surface
        j = i + 1
        while j < len(tokens) and not tokens[j].space_before:
            nxt = tokens[j]
            if nxt.kind == ASCII:
                surface += nxt.surface
                j += 1
            elif (
                nxt.surface in _ASCII_JOINER
                and j + 1 < len(tokens)
                and tokens[j + 1].kind == ASCII
                and not tokens[j + 1].space_before
            ):
                surface += nxt.surface + tokens[j + 1].surface
                j += 2
            else:
                break
        out.append(Token(surface, surface.lower(), ASCII, tok.space_before))
        i = j
    return out


@dataclass
class Analysis:
    """The terms of one text, and the content surfaces the character bigrams come from."""

    terms: list[Term] = field(default_factory=list)
    spans: list[str] = field(default_factory=list)  # surfaces of noun runs, ASCII terms


_RUN_KINDS = frozenset({NOUN, PROPER, PREFIX, SUFFIX, SYNONYM})
_RUN_CACHE: dict[tuple[tuple[Token, ...], bool], tuple[tuple[Term, ...], str]] = {}


def _run_terms(run: tuple[Token, ...], parts: bool) -> tuple[tuple[Term, ...], str]:
    """Terms and surface of a run of nouns and affixes (cached: compounds repeat).

    The run is grouped into words: a noun with the prefixes before it and the suffixes
    after it (副+作用, 遺伝+子); an affix with no noun to attach to counts as a noun (a
    lone 薬 that MeCab read as a suffix). Several words make a compound term; with
    `parts`, the words and the bare nouns inside affixed words (作用 of 副作用) too."""
    key = (run, parts)
    hit = _RUN_CACHE.get(key)
    if hit is not None:
        return hit
    words: list[list[Token]] = []
    current: list[Token] = []
    has_noun = False
    for t in run:
        if t.kind == PREFIX:
            if has_noun:
                words.append(current)
                current, has_noun = [], False
            current.append(t)
        elif t.kind == SUFFIX:
            current.append(t)
        else:
            if has_noun and current[-1].kind != PREFIX:
                words.append(current)
                current = []
            current.append(t)
            has_noun = True
    if current:
        words.append(current)
    surface = "".join(t.surface for t in run)
    word_terms: list[Term] = []
    for w in words:
        kinds = [t.kind for t in w]
        if len(w) == 1 and kinds[0] == SYNONYM:
            kind = SYNONYM
        else:
            kind = PROPER if PROPER in kinds and NOUN not in kinds else NOUN
            if kind == NOUN and len(w) > 1:
                kind = AFFIXED
        word_terms.append(Term("".join(t.form for t in w), "".join(t.surface for t in w), kind))
    out: list[Term] = []
    if len(word_terms) > 1:
        out.append(Term("".join(w.text for w in word_terms), surface, COMPOUND))
        if parts:
            out.extend(word_terms)
    else:
        out.extend(word_terms)
    if parts:
        for w in words:
            if len(w) > 1:
                out.extend(Term(t.form, t.surface, t.kind) for t in w if t.kind in (NOUN, PROPER, SYNONYM))
    if len(_RUN_CACHE) > _TOKEN_CACHE_MAX:
        _RUN_CACHE.clear()
    value = _RUN_CACHE[key] = (tuple(out), surface)
    return value


def analyze_tokens(
    tokens: list[Token], *, parts: bool = True, verbs: bool = True, canonical_spans: bool = False
) -> Analysis:
    """Terms from tokens: compounds (plus their parts), ASCII terms, verb lemmas.

    With `canonical_spans` (questions), a synonym standing alone gives the character
    bigrams of its canonical word, not of what the patient typed: the bigrams of
    「髪が抜ける」 occur nowhere in a guideline that says 脱毛, and would only add
    unmatched mass to the bigram channel."""
    # The index build's hottest loop (every token of every line): fields read by position,
    # Terms made as tuples of their class (Term(...) is a Python call), a one-word run put
    # out here; a longer run goes to _run_terms (cached). A sentinel ends the last run.
    result = Analysis()
    terms = result.terms
    spans = result.spans
    add_term, add_span = terms.append, spans.append
    run: list[Token] = []
    after_stop = False  # the previous token was a stop word (何, 事...)
    for tok in [*tokens, _END]:
        kind = tok[2]
        in_run = kind in _RUN_KINDS
        if run and (tok[3] or not in_run):  # a space or a non-run token ends the run
            if len(run) == 1 and run[0][2] in NOUN_KINDS:  # the common case: one word
                word = run[0]
                add_term(_new(Term, (word[1], word[0], word[2])))
                add_span(word[1] if canonical_spans and word[2] == SYNONYM else word[0])
            else:
                run_terms, surface = _run_terms(tuple(run), parts)
                terms.extend(run_terms)
                add_span(surface)
            run = []
        if in_run:
            if not run and kind == SUFFIX and after_stop:
                continue  # the counter of 何人, 何回 belongs to the question word
            after_stop = False
            run.append(tok)
            continue
        after_stop = kind == OTHER and tok[1] in STOP_NOUNS
        if kind == OTHER:
            continue
        if kind == ASCII:
            add_term(_new(Term, (tok[1], tok[0], ASCII)))
            add_span(tok[1])
        elif kind == ADVERBIAL:
            add_term(_new(Term, (tok[1], tok[0], NOUN)))
            add_span(tok[0])
        elif kind == VERB and verbs:
            add_term(_new(Term, (tok[1], tok[0], VERB)))
    return result


_END = Token("", "", OTHER)  # ends analyze_tokens' last run


@dataclass
class Analyzer:
    """A configured analyzer (synonyms, parts, verbs). Picklable: holds no tagger."""

    synonyms: TokenRewrite | None = None  # a maintainer's synonyms (retrieval.synonyms)
    parts: bool = True
    verbs: bool = True

    def tokens(self, text: str, *, normalized: bool = False) -> list[Token]:
        """The MeCab tokens of `text` with the maintainer's synonyms applied (`normalized`:
        as tokenize's)."""
        tokens = tokenize(text, normalized=normalized)
        if self.synonyms is not None:
            tokens = self.synonyms.apply(tokens)
        return tokens

    def analysis(self, text: str) -> Analysis:
        return analyze_tokens(self.tokens(text), parts=self.parts, verbs=self.verbs)

    def page_analysis(self, text: str) -> tuple[Analysis, list[str] | None]:
        """A page text's index analysis, and its terms as the answer stage compares them
        with a question's (`query_terms`: framing words are no terms there), from one
        MeCab parse (the index build stores both, retrieval.lines). The second is None
        when it holds the same terms as the first (no framing word in the text: most
        lines), so the caller reuses the analysis' terms. `text` is normalized already
        (retrieval.normalize: the build reads the normalized text for more than terms)."""
        tokens = self.tokens(text, normalized=True)
        analysis = analyze_tokens(tokens, parts=self.parts, verbs=self.verbs)
        framed = drop_framing(tokens)
        if framed is tokens or framed == tokens:
            return analysis, None
        return analysis, [t.text for t in analyze_tokens(framed, parts=self.parts, verbs=self.verbs).terms]

    def terms(self, text: str) -> list[Term]:
        return self.analysis(text).terms

    def query_tokens(self, text: str) -> list[Token]:
        """A question's tokens, synonyms applied, question-framing words (retrieval.framing:
        心配, 教えて, いつ頃, うちの父...) turned into non-terms."""
        return drop_framing(self.tokens(text))

    def query_analysis(self, text: str) -> Analysis:
        """The analysis of a question: as `analysis`, without the question-framing words,
        which say nothing about the topic. Never used for pages: the index keeps every word."""
        return self.analysis_of_query_tokens(self.query_tokens(text))

    def analysis_of_query_tokens(self, tokens: list[Token]) -> Analysis:
        """The analysis of `query_tokens`' output."""
        return analyze_tokens(tokens, parts=self.parts, verbs=self.verbs, canonical_spans=True)

    def query_terms(self, text: str) -> list[str]:
        """The term texts of `query_analysis`."""
        return [t.text for t in self.query_analysis(text).terms]

    def __call__(self, text: str) -> list[str]:
        return [t.text for t in self.analysis(text).terms]

    def fingerprint(self) -> str:
        syn = self.synonyms.fingerprint() if self.synonyms is not None else "none"
        return f"analyzer={ANALYZER_VERSION};parts={self.parts};verbs={self.verbs};synonyms={syn}"


_DEFAULT = Analyzer()


def analyze(text: str) -> list[str]:
    """The index terms of `text` (no synonyms). Module-level, so it pickles by name."""
    return _DEFAULT(text)
