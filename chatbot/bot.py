"""The Chatbot: question -> keywords -> retrieval -> extract | lines | generate -> audit -> Answer.

Order of an ask, and what each outcome records:
1. clean the question (QuestionError for nothing answerable; audited as an error row);
2. keywords from the keywords model when one is configured, else offline (retrieval's);
3. retrieval; nothing cleared the threshold -> not covered (no model is asked);
4. the mode: extract (no model), lines (model picks numbers, we rebuild from stored lines),
   generate (the protocol; the model's text is a labelled summary beside verbatim passages);
   the model declining, or lines yielding nothing valid -> not covered;
5. the audit row is written, then the Answer (with its audit_id) is returned.
A model failure (unreachable, HTTP error, timeout, empty reply, or no model configured for
a mode that needs one) falls back to extract when settings.fallback_to_extract is set, else
raises ModelError after an audit row recorded it. No partial or unverified model text is ever returned.
"""
from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from guiderag.errors import GuideragError, InputError, ModelError, StoreError
from guiderag.settings import EXTRACT, GENERATE, LINES, MODEL_MODES, MODES, PROTOCOL, Settings
from guiderag.retrieval.result import RetrievalResult
from guiderag.store import Store

from . import generate as gen
from .answer import GOVERNED, NOT_GOVERNED, Answer
from .answer_type import missing_figure
from .audit import AuditLog
from .extract import extract, line_coverage
from .lines import LINES_SYSTEM_PROMPT, lines_user_message, number_reference, parse_line_numbers, picks_for
from .llm import LLMClient
from .question import clean_question
from .shown import Pick, layout, render

if TYPE_CHECKING:
    from guiderag.retrieval import Retriever

# The keywords call: a few words back, so a small reply budget.
KEYWORDS_MAX_TOKENS = 64
# Analyses of reference lines kept per Chatbot (the same lines recur across questions).
ANALYSIS_CACHE = 8192


