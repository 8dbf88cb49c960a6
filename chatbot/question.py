"""Cleaning and checking the user's question before anything else sees it.

- Terminal escape sequences, control and invisible format characters (NUL, zero-width
  and bidi marks) are removed; tabs and line breaks become spaces; runs of spaces collapse.
- Nothing is left (empty, whitespace or control characters only): QuestionError.
- Longer than AnswerConfig.max_question_chars: the question is CAPPED, not refused, and the
  answer carries a note saying so (AnswerConfig.question_capped_message). Refusing would make
  a patient retype a long story; answering the first part, and saying so, is kinder.
- HTML, markdown and any other text stay as plain text: they are never rendered, only
  matched against the guideline, so they need no escaping here.
The original wording is kept otherwise (no NFKC here: the audit shows what was asked;
retrieval normalises for matching).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from guiderag.errors import QuestionError
from guiderag.scopes import AnswerConfig

# Terminal escape sequences (colour codes pasted from a terminal): removed whole, so that
# "[31m" is not left behind when the ESC character goes.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_SPACES = {"\t", "\n", "\r", "\v", "\f", "\u2028", "\u2029", "\x85"}


@dataclass(frozen=True)
class CleanQuestion:
    """The question as it will be answered, and notes for the user about changes made."""

    text: str
    original_chars: int
    capped: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)


def clean_question(raw: object, config: AnswerConfig) -> CleanQuestion:
    """Validate and clean a question; raise QuestionError when nothing answerable is left."""
    if raw is None:
        raise QuestionError("no question given: ask a question in words")
    if not isinstance(raw, str):
        raise QuestionError(f"the question must be text, not {type(raw).__name__}")
    chars = []
    for ch in _ANSI.sub("", raw):
        if ch in _SPACES:
            chars.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co") and ch != " ":
            continue  # control, format (zero-width, bidi), surrogate, private use
        else:
            chars.append(ch)
    text = " ".join("".join(chars).split())
    if not text:
        if raw.strip():
            raise QuestionError("the question holds only control or invisible characters: ask in words")
        raise QuestionError("the question is empty: ask a question in words")
    limit = config.max_question_chars
    if limit > 0 and len(text) > limit:
        capped = text[:limit].rstrip()
        note = config.question_capped_message.format(limit=limit, chars=len(text))
        return CleanQuestion(capped, len(raw), capped=True, notes=(note,))
    return CleanQuestion(text, len(raw))
