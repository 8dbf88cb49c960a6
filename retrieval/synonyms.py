"""A maintainer's synonym list: patient words <-> guideline words, brand <-> generic names.

File format (UTF-8): `#` starts a comment; each other non-blank line is one group of
equivalent terms separated by TABs, the first being the canonical (guideline) word.

Every member is tokenised with the same analyzer as the text; wherever a member's token
sequence appears (also inside a longer compound), it is replaced by one token whose form
is the canonical word. So 抗がん剤 in a question and 薬物療法 in the guideline both
become the term 薬物療法, at index time and at query time.
"""
from __future__ import annotations

import hashlib
import itertools
import operator
from dataclasses import dataclass, field
from pathlib import Path

from guiderag.errors import InputError
from guiderag.resources import SYNONYMS_FILE, data_path
from guiderag.scopes import RetrievalConfig

from .analyzer import normalize, tokenize
from .tokens import SYNONYM, Token

_FORM = operator.attrgetter("form")


@dataclass
class SynonymTable:
    """Token-sequence -> canonical form, matched longest first. Picklable."""

    # first form of a member -> list of (forms of the member, canonical form), longest first
    starts: dict[str, list[tuple[tuple[str, ...], str]]] = field(default_factory=dict)
    digest: str = "empty"
    groups: int = 0

    @classmethod
    def from_groups(cls, groups: list[list[str]], digest: str = "") -> "SynonymTable":
        table = cls(digest=digest or _digest_groups(groups), groups=len(groups))
        for group in groups:
            canonical = normalize(group[0]).strip()
            for member in group:
                forms = tuple(t.form for t in tokenize(member) if t.form.strip())
                if not forms:
                    continue
                table.starts.setdefault(forms[0], []).append((forms, canonical))
        for entries in table.starts.values():
            entries.sort(key=lambda e: -len(e[0]))
        return table

    def apply(self, tokens: list[Token]) -> list[Token]:
        """Replace every member's token sequence by one SYNONYM token (longest match)."""
        starts = self.starts
        if not starts:
            return tokens
        forms = tuple(map(_FORM, tokens))
        if starts.keys().isdisjoint(forms):  # most texts hold no member at all
            return tokens
        # most texts hold few members: only the positions where one may start are visited
        candidates = list(itertools.compress(itertools.count(), map(starts.__contains__, forms)))
        out: list[Token] = []
        done = 0  # tokens before this index are in `out`
        for i in candidates:
            if i < done:
                continue  # inside a member just replaced
            for member, canonical in starts[forms[i]]:  # longest first
                k = len(member)
                if forms[i : i + k] == member:
                    out.extend(tokens[done:i])
                    surface = "".join(t.surface for t in tokens[i : i + k])
                    out.append(Token(surface, canonical, SYNONYM, tokens[i].space_before))
                    done = i + k
                    break
        if not done:
            return tokens
        out.extend(tokens[done:])
        return out

    def fingerprint(self) -> str:
        return self.digest


def _digest_groups(groups: list[list[str]]) -> str:
    text = "\n".join("\t".join(g) for g in groups)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def parse_synonyms(text: str, source: str = "<synonyms>") -> list[list[str]]:
    """Groups of a synonym file's text; a line with fewer than two terms is an error."""
    groups: list[list[str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0] if line.lstrip().startswith("#") else line
        if not line.strip():
            continue
        terms = [t.strip() for t in line.split("\t") if t.strip()]
        if len(terms) < 2:
            raise InputError(
                f"{source} line {number}: a synonym group needs at least two terms separated "
                f"by TABs (got {line.strip()!r}); fix or comment out the line"
            )
        groups.append(terms)
    return groups


def load_synonyms(path: Path | None) -> SynonymTable | None:
    """The table of a TSV file, or None when there is none."""
    if path is None:
        return None
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError as exc:
        raise InputError(f"synonym file {path} does not exist: fix GUIDERAG_SYNONYMS") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"synonym file {path} is not UTF-8: save it as UTF-8") from exc
    groups = parse_synonyms(text, str(path))
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()[:16]
    return SynonymTable.from_groups(groups, digest)


def synonyms_path(config: RetrievalConfig) -> Path | None:
    """config.synonyms, else the bundled data/synonyms.tsv.

    The bundled table is package data: missing, guiderag is damaged (the analyzer, and
    every answer, would silently differ), so that is an error, not "no synonyms"."""
    if config.synonyms is not None:
        return Path(config.synonyms)
    bundled = data_path(SYNONYMS_FILE)
    if not bundled.is_file():
        raise InputError(f"the bundled synonym table {bundled} is missing: reinstall guiderag "
                         "(pip install --force-reinstall guiderag)")
    return bundled
