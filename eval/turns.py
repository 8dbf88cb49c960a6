"""The turns of conversations in a question workbook (eval.workbook): checked, and each
given the questions of its conversation's earlier turns as its history."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Protocol, Sequence, TypeVar, cast

from guiderag.errors import WorkbookError


class _Turn(Protocol):
    question: str
    conversation: str | None
    turn: int | None
    history: tuple[str, ...]


Q = TypeVar("Q", bound=_Turn)


def check_turn(path: Path, row: int, conversation: str, turn: str,
          turns: dict[tuple[str, int], int]) -> tuple[str | None, int | None]:
    """(conversation, turn number) of a row, checked; (None, None) for a question alone."""
    if not conversation and not turn:
        return None, None
    if not conversation:
        raise WorkbookError(f"{path}: row {row} has a turn but no conversation: fill in its conversation "
                            "or clear the turn")
    if not turn.isdigit() or int(turn) < 1:
        raise WorkbookError(f"{path}: row {row}: turn must be a whole number from 1, not {turn!r}")
    key = (conversation, int(turn))
    if key in turns:
        raise WorkbookError(f"{path}: row {row}: turn {turn} of conversation {conversation!r} is already "
                            f"row {turns[key]}")
    turns[key] = row
    return conversation, int(turn)


def with_histories(questions: Sequence[Q]) -> list[Q]:
    """The questions, each turn of a conversation given the questions of the conversation's
    earlier turns (by turn number) as its history; a question alone keeps none."""
    by_conversation: dict[str, list[Q]] = {}
    for q in questions:
        if q.conversation is not None:
            by_conversation.setdefault(q.conversation, []).append(q)
    out = []
    for q in questions:
        if q.conversation is None or q.turn is None:
            out.append(q)
            continue
        earlier = sorted((e for e in by_conversation[q.conversation] if e.turn is not None and e.turn < q.turn),
                         key=lambda e: e.turn or 0)
        out.append(cast(Q, dataclasses.replace(cast(Any, q), history=tuple(e.question for e in earlier))))
    return out
