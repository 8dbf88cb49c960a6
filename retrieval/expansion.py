"""Patients' words to the guideline's: query-side expansions, weighted below an exact match.

Two resources, both applied to QUESTIONS only (the index keeps the guideline's words):

- the patient table (data/patient_terms.tsv), a small reviewed list of patient
  expressions that no general dictionary joins to the guideline's terms
  (抗がん剤 -> 薬物療法, 髪が抜ける -> 脱毛, 胃を取る -> 胃切除). An expression is matched on
  lemmas, across particles: its content words (nouns, verbs, adjectives; not particles,
  auxiliaries or the honorific お) must appear in the question in order, with at most
  PHRASE_GAP other tokens between two of them and no punctuation (髪が抜ける matches
  髪は抜けますか and 髪が抜けて);
- the Sudachi synonym dictionary (data/sudachi/, Apache 2.0, see its README), a general
  dictionary of Japanese: a question word the corpus never uses reaches the other words
  of its synonym groups that the corpus does use (お金 -> 金, 目やに -> 目脂).

Each expansion names the question's terms it stands for and a corpus term it reaches,
with a weight below 1 (RetrievalConfig.patient_table_weight, .synonym_dict_weight): the
pipeline counts the question's term as found, at that weight, where the corpus term is
(retrieval.scoring). `Expansion.to_json` is what the answer's `retrieval` lists.
"""
from __future__ import annotations

import csv
import hashlib
import io
import threading
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from guiderag.errors import InputError
from guiderag.resources import data_path
from guiderag.scopes import RetrievalConfig

from .analyzer import normalize, tokenize
from .tokens import OTHER, PREFIX, Token

if TYPE_CHECKING:
    from .analyzer import Analyzer

PATIENT_TABLE = "patient_terms.tsv"
SUDACHI_DIR = "sudachi"
SUDACHI_FILE = "synonyms.txt"

# Content words of a patient expression may stand this many tokens apart in a question
# (髪が抜ける / 髪の毛が抜ける; 胃を半分とる), never across punctuation.
PHRASE_GAP = 3

PATIENT, SUDACHI = "patient table", "sudachi synonyms"
# a word typed in kana, read as a corpus term (retrieval.readings)
READING = "kana reading"

# Particles inside a dictionary word that make it a phrase of several MeCab words (次の日).
_PHRASE_PARTICLES = ("の", "が", "を", "に", "と", "で", "へ")


@dataclass(frozen=True)
class Expansion:
    """One question term (or phrase) reaching a corpus term through a resource."""

    source: str  # what the question says (surface)
    target: str  # the corpus term it reaches
    weight: float
    origin: str  # PATIENT, SUDACHI or READING
    terms: tuple[str, ...] = ()  # the question's terms it stands for

    def to_json(self) -> dict:
        return {"source": self.source, "target": self.target, "weight": round(self.weight, 3),
                "origin": self.origin, "terms": list(self.terms)}


def _hiragana_only(text: str) -> bool:
    return all("\u3040" <= ch <= "\u309f" for ch in text)


def _punctuation(tok: Token) -> bool:
    return bool(tok.surface) and all(unicodedata.category(ch)[0] in "PSZ" for ch in tok.surface)


def is_content(tok: Token) -> bool:
    """A word an expression is matched on: not a particle, an auxiliary, お/ご or punctuation.
    (A verb such as 抜ける may be an OTHER token of the analyzer; its lemma has a kanji.)"""
    if tok.kind == PREFIX or _punctuation(tok):
        return False
    if tok.kind != OTHER:
        return True
    return not _hiragana_only(tok.form)


@dataclass(frozen=True)
class PhraseMatch:
    """Where an expression matched: the token positions of its content words."""

    positions: tuple[int, ...]
    targets: tuple[str, ...]
    source: str


