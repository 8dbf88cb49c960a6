"""What one ask did, for its Answer and its audit row: the retrieval and keywords it used,
each model call's raw reply and timings, and what each model did (Answer.model_use).

MODEL USE: `Answer.model_use[role]` (role "keywords" or "answer") says what each model
asked did: `outcome` (keywords: used | ignored | skipped | failed; answer: answered | declined |
fell_back | not_asked | failed), `reason` when it was not simply used, `shown` (what the
patient saw: lines | generate | extract | refusal), `failure` (call | reply) and `code`
(the check a reply failed), timings in ms, and for lines the lines picked and shown.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from guiderag.errors import ModelError
from guiderag.retrieval.result import RetrievalResult
from guiderag.scopes import MODEL_MODES

from . import generate as gen
from .answer import NOT_ASKED
from .coverage_decision import CoverageVerdict
from .llm import Completion, LLMClient, Progress


@dataclass
class AskRecord:
    """One ask's trace, filled in as it goes (one thread)."""

    llm: LLMClient
    progress: Progress | None = None
    keywords: list[str] = field(default_factory=list)
    result: RetrievalResult | None = None
    keywords_model: str | None = None
    # the model's keywords, when the answer's retrieval used them (they may only raise the
    # coverage model's P), and the coverage model's verdict on that retrieval
    model_keywords: list[str] = field(default_factory=list)
    coverage: CoverageVerdict | None = None
    model_use: dict[str, dict[str, Any]] = field(default_factory=dict)
    replies: dict[str, str] = field(default_factory=dict)  # raw, by role: audit only
    timing: dict[str, dict[str, Any]] = field(default_factory=dict)

    def searched(self, result: RetrievalResult) -> None:
        """The retrieval the answer comes from."""
        self.result = result
        self.keywords = list(result.keywords)

    def call(
        self, role: str, system: str, user: str, *, max_tokens: int,
        stop_when: Callable[[str], str | None] | None = None, queue_timeout_s: float | None = None,
    ) -> Completion:
        """One model call for a role, its progress reported and its raw reply kept for the audit."""
        progress = self.progress
        stage = "keywords" if role == "keywords" else "answering"

        def report(what: str, chars: int) -> None:
            if progress is not None:
                progress("queued" if what == "queued" else stage, chars)

        report(stage, 0)
        completion = self.llm.chat(
            system, user, role=role, temperature=gen.TEMPERATURE, max_tokens=max_tokens, n=gen.N,
            progress=report, stop_when=stop_when, queue_timeout_s=queue_timeout_s,
        )
        self.replies[role] = completion.text
        self.timing[role] = {
            "ms": round(completion.seconds * 1000.0, 1),
            "queued_ms": round(completion.queued_s * 1000.0, 1),
            "finish_reason": completion.finish_reason,
            **({"stopped_reading": completion.stopped} if completion.stopped else {}),
        }
        return completion

    def use(self, role: str, outcome: str, **fields: Any) -> None:
        """Record what the model of a role did (Answer.model_use)."""
        use = {"model": self.llm.model_for(role), "outcome": outcome}
        use.update(self.timing.get(role, {}))
        use.update(fields)
        self.model_use[role] = use

    def not_asked(self, mode: str, why: str) -> None:
        """The answer model of a model mode was not asked: the question was refused first."""
        if mode in MODEL_MODES:
            self.use("answer", NOT_ASKED, shown="refusal", reason=why)

    def use_failed(self, exc: ModelError, outcome: str, mode: str, shown: str | None = None) -> None:
        """A failed answer call (or no answer model configured): `outcome` is fell_back, or
        failed when nothing is shown."""
        if mode in MODEL_MODES:
            fields: dict[str, Any] = {"failure": "call", "reason": str(exc)}
            if shown is not None:
                fields["shown"] = shown
            self.use("answer", outcome, **fields)
