"""Question workbooks in, results workbooks out."""
from __future__ import annotations

from dataclasses import dataclass, field

IN_SCOPE = "in_scope"
OUT_OF_SCOPE = "out_of_scope"
KINDS = (IN_SCOPE, OUT_OF_SCOPE)


@dataclass
class Question:
    """One evaluation question. `gold_answers` are all accepted answer strings (if known)."""

    id: str
    question: str
    kind: str  # IN_SCOPE | OUT_OF_SCOPE
    reference_answer: str | None = None
    gold_url: str | None = None
    gold_answers: list[str] = field(default_factory=list)
