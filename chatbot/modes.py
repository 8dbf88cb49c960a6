"""The answer modes, one interface: a covered question's reference in, an Answer out.

- `Extract` (no model): verbatim lines of the reference (chatbot.extract);
- `Lines`: the model picks line numbers, the answer is rebuilt from the stored lines
  (chatbot.lines); 「行: なし」 -> not covered;
- `Generate`: the model's text, a labelled summary beside the verbatim passages
  (chatbot.generate); the insufficiency sentence -> not covered.
A model reply that cannot be used raises ModelReplyError and a failed call ModelError;
chatbot.bot then falls back to Extract. `refusal` is the one not-covered Answer.

A mode is made per Chatbot (its answer and model configs, retriever, gate and model client) and answers
one question at a time; what each model did goes into the ask's AskRecord.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from guiderag.errors import ModelReplyError
from guiderag.retrieval.result import RetrievalResult
from guiderag.scopes import EXTRACT, GENERATE, LINES, AnswerConfig, ModelConfig

from . import generate as gen
from . import replies
from .answer import ANSWERED, DECLINED, GOVERNED, NOT_GOVERNED, Answer
from .extract import extract
from .lines import LINES_SYSTEM_PROMPT, judge_reply, lines_stop, lines_user_message, number_reference, ranked_picks
from .llm import LLMClient
from .record import AskRecord
from .shown import Pick, layout, render

from guiderag.retrieval.retriever import result_slots as query_slots

if TYPE_CHECKING:
    from guiderag.retrieval import Retriever

    from .gate import Analyze


def refusal(
    config: AnswerConfig, question: str, mode: str, result: RetrievalResult | None,
    retrieval: dict[str, Any] | None = None, *, model: str | None = None, error: str | None = None,
) -> Answer:
    """Not covered: the fixed refusal, where to ask instead, nothing generated."""
    return Answer(
        question=question,
        keywords=list(result.keywords) if result is not None else [],
        mode=mode,
        coverage=NOT_GOVERNED,
        answer=config.refusal_message,
        passages=[],
        retrieval=retrieval if retrieval is not None else (result.to_json() if result is not None else {}),
        escalation=config.escalation_text,
        model=model,
        error=error,
    )


class AnswerMode(ABC):
    """How a covered question is answered from its reference."""

    name: ClassVar[str]

    def __init__(self, answer: AnswerConfig, model: ModelConfig, retriever: Retriever, analyze: Analyze,
                 llm: LLMClient) -> None:
        self.config = answer
        self.model_config = model
        self.retriever = retriever
        self.analyze = analyze
        self.llm = llm

    @abstractmethod
    def answer(self, question: str, result: RetrievalResult, retrieval: dict[str, Any], record: AskRecord) -> Answer:
        """The Answer to `question` from `result` (which the evidence gate passed);
        `retrieval` is the answer's retrieval JSON."""

    def refusal(self, question: str, result: RetrievalResult, retrieval: dict[str, Any], **extra: Any) -> Answer:
        return refusal(self.config, question, self.name, result, retrieval, **extra)


class Extract(AnswerMode):
    """Verbatim lines of the reference, no model (chatbot.extract)."""

    name = EXTRACT

    def answer(
        self, question: str, result: RetrievalResult, retrieval: dict[str, Any], record: AskRecord | None = None,
        *, error: str | None = None,
    ) -> Answer:
        """`error`: why a model mode was answered with extract instead (the fallback)."""
        # with the keywords' when they add any; a follow-up with the terms it leans on
        slots = query_slots(self.retriever, question, result)
        text, shown = extract(
            question, result.keywords, result.passages, self.config.answer_chars,
            self.analyze, self.retriever.idf, slots=slots[-1] if slots else None, lines=self.retriever.line_analyses,
        )
        if not text:
            return self.refusal(question, result, retrieval, error=error)
        return Answer(
            question=question, keywords=list(result.keywords), mode=EXTRACT, coverage=GOVERNED,
            answer=text, passages=shown, retrieval=retrieval, error=error,
        )


