"""Topic first: which stored guideline governs a question, before any passage is chosen.

As in SafeLLM's design (and the published protocol's out-of-scope test: pediatric glioma
asked of the lung guidebook), a question is first matched to the one guideline that
governs it, then answered from that guideline only (chatbot.library).

- offline, from retrieval evidence: each guideline's retriever is searched with the
  question, and its coverage decision taken as the chatbot takes it (the coverage model's
  P(governed), chatbot.coverage_decision; under the rules, a passage over the threshold
  and one line covering enough of the question). Among the guidelines that govern the
  question, the one with the highest P (then the best passage) is chosen; when none
  governs, the best one is read anyway, so the refusal comes from the same gate
  as with one guideline. The `ours` scores are shares of the question's IDF mass each
  corpus holds, so a question naming what one guideline never mentions (胃, 胸腺) scores
  low against it.
- with a model (the keywords model: the one that reads questions), a topic-selection
  call lists the stored guidelines by id and title; its choice must be one of those ids.
  A reply that names none of them, "none", or a model failure falls back to the offline
  choice, and the routing record says why.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Sequence

# The topic-selection call: one id back, so a small reply budget and no sampling.
TOPIC_MAX_TOKENS = 16
TOPIC_TEMPERATURE = 0.0
TOPIC_SYSTEM_PROMPT = (
    "あなたは、患者さんの質問を、その質問に答えるべき診療ガイドライン一つに振り分ける係です。"
    "次のガイドラインの一覧から、質問の話題を扱うガイドラインを一つだけ選び、その id だけを答えてください。"
    "どのガイドラインの話題でもない場合は none と答えてください。説明は書かないでください。"
)
NONE_REPLY = "none"

# How the guideline was chosen: named by the asker, the only one stored, by offline evidence,
# by the model, or as the guideline of the conversation a follow-up leans on (chatbot.library).
FIXED, ONLY, OFFLINE, MODEL, CONVERSATION = "fixed", "only", "offline", "model", "conversation"


@dataclass(frozen=True)
class Evidence:
    """What one guideline's retrieval says about a question."""

    guideline: str
    top_score: float
    line_coverage: float | None  # the evidence gate's measure; None when the gate is off
    governed: bool  # the coverage model's verdict (or: a passage cleared the threshold and the gate)
    probability: float | None = None  # the coverage model's P(governed); None under the rules

    def to_json(self) -> dict[str, Any]:
        out = {
            "id": self.guideline,
            "top_score": round(float(self.top_score), 4),
            "line_coverage": None if self.line_coverage is None else round(float(self.line_coverage), 4),
            "governed": self.governed,
        }
        if self.probability is not None:
            out["coverage_probability"] = round(float(self.probability), 4)
        return out


@dataclass
class Routing:
    """How the guideline that answers a question was chosen (the answer's `routing`)."""

    requested: str  # "auto" or the id asked for
    chosen: str  # the guideline whose passages were read
    method: str  # FIXED | ONLY | OFFLINE | MODEL
    governed: bool | None = None  # auto with several: did the offline evidence find a governing guideline
    evidence: list[Evidence] = field(default_factory=list)
    model: str | None = None
    model_reply: str | None = None
    fell_back: str | None = None  # why the model's choice was not used
    conversation: str | None = None  # CONVERSATION: the earlier question whose guideline it stays with

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"requested": self.requested, "chosen": self.chosen, "method": self.method}
        if self.governed is not None:
            data["governed"] = self.governed
        if self.evidence:
            data["evidence"] = [e.to_json() for e in self.evidence]
        if self.model is not None:
            data.update(model=self.model, model_reply=self.model_reply, fell_back=self.fell_back)
        if self.conversation is not None:
            data["conversation"] = self.conversation
        return data


def offline_choice(evidence: Sequence[Evidence]) -> tuple[str, bool]:
    """(the guideline to read, whether it governs): the best-scoring governing guideline,
    else the best-scoring one; ties go to the better line coverage, then to list order."""
    governing = [e for e in evidence if e.governed]
    pool = governing or list(evidence)
    best = max(enumerate(pool), key=lambda ie: (ie[1].probability if ie[1].probability is not None else 0.0,
                                                 ie[1].top_score, ie[1].line_coverage or 0.0, -ie[0]))[1]
    return best.guideline, bool(governing)


def topic_prompt(question: str, guidelines: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """(system, user) messages of the topic-selection call: the guidelines as `id: title`
    lines, then the question."""
    listing = "\n".join(f"- {gid}: {title or gid}" for gid, title in guidelines)
    return TOPIC_SYSTEM_PROMPT, f"ガイドラインの一覧:\n{listing}\n\n質問: {question}"


_TOKEN = re.compile(r"[a-z0-9][a-z0-9_-]*")


def parse_topic(reply: str, ids: Sequence[str]) -> str | None:
    """The guideline id a topic-selection reply names: the whole reply (quotes, `id:` and
    punctuation aside) must be one stored id; anything else (none, two ids, prose) is None."""
    text = unicodedata.normalize("NFKC", reply or "").strip().lower()
    text = re.sub(r"^(?:id|answer|回答|答え)\s*[:：]\s*", "", text)
    text = text.strip(" \t\r\n`'\"「」『』。.、,:：-*")
    return text if text in set(ids) and _TOKEN.fullmatch(text) else None
