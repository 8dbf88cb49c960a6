"""The Chatbot: question -> keywords -> retrieval -> evidence gate -> answer mode -> audit -> Answer.

The orchestration only: the evidence gate is chatbot.gate's, the modes (extract, lines,
generate) are chatbot.modes', and what the ask did is kept in a chatbot.record.AskRecord.
Order of an ask, and what each outcome records:
1. clean the question (QuestionError for nothing answerable; audited as an error row);
2. keywords from the keywords model when one is configured, else offline (retrieval's);
   model keywords may only add evidence: when the question's own words clear the threshold
   and the evidence gate but the model's keywords do not, the model's are ignored; and
   they are optional: with every model slot busy, the question's own are used at once;
3. retrieval, then the evidence gate (chatbot.gate): the coverage model's P(governed)
   below its operating point (under the rules: nothing cleared the threshold, or the line
   coverage or the asked figure refused) -> not covered (no model is asked);
4. the mode: extract (no model), lines (model picks numbers, we rebuild from stored lines),
   generate (the protocol; the model's text is a labelled summary beside verbatim passages);
   the model declining (「行: なし」, the insufficiency sentence) -> not covered;
5. the audit row is written, then the Answer (with its audit_id) is returned.
A model that cannot be used falls back to extract, and says so:
- a reply that arrived but cannot be shown (chatbot.replies: repeated, echoed, pasted back,
  far too long, cut off, another language; lines: no valid line number) always falls back:
  the model was reached, and the verbatim answer is safe;
- a failed answer call (unreachable, HTTP error, timeout, no free slot, empty reply, or no
  model configured for a mode that needs one) falls back when ModelConfig.fallback_to_extract
  is set, else raises ModelError after an audit row recorded it. A failed keywords call
  only costs the model's keywords: the question's own are used.
No partial or unverified model text is ever returned. What each model did is
`Answer.model_use` (chatbot.record, MODEL USE).

With `history` (the conversation's earlier questions), the question is read first
(chatbot.conversation): a follow-up is searched completed by the terms it leans on, and
answered only when its own words are spoken to on the page that answers it; the answer's
`context` says how it was read, and the audit row records the history.
"""
from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from guiderag.errors import GuideragError, InputError, ModelBusyError, ModelError, ModelReplyError, StoreError
from guiderag.scopes import EXTRACT, MODEL_MODES, MODES, PROTOCOL
from guiderag.retrieval.result import RetrievalResult
from guiderag.store import Store

from .answer import FAILED, FELL_BACK, KEYWORDS_FAILED, KEYWORDS_IGNORED, KEYWORDS_SKIPPED, KEYWORDS_USED, Answer
from .audit import AuditLog
from .config import BotConfig
from .conversation import TOPIC_SWITCH, Reader, Reading, clean_history
from .coverage_reasons import rule_reason
from .gate import EvidenceGate, Verdict
from .llm import LLMClient, Progress
from .modes import MODE_CLASSES, AnswerMode, Extract, refusal
from .question import clean_question
from .record import AskRecord

if TYPE_CHECKING:
    from guiderag.retrieval import Retriever

# The keywords call: a few words back, so a small reply budget.
KEYWORDS_MAX_TOKENS = 64
# Why a follow-up read with carried terms is refused (chatbot.conversation, rule 5).
OWN_WORDS_MISSING = ("the page that answers the follow-up as read does not speak to its own words or to the "
                     "earlier topic it was read with (conversation reading)")


