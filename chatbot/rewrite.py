"""The rewrite call: with a keywords model, a follow-up rewritten as a question of its own.

Offline, chatbot.conversation completes a follow-up with the topic terms of the earlier
questions. With a keywords model configured (the model that reads questions), one more
call asks it for the follow-up rewritten with what it leans on (「入院はどれくらい？」 ->
「胃がんの手術では、入院はどれくらいですか？」). Like the model's keywords, the rewrite may
only add evidence: the guideline's topic terms of its reply (retrieval.topic) that the
question as read lacks are added to the keywords, which a passage keeps only where they
raise its score, and which are dropped when they leave a question refused that its own
reading answers (chatbot.bot). Its text is never shown, and the answer is still read
and judged as the offline reading decided (the gate, and the follow-up's own words on the
answering page). What it did is `Answer.model_use["rewrite"]`: outcome used | ignored |
skipped | failed, the completed question, the terms it added; its raw reply is kept in
the audit row only.

A question a topic-switch marker opens is not rewritten (it was read on its own). The
earlier questions reach this call and no other: a history full of instructions can change
which known guideline terms are searched for, never the text shown.
"""
from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any, Sequence

from guiderag.errors import ModelBusyError, ModelError

from .answer import KEYWORDS_FAILED, KEYWORDS_IGNORED, KEYWORDS_SKIPPED, KEYWORDS_USED
from .conversation import TOPIC_TERMS, Reading
from .llm import LLMClient

if TYPE_CHECKING:
    from guiderag.retrieval import Retriever

    from .record import AskRecord

ROLE = "rewrite"  # its name in Answer.model_use (the call itself is the keywords model's)
REWRITE_MAX_TOKENS = 96
REWRITE_SYSTEM_PROMPT = (
    "あなたは患者さんとのチャットの記録係です。会話の最後の質問は、前の質問の話題を省略していることがあります。"
    "前の質問を踏まえて、最後の質問を、それだけで意味が通じる一つの質問に書き直してください。"
    "話題が変わっている場合は、最後の質問をそのまま書いてください。答えや説明は書かず、書き直した質問だけを一行で答えてください。"
)
_LABEL = re.compile(r"^\s*(?:書き直した質問|質問|回答|答え|rewrite|question)\s*[:：]\s*", re.I)
_QUOTES = "「」『』\"'“”"


def rewrite_prompt(history: Sequence[str], question: str) -> tuple[str, str]:
    """(system, user) messages: the earlier questions, numbered, then the last one."""
    earlier = "\n".join(f"{i}. {q}" for i, q in enumerate(history, start=1))
    return REWRITE_SYSTEM_PROMPT, f"前の質問:\n{earlier}\n\n最後の質問:\n{question}"


def parse_rewrite(reply: str, question: str, limit: int) -> str | None:
    """The rewritten question: the reply's first non-empty line without a label or quotes;
    None when there is none, it is the question unchanged, or longer than `limit`."""
    for line in (reply or "").splitlines():
        text = _LABEL.sub("", line).strip().strip(_QUOTES).strip()
        if text:
            return None if text == question.strip() or len(text) > limit else text
    return None


def rewrite_terms(llm: LLMClient, retriever: Retriever, reading: Reading, record: AskRecord,
                  keywords: list[str] | None, queue_timeout_s: float, limit: int) -> list[str] | None:
    """The keywords with the rewrite's new topic terms added (None stays None when it adds
    nothing: offline keywords), and `record.model_use["rewrite"]` saying what happened."""
    system, user = rewrite_prompt(reading.history, reading.text)
    use: dict[str, Any] = {"model": llm.model_for("keywords")}
    started = time.monotonic()
    try:
        completion = llm.chat(system, user, role="keywords", temperature=0.0, max_tokens=REWRITE_MAX_TOKENS,
                              n=1, queue_timeout_s=queue_timeout_s)
    except ModelError as exc:  # optional, like keywords: the offline reading stands
        busy = isinstance(exc, ModelBusyError)
        use.update(outcome=KEYWORDS_SKIPPED if busy else KEYWORDS_FAILED,
                   reason=f"{exc}; the offline reading stands", **({} if busy else {"failure": "call"}))
        record.model_use[ROLE] = use
        return keywords
    record.replies[ROLE] = completion.text
    use["ms"] = round((time.monotonic() - started) * 1000.0, 1)
    completed = parse_rewrite(completion.text, reading.text, limit)
    have = {t.surface for t in retriever.topic_terms(reading.text, TOPIC_TERMS)} | set(reading.terms) | set(keywords or ())
    added = [t.surface for t in retriever.topic_terms(completed, TOPIC_TERMS) if t.surface not in have] if completed else []
    if not added:
        use.update(outcome=KEYWORDS_IGNORED, reason="the rewrite added no term of the guideline"
                   if completed else "no rewritten question could be read from the reply")
        record.model_use[ROLE] = use
        return keywords
    use.update(outcome=KEYWORDS_USED, completed_question=completed, keywords=added)
    record.model_use[ROLE] = use
    base = list(keywords) if keywords is not None else retriever.offline_keywords(reading.text)
    return base + added
