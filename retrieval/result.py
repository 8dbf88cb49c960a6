"""What retrieval hands to the answer stage: candidates, passages and the reference.

The reference is a list of passages; a passage is a run of whole lines of one stored
page version, so every line shown later can be cited by (url, version, line number).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, NamedTuple, Sequence

from guiderag.store import PageVersion
from guiderag.store.layout import pdf_citation

# The evidence gate's view of one query (retrieval.query): (mass, {corpus term: lambda}) per
# slot; a line finds a slot at the best lambda of the alternatives it holds.
Slots = Sequence[tuple[float, Mapping[str, float]]]


class Candidate(NamedTuple):
    """A page whose score cleared the threshold. `row` is its place in the retriever's pages:
    one PDF document is several units (a section each) that share its url. (A named tuple:
    a search lists up to max_candidates of them, made several times faster than a frozen
    dataclass's; as immutable.)"""

    url: str
    title: str
    score: float
    row: int | None = None


@dataclass(frozen=True)
class Passage:
    """Whole lines (numbered from 1) of one page version, in page order, with a score."""

    page: PageVersion
    lines: tuple[int, ...]
    score: float

    @property
    def texts(self) -> list[str]:
        return [self.page.line(n) for n in self.lines]

    @property
    def text(self) -> str:
        return "\n".join(self.texts)

    def to_json(self) -> dict:
        """The contract's passage object (a PDF's: its url ends in #page=N, with pdf_page
        and pdf_pages)."""
        out = {
            "url": self.page.url,
            "title": self.page.title,
            "score": round(float(self.score), 4),
            "lines": list(self.lines),
            "text": self.text,
            "version": self.page.version,
            "fetched_at": self.page.fetched_at,
            "content_hash": self.page.content_hash,
        }
        if self.page.pdf is not None:
            out.update(pdf_citation(self.page.url, self.page.pdf, self.lines))
        return out


@dataclass
class RetrievalResult:
    """The outcome of one search. `passages` is the reference, in the order it is read."""

    question: str
    keywords: list[str]
    query_terms: list[str]
    candidates: list[Candidate]
    passages: list[Passage]
    threshold: float
    top_score: float
    pipeline: str
    corpus_version: str = ""
    notes: list[str] = field(default_factory=list)  # e.g. "question has no nouns"
    # protocol pipeline only: its literal reference (pages joined, whitespace collapsed,
    # cut at reference_chars even mid-sentence); `passages` holds the whole lines inside it.
    literal_reference: str | None = None
    # query terms (and keywords) that occur nowhere in the corpus: a gap signal
    unknown_terms: list[str] = field(default_factory=list)
    # pages that cleared the threshold, when more than the `candidates` listed
    candidates_total: int | None = None
    # query expansions that reached a corpus term (retrieval.expansion): what fired
    expansions: list[dict] = field(default_factory=list)
    # the query's slots as the search built them (Retriever.query_slots of the question and
    # these keywords; None: not kept), so the answer stage does not build them again
    slots: list[Slots] | None = field(default=None, repr=False, compare=False)
    # whether a passage cleared the threshold; False when `passages` are those over the
    # reference floor instead (settings.reference_floor); None: passages means cleared
    cleared: bool | None = None
    # terms of earlier questions the question was searched with (a follow-up, completed:
    # chatbot.conversation); the evidence gate and extract read the question with them
    context: list[str] = field(default_factory=list)

    @property
    def governed(self) -> bool:
        """True when something in the corpus cleared the threshold (the coverage model may
        still answer from the passages over the reference floor, chatbot.coverage_decision)."""
        return bool(self.passages) if self.cleared is None else self.cleared

    @property
    def reference_text(self) -> str:
        return "\n".join(p.text for p in self.passages)

    @property
    def reference_chars(self) -> int:
        """len(reference_text), counted without joining it: the lines' lengths and the
        newlines between them."""
        chars = sum(len(p.page.line(n)) for p in self.passages for n in p.lines)
        return chars + sum(max(0, len(p.lines) - 1) for p in self.passages) + max(0, len(self.passages) - 1)

    @property
    def model_reference(self) -> str:
        """The reference as a model reads it (generate mode): the protocol's literal
        reference as published, else the whole lines of the passages."""
        return self.literal_reference or self.reference_text

    def to_json(self) -> dict:
        """The contract's `retrieval` object."""
        return {
            "threshold": self.threshold,
            "candidates": len(self.candidates),
            "top_score": round(float(self.top_score), 4),
            "reference_chars": self.reference_chars,
            "pipeline": self.pipeline,
            "corpus_version": self.corpus_version,
            "candidates_total": len(self.candidates) if self.candidates_total is None else self.candidates_total,
            "notes": list(self.notes),
            "unknown_terms": list(self.unknown_terms),
            "expansions": [dict(e) for e in self.expansions],
            "threshold_cleared": self.governed,
            **({"context_terms": list(self.context)} if self.context else {}),
            "candidate_pages": [
                {"url": c.url, "title": c.title, "score": round(float(c.score), 4)}
                for c in self.candidates
            ],
        }