class Lines(AnswerMode):
    """The model names the reference lines that answer; they are shown as stored."""

    name = LINES

    def answer(self, question: str, result: RetrievalResult, retrieval: dict[str, Any], record: AskRecord) -> Answer:
        reference = number_reference(result.passages)
        model = self.llm.model_for("answer")
        completion = record.call(
            "answer", LINES_SYSTEM_PROMPT, lines_user_message(reference, question),
            max_tokens=self.model_config.lines_max_tokens, stop_when=lines_stop([LINES_SYSTEM_PROMPT]),
        )
        verdict = judge_reply(completion.text, reference, [LINES_SYSTEM_PROMPT])
        if verdict.declined:
            record.use("answer", DECLINED, shown="refusal", reason="the model named no line (「行: なし」)")
            return self.refusal(question, result, retrieval, model=model)
        if verdict.problem is not None:
            raise ModelReplyError(f"the model's line selection cannot be used: {verdict.problem.reason}",
                                  verdict.problem.code)
        budget = self.config.answer_chars
        text, shown = render(ranked_picks(reference, verdict.numbers), budget)
        wanted = {(nl.page.url, nl.page.version, nl.line) for n in verdict.numbers if (nl := reference.get(n))}
        kept = sum(1 for p in shown for n in p.lines if (p.url, p.version, n) in wanted)
        extra: dict[str, Any] = {"lines_picked": len(wanted), "lines_shown": kept}
        if kept < len(wanted):
            extra["reason"] = (f"the model picked {len(wanted)} lines; the {kept} highest-ranked that fit "
                               f"the {budget}-character answer are shown")
        record.use("answer", ANSWERED, shown="lines", **extra)
        return Answer(
            question=question, keywords=list(result.keywords), mode=LINES, coverage=GOVERNED,
            answer=text, passages=shown, retrieval=retrieval, model=model,
        )


class Generate(AnswerMode):
    """The published protocol's answer: the model's summary from the reference, shown
    labelled above the verbatim passages, once every check of chatbot.replies passed."""

    name = GENERATE

    def answer(self, question: str, result: RetrievalResult, retrieval: dict[str, Any], record: AskRecord) -> Answer:
        reference = result.model_reference  # the protocol keeps its literal reference; ours sends whole lines
        model = self.llm.model_for("answer")
        system = gen.system_prompt(self.config.answer_chars)
        max_chars = int(self.config.answer_chars * self.model_config.summary_max_factor)
        completion = record.call(
            "answer", system, gen.user_message(reference, question),
            max_tokens=self.model_config.answer_max_tokens,
            stop_when=replies.stop_reading(question=question, instructions=[system], max_chars=max_chars),
        )
        reply = completion.text
        problem = replies.generated_problem(
            reply, question=question, reference=reference, instructions=[system], max_chars=max_chars,
            finish_reason=completion.finish_reason, streamed=completion.streamed,
        )
        if problem is None and completion.stopped:  # stopped for a reason the whole text no longer shows
            problem = replies.Problem("stopped", f"reading was stopped: {completion.stopped}")
        if problem is not None:
            raise ModelReplyError(f"the model's summary cannot be shown: {problem.reason}", problem.code)
        if gen.is_insufficient(reply):
            record.use("answer", DECLINED, shown="refusal",
                       reason="the model said the reference does not answer the question")
            return self.refusal(question, result, retrieval, model=model)
        summary = reply.strip()
        _, shown = layout(Pick(p.page, n, float(p.score)) for p in result.passages for n in p.lines)
        record.use("answer", ANSWERED, shown="generate")
        return Answer(
            question=question, keywords=list(result.keywords), mode=GENERATE, coverage=GOVERNED,
            answer=summary, passages=shown, retrieval=retrieval, summary=summary,
            unsupported_sentences=gen.unsupported_sentences(summary, reference, self.analyze),
            model=model,
        )


# Each mode by its name (guiderag.settings.MODES).
MODE_CLASSES: dict[str, type[AnswerMode]] = {m.name: m for m in (Extract, Lines, Generate)}