class Chatbot:
    """Answers questions from the stored guideline; one audit row per ask."""

    def __init__(
        self,
        config: BotConfig,
        retriever: Retriever | None = None,
        llm: LLMClient | None = None,
        *,
        store: Store | None = None,
        guideline: dict[str, str] | None = None,
        routing: dict[str, Any] | None = None,
        gate: EvidenceGate | None = None,
    ) -> None:
        """`gate`: the guideline's evidence gate, shared (chatbot.library keeps one per
        guideline); by default one of this Chatbot's own over its retriever."""
        self.config = config
        # Which guideline answers ({"id", "title"}; None: the retriever's, looked up when
        # asked) and how it was chosen (chatbot.library routes above this class).
        self.guideline = guideline
        self.routing = routing
        self._retriever = retriever
        self.llm = llm or LLMClient(config.model)
        # The audit table lives in the page store's file. create=False: asking against a
        # store that does not exist must not leave an empty database behind.
        self._own_store = store is None
        self.store = store or Store(config.store.store, create=False)
        self.audit = AuditLog(self.store.conn)
        self._gate = gate
        self._modes: dict[str, AnswerMode] = {}

    # -- lifecycle ----------------------------------------------------------------
    def close(self) -> None:
        if self._own_store:
            self.store.close()

    def __enter__(self) -> "Chatbot":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def retriever(self) -> Retriever:
        """The retriever given, else the configured one, loaded on first use."""
        if self._retriever is None:
            from guiderag.retrieval import load_retriever  # MeCab, numpy: only when asked

            self._retriever = load_retriever(self.config.retrieval, self.config.store, progress=self.config.progress)
        return self._retriever

    @property
    def gate(self) -> EvidenceGate:
        """The evidence gate given, else one over the retriever (made on first use)."""
        if self._gate is None:
            self._gate = EvidenceGate(self.config.answer, self.retriever)
        return self._gate

    def mode(self, name: str) -> AnswerMode:
        """The answer mode `name` (guiderag.scopes.MODES), made on first use."""
        if name not in self._modes:
            self._modes[name] = MODE_CLASSES[name](self.config.answer, self.config.model, self.retriever, self.gate.analyze, self.llm)
        return self._modes[name]

    @property
    def reader(self) -> Reader:
        """How a question of a conversation is read against this guideline."""
        return Reader(self.config.answer, self.retriever, self.gate, self.store)

    # -- asking -------------------------------------------------------------------
    def ask(self, question: str, mode: str | None = None, *, progress: Progress | None = None,
            history: Sequence[str] | None = None, reading: Reading | None = None) -> Answer:
        """Answer one question, read with the conversation's earlier questions (`history`,
        oldest first) when given. The audit row is written first.

        `progress(stage, chars)` hears where the answer is: "keywords" and "answering" (a
        model is writing; chars so far), "queued" (waiting for a free model slot).
        `reading`: how the question was already read (chatbot.library reads it to route)."""
        started = time.perf_counter()
        mode = mode or self.config.answer.mode
        record = AskRecord(self.llm, progress)
        try:
            if mode not in MODES:
                raise InputError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
            cleaned = clean_question(question, self.config.answer)
            earlier = clean_history(history, self.config.answer)
        except InputError as exc:
            self._record_error(_printable(question), exc, mode, record, started)
            raise
        text = cleaned.text
        if not earlier:
            reading = Reading(text, text)  # a question alone, read as it always was
        elif reading is None or reading.question != text or reading.history != earlier:
            try:
                reading = self.reader.read(text, earlier)
            except StoreError:
                raise
            except Exception as exc:  # a bug or an unexpected failure: still leave a trace
                self._record_error(text, exc, mode, record, started)
                raise
        try:
            answer = self._answer(reading, mode, record)
        except ModelReplyError as exc:  # the model answered, unusably: always the verbatim answer
            answer = self._fallback(reading, mode, exc, record, failure="reply")
        except ModelError as exc:
            if not self.config.model.fallback_to_extract:
                record.use_failed(exc, FAILED, mode)
                self._record_error(text, exc, mode, record, started, reading)
                raise
            answer = self._fallback(reading, mode, exc, record, failure="call")
        except StoreError:
            raise
        except Exception as exc:  # a bug or an unexpected failure: still leave a trace
            self._record_error(text, exc, mode, record, started, reading)
            raise
        answer.question = text
        answer.context = reading.context_json()
        answer.notes = list(cleaned.notes) + answer.notes
        if record.coverage is not None:  # the coverage model decided: P and why
            answer.coverage_probability = round(record.coverage.probability, 4)
            answer.coverage_reasons = list(record.coverage.reasons)
        elif not answer.governed and not answer.coverage_reasons:
            answer.coverage_reasons = [rule_reason(answer.retrieval)]
        answer.attach_guideline(self._guideline_ref(), self.routing)
        answer.retrieval_result = record.result
        answer.model_use = record.model_use
        answer.model_replies = record.replies
        answer.latency_ms = (time.perf_counter() - started) * 1000.0
        answer.audit_id = self.audit.record(
            answer, requested_mode=mode, keywords_model=record.keywords_model, conversation=reading.audit_json()
        )
        return answer

    def _answer(self, reading: Reading, mode: str, record: AskRecord) -> Answer:
        if mode != EXTRACT:
            self.llm.require("answer")  # ModelNotConfiguredError before any work
        question = reading.text
        keywords = self._keywords(question, record)
        if (reading.history and reading.how != TOPIC_SWITCH and self.llm.configured("keywords")
                and self.config.retrieval.pipeline != PROTOCOL):
            from .rewrite import rewrite_terms  # a follow-up rewritten by the keywords model: may only add

            keywords = rewrite_terms(self.llm, self.retriever, reading, record, keywords,
                                     self.config.model.keywords_queue_timeout_s, 2 * self.config.answer.max_question_chars)
        # a question alone is searched as it always was; a follow-up with its carried terms
        found = self._search(question, keywords, record, *([reading.terms] if reading.terms else []))
        # a follow-up: the page that answered the question before first among the pages found;
        # whether it is covered is judged on what was found (the prior never raises a score there)
        result = self.reader.prefer(found, reading)
        record.searched(result)
        verdict = self._judge(question, found, record)
        retrieval = verdict.retrieval_json(result)
        reason = verdict.reason if not verdict.covered else self._own_words_missing(reading, result)
        if reason:
            record.not_asked(mode, reason)
            return refusal(self.config.answer, question, mode, result, retrieval)
        return self.mode(mode).answer(question, result, retrieval, record)

    def _own_words_missing(self, reading: Reading, result: RetrievalResult) -> str:
        """Why a follow-up read with carried terms is refused although the gate covers it
        completed (chatbot.conversation, rule 5), or "" when it is not."""
        if not reading.carried or self.reader.speaks_to(reading, result):
            return ""
        return OWN_WORDS_MISSING

    def _keywords(self, question: str, record: AskRecord) -> list[str] | None:
        """Model keywords when a keywords model is configured; None means offline."""
        if not self.llm.configured("keywords"):
            return None
        from guiderag.retrieval.keywords import (KEYWORD_COUNT, MODEL_TERMS, guide_terms_prompt, keyword_prompt,
                                                 parse_keywords)

        if self.config.retrieval.pipeline == PROTOCOL:  # the published prompt
            count = KEYWORD_COUNT
            system, user = keyword_prompt(question, count)
        else:  # the guideline's words for the question; they may only add evidence
            count = MODEL_TERMS
            system, user = guide_terms_prompt(question, count)
        record.keywords_model = self.llm.model_for("keywords")
        try:
            reply = record.call("keywords", system, user, max_tokens=KEYWORDS_MAX_TOKENS,
                                stop_when=_lines_read(count),
                                queue_timeout_s=self.config.model.keywords_queue_timeout_s).text
        except ModelError as exc:  # optional: a busy or failing model costs only them
            busy = isinstance(exc, ModelBusyError)
            record.use("keywords", KEYWORDS_SKIPPED if busy else KEYWORDS_FAILED,
                       reason=f"{exc}; the question's own keywords were used", **({} if busy else {"failure": "call"}))
            return None
        keywords = parse_keywords(reply, count)
        record.use("keywords", KEYWORDS_USED if keywords else KEYWORDS_IGNORED, keywords=keywords,
                   **({} if keywords else {"reason": "no keyword could be read from the reply"}))
        return keywords or None  # nothing usable: offline keywords

    def _search(self, question: str, keywords: list[str] | None, record: AskRecord,
                context: Sequence[str] = ()) -> RetrievalResult:
        """Retrieval with the model's keywords, which may only add evidence: when they leave
        the question refused (threshold or evidence gate) but its own words would not, the
        question's own keywords are used. The protocol pipeline stays as published.
        `context`: the terms a follow-up leans on (the question as read)."""
        result: RetrievalResult = self._retrieve(question, keywords, context)
        if keywords is not None:
            record.model_keywords = list(result.keywords)  # they may only raise the coverage model's P
        if keywords is None or result.pipeline == PROTOCOL or self._passes(question, result, record.model_keywords):
            return result
        own: RetrievalResult = self._retrieve(question, None, context)
        if not self._passes(question, own):
            return result
        record.model_keywords = []
        record.use("keywords", KEYWORDS_IGNORED, keywords=list(keywords), reason=(
            f"the model's keywords left the question below the threshold or the evidence gate "
            f"(top score {result.top_score:.3f}), its own words do not ({own.top_score:.3f}): "
            f"used {list(own.keywords)}"))
        rewrite = record.model_use.get("rewrite")
        if rewrite is not None and rewrite.get("outcome") == KEYWORDS_USED:  # its terms went with them
            rewrite.update(outcome=KEYWORDS_IGNORED, reason="its terms left the question refused; not used")
        return own

    def _retrieve(self, question: str, keywords: list[str] | None, context: Sequence[str]) -> RetrievalResult:
        """retriever.search, with the context only when there is one (a question alone is
        searched exactly as it always was)."""
        if context:
            return self.retriever.search(question, keywords, context=context)
        return self.retriever.search(question, keywords)

    def _passes(self, question: str, result: RetrievalResult, keywords: Sequence[str] = ()) -> bool:
        """Whether a retrieval would be answered: the coverage model's verdict, or under the
        rules as far as the threshold and the line coverage go (the asked-figure rule is the
        answer's alone)."""
        return self.gate.judge(question, result, asked_figure=False, store=self.store, keywords=keywords).covered

    def _judge(self, question: str, result: RetrievalResult, record: AskRecord) -> Verdict:
        """The gate's verdict on the answer's retrieval (the guideline's calibration read
        from the store), the coverage model's kept in the record."""
        verdict = self.gate.judge(question, result, store=self.store, keywords=record.model_keywords)
        record.coverage = verdict.coverage
        return verdict

    # -- falling back ---------------------------------------------------------------
    def _fallback(
        self, reading: Reading, mode: str, exc: ModelError, record: AskRecord, *, failure: str
    ) -> Answer:
        """The model could not be used: answer offline (extract), saying why."""
        question = reading.text
        if failure == "reply":
            note = f"{mode} mode: {exc}; answered with extract instead"
        else:
            note = f"{mode} mode failed ({exc}); answered with extract instead"
        result = record.result
        if result is None:  # failed before retrieval (no answer model configured): offline keywords
            result = self._retrieve(question, None, reading.terms)
            record.searched(result)
        answer = self._offline(reading, result, note, record)
        shown = "extract" if answer.governed else "refusal"
        if failure == "reply":
            code = exc.code if isinstance(exc, ModelReplyError) else "unusable"
            record.use("answer", FELL_BACK, failure="reply", code=code, reason=str(exc), shown=shown)
        else:
            record.use_failed(exc, FELL_BACK, mode, shown)
        return answer

    def _offline(self, reading: Reading, result: RetrievalResult, note: str, record: AskRecord) -> Answer:
        """The extract answer (or the refusal) for a result, through the same gate."""
        question = reading.text
        verdict = self._judge(question, result, record)
        retrieval = verdict.retrieval_json(result)
        if not verdict.covered or self._own_words_missing(reading, result):
            return refusal(self.config.answer, question, EXTRACT, result, retrieval, error=note)
        extract = Extract(self.config.answer, self.config.model, self.retriever, self.gate.analyze, self.llm)
        return extract.answer(question, result, retrieval, error=note)

    # -- the audit ------------------------------------------------------------------
    def _guideline_ref(self) -> dict[str, str] | None:
        """{"id", "title"} of the guideline answered from: the one given, else the loaded
        retriever's (None before a retriever is loaded)."""
        if self.guideline is not None:
            return self.guideline
        if self._retriever is None:
            return None
        gid = self._retriever.guideline
        known = self.store.get_guideline(gid)
        self.guideline = {"id": gid, "title": known.title if known is not None else ""}
        return self.guideline

    def _record_error(
        self, question: str, exc: BaseException, mode: str | None, record: AskRecord, started: float,
        reading: Reading | None = None,
    ) -> None:
        result = record.result
        guideline = self._guideline_ref()
        message = str(exc) if isinstance(exc, GuideragError) else f"{type(exc).__name__}: {exc}"
        self.audit.record_error(
            question,
            message,
            keywords=record.keywords,
            mode=mode,
            model=self.llm.model_for("answer") if mode in MODEL_MODES else None,
            keywords_model=record.keywords_model,
            retrieval=result.to_json() if result is not None else None,
            latency_ms=(time.perf_counter() - started) * 1000.0,
            guideline=guideline["id"] if guideline else None,
            routing=self.routing,
            model_use=record.model_use,
            model_replies=record.replies,
            conversation=reading.audit_json() if reading is not None else None,
        )


_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)．、:：]|[-*•●○◆■・])")


def _lines_read(count: int) -> Callable[[str], str | None]:
    """Stop reading a keywords reply at the end of its first line (the format asked for: one
    line), or after `count` lines when it is a list: a small model runs on with the question
    again and again."""
    def check(text: str) -> str | None:
        done = [line for line in text.lstrip().split("\n")[:-1] if line.strip()]
        if done and (not _LIST_ITEM.match(done[0]) or len(done) >= count):
            return "the keywords line is complete"
        return None

    return check


def _printable(raw: object) -> str:
    """What to write in the audit for a question that was refused as input."""
    if not isinstance(raw, str):
        return "" if raw is None else f"<{type(raw).__name__}>"
    return "".join(ch if ch.isprintable() or ch == " " else " " for ch in raw)[:2000]


def ask(config: BotConfig, question: str, mode: str | None = None) -> Answer:
    """One-shot convenience: open, ask, close."""
    with Chatbot(config) as bot:
        return bot.ask(question, mode)


__all__: Sequence[str] = ("Chatbot", "MODES", "ask")