class Chatbot:
    """Answers questions from the stored guideline; one audit row per ask."""

    def __init__(
        self,
        settings: Settings,
        retriever: Retriever | None = None,
        llm: LLMClient | None = None,
        *,
        store: Store | None = None,
    ) -> None:
        self.settings = settings
        self._retriever = retriever
        self.llm = llm or LLMClient(settings)
        # The audit table lives in the page store's file. create=False: asking against a
        # store that does not exist must not leave an empty database behind.
        self._own_store = store is None
        self.store = store or Store(settings.db, create=False)
        self.audit = AuditLog(self.store.conn)
        self._analyzer: Callable[[str], list[str]] | None = None

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

            self._retriever = load_retriever(self.settings)
        return self._retriever

    def _analyze(self) -> Callable[[str], list[str]]:
        """The retriever's analyzer, cached (the same reference lines recur)."""
        if self._analyzer is None:
            self._analyzer = functools.lru_cache(maxsize=ANALYSIS_CACHE)(self.retriever.analyze)
        return self._analyzer

    def _idf(self) -> Callable[[str], float]:
        return self.retriever.idf

    # -- asking -------------------------------------------------------------------
    def ask(self, question: str, mode: str | None = None) -> Answer:
        """Answer one question on its own (no history). The audit row is written first."""
        started = time.perf_counter()
        mode = mode or self.settings.mode
        state: dict[str, Any] = {"keywords": [], "result": None, "keywords_model": None}
        try:
            if mode not in MODES:
                raise InputError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
            cleaned = clean_question(question, self.settings)
        except InputError as exc:
            self._record_error(_printable(question), exc, mode, state, started)
            raise
        text = cleaned.text
        try:
            answer = self._answer(text, mode, state)
        except ModelError as exc:
            if not self.settings.fallback_to_extract:
                self._record_error(text, exc, mode, state, started)
                raise
            answer = self._fallback(text, mode, exc, state)
        except StoreError:
            raise
        except Exception as exc:  # a bug or an unexpected failure: still leave a trace
            self._record_error(text, exc, mode, state, started)
            raise
        answer.notes = list(cleaned.notes) + answer.notes
        answer.retrieval_result = state["result"]
        answer.latency_ms = (time.perf_counter() - started) * 1000.0
        answer.audit_id = self.audit.record(
            answer, requested_mode=mode, keywords_model=state["keywords_model"]
        )
        return answer

    def _answer(self, question: str, mode: str, state: dict[str, Any]) -> Answer:
        if mode != EXTRACT:
            self.llm.require("answer")  # ModelNotConfiguredError before any work
        keywords = self._keywords(question, state)
        result: RetrievalResult = self.retriever.search(question, keywords)
        state["result"] = result
        state["keywords"] = list(result.keywords)
        if not result.governed:
            return self._refusal(question, mode, result, self._retrieval_json(result))
        covered, rjson = self._gate(question, result)
        if not covered:
            return self._refusal(question, mode, result, rjson)
        if mode == EXTRACT:
            return self._extract(question, result, rjson)
        if mode == LINES:
            return self._lines(question, result, rjson)
        return self._generate(question, result, rjson)

    def _gate(self, question: str, result: RetrievalResult) -> tuple[bool, dict[str, Any]]:
        """The evidence gate on a result that cleared the threshold: (covered, retrieval JSON).

        Not covered when the best reference line (with its title) holds less than
        settings.min_line_coverage of the question, or when the question asks for a figure
        (when, how long, how often, how much: chatbot.answer_type) and no reference line
        gives one (settings.require_asked_figure): the guideline names the topic, not what
        is asked about it (禁煙外来の費用, 再発までの期間). The JSON records both measures."""
        coverage = self._evidence(question, result)
        rjson = self._retrieval_json(result, coverage)
        if coverage is not None and coverage < self.settings.min_line_coverage:
            return False, rjson
        if self.settings.require_asked_figure and result.pipeline != PROTOCOL:
            pages = {(p.page.url, p.page.version): p.page for p in result.passages}
            missing = missing_figure(question, [line for page in pages.values() for line in page.lines])
            if missing:
                rjson["asked_figure_missing"] = sorted(missing)
                return False, rjson
        return True, rjson

    def _evidence(self, question: str, result: RetrievalResult) -> float | None:
        """The evidence gate's measure (settings.min_line_coverage): how much of the question
        the best reference line speaks to. None when the gate is off, or for the protocol
        pipeline, which stays as published."""
        if self.settings.min_line_coverage <= 0 or result.pipeline == PROTOCOL:
            return None
        # The retriever's own query slots: weights (verbs, unseen compounds and everyday words
        # count less than topic nouns) and expansions. Keywords may only add evidence: the
        # better of the question's coverage alone and with the keywords' known terms.
        slots = self._slots(question, result)
        if not slots:
            weights = self.retriever.query_weights(question, result.keywords)
            return line_coverage(question, result.passages, self._analyze(), weights, result.keywords)
        return max(line_coverage(question, result.passages, self._analyze(), slots=s) for s in slots)

    def _slots(self, question: str, result: RetrievalResult) -> list[Any]:
        """The retriever's query slots (question alone, then with keywords), or [] when it
        has none (a retriever without query_slots)."""
        query_slots = getattr(self.retriever, "query_slots", None)
        return list(query_slots(question, result.keywords)) if query_slots is not None else []

    def _retrieval_json(self, result: RetrievalResult, coverage: float | None = None) -> dict[str, Any]:
        data = result.to_json()
        if coverage is not None:
            data["line_coverage"] = round(coverage, 4)
            data["min_line_coverage"] = self.settings.min_line_coverage
        return data

    def _keywords(self, question: str, state: dict[str, Any]) -> list[str] | None:
        """Model keywords when a keywords model is configured; None means offline."""
        if not self.llm.configured("keywords"):
            return None
        from guiderag.retrieval.keywords import guide_terms_prompt, keyword_prompt, parse_keywords

        if self.settings.pipeline == PROTOCOL:  # the published prompt
            count = self.settings.keyword_count
            system, user = keyword_prompt(question, count)
        else:  # the guideline's words for the question; they may only add evidence
            count = self.settings.model_terms
            system, user = guide_terms_prompt(question, count)
        state["keywords_model"] = self.llm.model_for("keywords")
        reply = self.llm.complete(
            system, user, role="keywords", temperature=gen.TEMPERATURE, max_tokens=KEYWORDS_MAX_TOKENS, n=1
        )
        keywords = parse_keywords(reply, count)
        return keywords or None  # nothing usable: offline keywords

    # -- modes ----------------------------------------------------------------------
    def _extract(
        self, question: str, result: RetrievalResult, rjson: dict[str, Any], *, error: str | None = None
    ) -> Answer:
        text, shown = extract(
            question, result.keywords, result.passages, self.settings.answer_chars,
            self._analyze(), self._idf(), heading_max_chars=self.settings.heading_max_chars,
            slots=(self._slots(question, result) or [None])[-1],
        )
        if not text:
            return self._refusal(question, EXTRACT, result, rjson, error=error)
        return Answer(
            question=question, keywords=list(result.keywords), mode=EXTRACT, coverage=GOVERNED,
            answer=text, passages=shown, retrieval=rjson, error=error,
        )

    def _lines(self, question: str, result: RetrievalResult, rjson: dict[str, Any]) -> Answer:
        reference = number_reference(result.passages)
        model = self.llm.model_for("answer")
        reply = self.llm.complete(
            LINES_SYSTEM_PROMPT, lines_user_message(reference, question), role="answer",
            temperature=gen.TEMPERATURE, max_tokens=gen.MAX_TOKENS, n=gen.N,
        )
        # A reply opening with the insufficiency sentence declines, whatever numbers follow.
        numbers = [] if gen.opens_with_insufficiency(reply) else parse_line_numbers(reply, len(reference))
        text, shown = (
            render(picks_for(reference, numbers), self.settings.answer_chars,
                   heading_max_chars=self.settings.heading_max_chars)
            if numbers else ("", [])
        )
        if not text:
            return self._refusal(question, LINES, result, rjson, model=model)
        return Answer(
            question=question, keywords=list(result.keywords), mode=LINES, coverage=GOVERNED,
            answer=text, passages=shown, retrieval=rjson, model=model,
        )

    def _generate(self, question: str, result: RetrievalResult, rjson: dict[str, Any]) -> Answer:
        # The protocol pipeline keeps its literal reference; ours sends whole lines.
        reference = getattr(result, "literal_reference", None) or result.reference_text
        model = self.llm.model_for("answer")
        reply = self.llm.complete(
            gen.system_prompt(self.settings.answer_chars), gen.user_message(reference, question),
            role="answer", temperature=gen.TEMPERATURE, max_tokens=gen.MAX_TOKENS, n=gen.N,
        )
        if gen.is_insufficient(reply):
            return self._refusal(question, GENERATE, result, rjson, model=model)
        summary = reply.strip()
        _, shown = layout(Pick(p.page, n, float(p.score)) for p in result.passages for n in p.lines)
        return Answer(
            question=question, keywords=list(result.keywords), mode=GENERATE, coverage=GOVERNED,
            answer=summary, passages=shown, retrieval=rjson, summary=summary,
            unsupported_sentences=gen.unsupported_sentences(summary, reference, self._analyze()),
            model=model,
        )

    def _refusal(
        self, question: str, mode: str, result: RetrievalResult | None, rjson: dict[str, Any] | None = None,
        *, model: str | None = None, error: str | None = None,
    ) -> Answer:
        """Not covered: the fixed refusal, where to ask instead, nothing generated."""
        return Answer(
            question=question,
            keywords=list(result.keywords) if result is not None else [],
            mode=mode,
            coverage=NOT_GOVERNED,
            answer=self.settings.refusal_message,
            passages=[],
            retrieval=rjson if rjson is not None else (result.to_json() if result is not None else {}),
            escalation=self.settings.escalation_text,
            model=model,
            error=error,
        )

    def _fallback(self, question: str, mode: str, exc: ModelError, state: dict[str, Any]) -> Answer:
        """The model failed and settings.fallback_to_extract is set: answer offline."""
        note = f"{mode} mode failed ({exc}); answered with extract instead"
        result = state.get("result")
        if result is None:  # the keywords call failed: retrieve with offline keywords
            result = self.retriever.search(question, None)
            state["result"] = result
            state["keywords"] = list(result.keywords)
        if not result.governed:
            return self._refusal(question, EXTRACT, result, error=note)
        covered, rjson = self._gate(question, result)
        if not covered:
            return self._refusal(question, EXTRACT, result, rjson, error=note)
        return self._extract(question, result, rjson, error=note)

    def _record_error(
        self, question: str, exc: BaseException, mode: str | None, state: dict[str, Any], started: float
    ) -> None:
        result = state.get("result")
        message = str(exc) if isinstance(exc, GuideragError) else f"{type(exc).__name__}: {exc}"
        self.audit.record_error(
            question,
            message,
            keywords=state.get("keywords") or [],
            mode=mode,
            model=self.llm.model_for("answer") if mode in MODEL_MODES else None,
            keywords_model=state.get("keywords_model"),
            retrieval=result.to_json() if result is not None else None,
            latency_ms=(time.perf_counter() - started) * 1000.0,
        )


def _printable(raw: object) -> str:
    """What to write in the audit for a question that was refused as input."""
    if not isinstance(raw, str):
        return "" if raw is None else f"<{type(raw).__name__}>"
    return "".join(ch if ch.isprintable() or ch == " " else " " for ch in raw)[:2000]


def ask(settings: Settings, question: str, mode: str | None = None) -> Answer:
    """One-shot convenience: open, ask, close."""
    with Chatbot(settings) as bot:
        return bot.ask(question, mode)


__all__: Sequence[str] = ("Chatbot", "MODES", "ask")
