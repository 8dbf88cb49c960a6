"""The answer object of the contract (`ask --json`, the `json` column of `eval`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from guiderag.settings import AUTO_GUIDELINE

if TYPE_CHECKING:
    from guiderag.retrieval.result import RetrievalResult

GOVERNED = "governed"
NOT_GOVERNED = "not_governed"


@dataclass
class ShownPassage:
    """Lines shown to the user from one page version (a contract passage object)."""

    url: str
    title: str
    score: float
    lines: list[int]
    text: str
    version: int
    fetched_at: str
    content_hash: str

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "title": self.title,
            "score": round(float(self.score), 4),
            "lines": list(self.lines),
            "text": self.text,
            "version": self.version,
            "fetched_at": self.fetched_at,
            "content_hash": self.content_hash,
        }


@dataclass
class Answer:
    """One answer. `answer` is exactly what the user is shown as the answer text."""

    question: str
    keywords: list[str]
    mode: str
    coverage: str
    answer: str
    passages: list[ShownPassage]
    retrieval: dict[str, Any]
    audit_id: int | None = None
    summary: str | None = None  # generate mode: the model's text, shown labelled, above the passages
    unsupported_sentences: list[str] = field(default_factory=list)  # generate: content words not in the reference
    escalation: str | None = None  # not governed: where to ask instead
    model: str | None = None
    error: str | None = None  # a model failure that led to a fallback or refusal
    latency_ms: float | None = None
    notes: list[str] = field(default_factory=list)  # for the user, e.g. "your long question was cut"
    # {"id", "title"} of the guideline the answer comes from; None for a refusal when the
    # question was routed automatically and no guideline governs it
    guideline: dict[str, str] | None = None
    routing: dict[str, Any] | None = None  # how the guideline was chosen (chatbot.routing)
    # The retrieval the answer came from (not in the JSON: evaluation scores its reference).
    retrieval_result: RetrievalResult | None = field(default=None, repr=False, compare=False)

    @property
    def governed(self) -> bool:
        return self.coverage == GOVERNED

    def attach_guideline(self, guideline: dict[str, str] | None, routing: dict[str, Any] | None) -> None:
        """Say which guideline answered. A refusal of an automatically routed question names
        none: no guideline governs it (routing still says which one was read)."""
        self.routing = routing
        auto = routing is not None and routing.get("requested") == AUTO_GUIDELINE and routing.get("method") != "only"
        self.guideline = None if (auto and not self.governed) else guideline

    def to_json(self) -> dict[str, Any]:
        """The contract's JSON object (plus additive fields)."""
        return {
            "question": self.question,
            "keywords": list(self.keywords),
            "mode": self.mode,
            "coverage": self.coverage,
            "answer": self.answer,
            "passages": [p.to_json() for p in self.passages],
            "retrieval": dict(self.retrieval),
            "audit_id": self.audit_id,
            "summary": self.summary,
            "unsupported_sentences": list(self.unsupported_sentences),
            "escalation": self.escalation,
            "model": self.model,
            "error": self.error,
            "latency_ms": None if self.latency_ms is None else round(self.latency_ms, 1),
            "notes": list(self.notes),
            "guideline": dict(self.guideline) if self.guideline is not None else None,
            "routing": dict(self.routing) if self.routing is not None else None,
        }