@dataclass
class PatientTable:
    """Patient expressions -> guideline terms; matched on lemmas across particles."""

    # first content form -> [(content forms, targets, expression)], longest first
    starts: dict[str, list[tuple[tuple[str, ...], tuple[str, ...], str]]] = field(default_factory=dict)
    digest: str = "empty"
    entries: int = 0
    # how many tokens may stand between two words of an expression; exact: every token of
    # the expression, particles included, in a row (a dictionary's phrase 次の日 is no
    # match for 次の診察日)
    gap: int = PHRASE_GAP
    exact: bool = False

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[str, Sequence[str]]], tokens_of: Callable[[str], list[Token]],
                  digest: str = "", *, exact: bool = False) -> "PatientTable":
        table = cls(digest=digest or "rows:" + hashlib.sha256(repr(rows).encode()).hexdigest()[:16],
                    entries=len(rows), gap=0 if exact else PHRASE_GAP, exact=exact)
        for expression, targets in rows:
            forms = tuple(t.form for t in tokens_of(expression) if exact or is_content(t))
            if not forms:
                continue
            table.starts.setdefault(forms[0], []).append(
                (forms, tuple(normalize(t).strip() for t in targets), expression))
        for entries in table.starts.values():
            entries.sort(key=lambda e: -len(e[0]))
        return table

    def merge(self, other: "PatientTable") -> None:
        """Add the other table's patterns (the same rows read another way) not already here."""
        for start, entries in other.starts.items():
            mine = self.starts.setdefault(start, [])
            for entry in entries:
                if not any(e[0] == entry[0] and e[1] == entry[1] for e in mine):
                    mine.append(entry)
            mine.sort(key=lambda e: -len(e[0]))

    def matches(self, tokens: Sequence[Token]) -> list[PhraseMatch]:
        """Every expression found in the tokens (longest first at each start), but not one
        said as what is NOT done (お腹を切らずに, 胸を取らないで: the other treatment)."""
        out: list[PhraseMatch] = []
        for i, tok in enumerate(tokens):
            for forms, targets, expression in self.starts.get(tok.form, ()):
                positions = _match_from(tokens, i, forms, self.gap)
                if positions is not None and not _without(tokens, positions[-1] + 1):
                    out.append(PhraseMatch(positions, targets, expression))
                    break
        return out


def _without(tokens: Sequence[Token], at: int) -> bool:
    """Tokens from `at` say "without doing it": 〜ず(に), 〜ないで, 〜なくて. (A plain 〜ない
    stays a match: 髪が抜けないようにするには still asks about 脱毛.)"""
    if at >= len(tokens):
        return False
    form = tokens[at].form
    if form == "ず":
        return True
    following = tokens[at + 1].form if at + 1 < len(tokens) else ""
    return (form == "ない" and following == "で") or (form == "なく" and following == "て")


def _match_from(tokens: Sequence[Token], start: int, forms: tuple[str, ...],
                gap: int = PHRASE_GAP) -> tuple[int, ...] | None:
    positions = [start]
    j = start
    for form in forms[1:]:
        found = None
        for k in range(j + 1, min(len(tokens), j + 2 + gap)):
            if tokens[k].form == form:
                found = k
                break
            if _punctuation(tokens[k]):
                break
        if found is None:
            return None
        positions.append(found)
        j = found
    return tuple(positions)


