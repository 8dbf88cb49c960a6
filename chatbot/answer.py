"""The answer object of the contract (`ask --json`, the `json` column of `eval`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from guiderag.guideline import AUTO_GUIDELINE
from guiderag.store.layout import page_link

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
    # A PDF document's lines: the PDF page of the first, every page they are on, and the
    # document's title (the passage's title is its section's). None for an HTML page.
    pdf_page: int | None = None
    pdf_pages: list[int] | None = None
    document_title: str | None = None

    @property
    def link(self) -> str:
        """Where a reader opens the passage: the page, or the PDF at its page (#page=N)."""
        return page_link(self.url, self.pdf_page)

    def to_json(self) -> dict[str, Any]:
        out = {
            "url": self.link,
            "title": self.title,
            "score": round(float(self.score), 4),
            "lines": list(self.lines),
            "text": self.text,
            "version": self.version,
            "fetched_at": self.fetched_at,
            "content_hash": self.content_hash,
        }
        if self.pdf_page is not None:
            out.update(pdf_page=self.pdf_page, pdf_pages=list(self.pdf_pages or [self.pdf_page]),
                       document_title=self.document_title or "")
        return out


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
    # What each model asked did, by role ("keywords", "answer"): outcome, why, what was
    # shown instead, time; {} when no model was asked. See chatbot.bot (MODEL USE).
    model_use: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The raw replies, by role (audit only: never shown, not in the JSON).
    model_replies: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    # {"id", "title"} of the guideline the answer comes from; None for a refusal when the
    # question was routed automatically and no guideline governs it
    guideline: dict[str, str] | None = None
    routing: dict[str, Any] | None = None  # how the guideline was chosen (chatbot.routing)
    # The coverage decision (chatbot.coverage_decision): P(the guideline governs the
    # question), None under the rules before the model; and why, in sentences.
    coverage_probability: float | None = None
    coverage_reasons: list[str] = field(default_factory=list)
    # How a follow-up was read with the conversation's earlier questions (chatbot.conversation):
    # {"completed_question", "from_turns", "carried_terms", "phrase"}; None when nothing was carried
    context: dict[str, Any] | None = None
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
            "model_use": {role: dict(use) for role, use in self.model_use.items()},
            "guideline": dict(self.guideline) if self.guideline is not None else None,
            "routing": dict(self.routing) if self.routing is not None else None,
            "coverage_probability": self.coverage_probability,
            "coverage_reasons": list(self.coverage_reasons),
            "context": dict(self.context) if self.context is not None else None,
        }

    @property
    def fell_back(self) -> bool:
        """True when a model was asked for the answer and extract (or a refusal) stood in."""
        return self.model_use.get("answer", {}).get("outcome") == FELL_BACK


# Outcomes of the answer model (Answer.model_use["answer"]["outcome"]).
ANSWERED = "answered"  # its answer is shown (lines: rebuilt from stored lines; generate: the summary)
DECLINED = "declined"  # it said the reference does not answer: the refusal is shown
FELL_BACK = "fell_back"  # it failed or its reply was unusable: extract (or the refusal) is shown
NOT_ASKED = "not_asked"  # retrieval or the evidence gate refused first: the model was not asked
FAILED = "failed"  # it failed and no fallback was allowed: nothing shown (audit error rows)
# Outcomes of the keywords model.
KEYWORDS_USED = "used"
KEYWORDS_IGNORED = "ignored"  # nothing usable, or less evidence than the question's own words
KEYWORDS_SKIPPED = "skipped"  # the model was busy: the question's own keywords, without waiting
KEYWORDS_FAILED = "failed"