def parse_patient_table(text: str, source: str = PATIENT_TABLE) -> list[tuple[str, list[str]]]:
    """Rows of the table's text: an expression, a TAB, one or more guideline terms (TABs)."""
    rows: list[tuple[str, list[str]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("#") or not line.strip():
            continue
        cells = [c.strip() for c in line.split("\t") if c.strip()]
        if len(cells) < 2:
            raise InputError(f"{source} line {number}: a patient expression needs at least one guideline "
                             f"term after a TAB (got {line.strip()!r}); fix or comment out the line")
        rows.append((cells[0], cells[1:]))
    return rows


def read_patient_table(path: Path) -> tuple[list[tuple[str, list[str]]], str]:
    """The rows of a patient table file and its digest."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError(f"patient table {path} does not exist: fix GUIDERAG_PATIENT_TABLE "
                         "or reinstall guiderag") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"patient table {path} is not UTF-8: save it as UTF-8") from exc
    return parse_patient_table(text, str(path)), "sha256:" + hashlib.sha256(raw).hexdigest()[:16]


class SudachiSynonyms:
    """Sudachi's synonym groups: word -> the other words of its groups (format: the README
    beside the file; field 0 the group, field 2 the expansion flag, field 8 the word)."""

    def __init__(self, groups: dict[str, list[tuple[str, int]]]) -> None:
        self._groups = groups
        self._phrases: PatientTable | None = None
        self._by_word: dict[str, list[str]] = {}
        for gid, members in groups.items():
            for word, flag in members:
                if flag == 0:  # 1: reached from the others, never a trigger; 2: never used
                    self._by_word.setdefault(word, []).append(gid)

    @classmethod
    def parse(cls, text: str) -> "SudachiSynonyms":
        groups: dict[str, list[tuple[str, int]]] = {}
        for row in csv.reader(io.StringIO(text)):
            if len(row) < 9 or not row[0].strip():
                continue
            flag = int(row[2]) if row[2].strip().isascii() and row[2].strip().isdigit() else 0
            if flag == 2:
                continue
            word = normalize(row[8]).strip()
            if word:
                groups.setdefault(row[0], []).append((word, flag))
        return cls(groups)

    def synonyms(self, word: str) -> list[str]:
        """The other words of every group `word` triggers, in the file's order."""
        out: list[str] = []
        for gid in self._by_word.get(word, ()):
            for other, _ in self._groups[gid]:
                if other != word and other not in out:
                    out.append(other)
        return out

    def __len__(self) -> int:
        return len(self._groups)

    def phrase_rows(self) -> list[tuple[str, list[str]]]:
        """(phrase, its synonyms) for every trigger word written with a particle (次の日,
        手のひら): MeCab reads it as several words the corpus may know one by one, so it is
        matched as a phrase, not looked up as an unknown word."""
        rows = []
        for word, gids in self._by_word.items():
            if len(word) >= 3 and any(p in word[1:-1] for p in _PHRASE_PARTICLES):
                rows.append((word, self.synonyms(word)))
        return [r for r in rows if r[1]]

    def phrase_table(self) -> PatientTable:
        """The phrases of phrase_rows as an exact phrase table, made once: read as questions
        are tokenised (retrieval.analyzer.tokenize, which no analyzer setting changes)."""
        table = self._phrases
        if table is None:
            with _SUDACHI_LOCK:
                if self._phrases is None:
                    # a phrase MeCab reads as one word (ちがい -> 違い) is a word: looked up as one
                    rows = [r for r in self.phrase_rows() if len(tokenize(r[0])) >= 2]
                    self._phrases = PatientTable.from_rows(rows, tokenize, "sudachi-phrases", exact=True)
                table = self._phrases
        return table


_SUDACHI: dict[Path, SudachiSynonyms] = {}
_SUDACHI_LOCK = threading.Lock()


def load_sudachi(path: Path) -> SudachiSynonyms:
    """The dictionary of a synonyms.txt file, parsed once per process."""
    with _SUDACHI_LOCK:
        hit = _SUDACHI.get(path)
        if hit is None:
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError as exc:
                raise InputError(f"the Sudachi synonym dictionary {path} is missing: reinstall guiderag") from exc
            hit = _SUDACHI[path] = SudachiSynonyms.parse(text)
        return hit


_PATIENT: dict[tuple[Path, str], PatientTable] = {}


def patient_table_path(config: RetrievalConfig) -> Path:
    """config.patient_table, else the bundled data/patient_terms.tsv."""
    return Path(config.patient_table) if config.patient_table is not None else data_path(PATIENT_TABLE)


def load_patient_table(config: RetrievalConfig, analyzer: "Analyzer") -> PatientTable | None:
    """The patient table the config asks for (None when its weight is 0), read once per
    process and analyzer: expressions are tokenised as questions are, synonyms applied."""
    if config.patient_table_weight <= 0:
        return None
    path = patient_table_path(config)
    rows, digest = read_patient_table(path)
    key = (path, digest + analyzer.fingerprint())
    table = _PATIENT.get(key)
    if table is None:
        first, *others = readings(analyzer)
        table = PatientTable.from_rows(rows, first, digest)
        for reading in others:
            table.merge(PatientTable.from_rows(rows, reading, digest))
        _PATIENT[key] = table
    return table


def readings(analyzer: "Analyzer") -> list[Callable[[str], list[Token]]]:
    """The ways a patient expression is tokenised to be matched: as written, and as the
    maintainer's synonyms join it. A question's tokens are joined only where it says a
    synonym's exact words (髪が抜ける is one token, 脱毛; 髪は抜けますか stays 髪 + 抜ける),
    so an expression that is also a synonym must match in both readings."""
    synonyms = analyzer.synonyms
    if synonyms is None:
        return [tokenize]
    return [tokenize, lambda text: synonyms.apply(tokenize(text))]


def load_synonym_dict(config: RetrievalConfig) -> SudachiSynonyms | None:
    """The bundled Sudachi synonym dictionary, or None when config.synonym_dict_weight is 0."""
    if config.synonym_dict_weight <= 0:
        return None
    return load_sudachi(data_path(SUDACHI_DIR, SUDACHI_FILE))
