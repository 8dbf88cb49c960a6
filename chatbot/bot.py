"""The Chatbot: question -> keywords -> retrieval -> extract | lines | generate -> audit -> Answer.

Order of an ask, and what each outcome records:
1. clean the question (QuestionError for nothing answerable; audited as an error row);
2. keywords from the keywords model when one is configured, else offline (retrieval's);
   model keywords may only add evidence: when the question's own words clear the threshold
   and the evidence gate but the model's keywords do not, the model's are ignored; and
   they are optional: with every model slot busy, the question's own are used at once;
3. retrieval; nothing cleared the threshold -> not covered (no model is asked);
4. the mode: extract (no model), lines (model picks numbers, we rebuild from stored lines),
   generate (the protocol; the model's text is a labelled summary beside verbatim passages);
   the model declining (「行: なし」, the insufficiency sentence) -> not covered;
5. the audit row is written, then the Answer (with its audit_id) is returned.
A model that cannot be used falls back to extract, and says so:
- a reply that arrived but cannot be shown (chatbot.replies: repeated, echoed, pasted back,
  far too long, cut off, another language; lines: no valid line number) always falls back:
  the model was reached, and the verbatim answer is safe;
- a failed answer call (unreachable, HTTP error, timeout, no free slot, empty reply, or no
  model configured for a mode that needs one) falls back when settings.fallback_to_extract
  is set, else raises ModelError after an audit row recorded it. A failed keywords call
  only costs the model's keywords: the question's own are used.
No partial or unverified model text is ever returned.

MODEL USE: `Answer.model_use[role]` (role "keywords" or "answer") says what each model
asked did: `outcome` (keywords: used | ignored | skipped | failed; answer: answered | declined |
fell_back | not_asked | failed), `reason` when it was not simply used, `shown` (what the
patient saw: lines | generate | extract | refusal), `failure` (call | reply) and `code`
(the check a reply failed), timings in ms, and for lines the lines picked and shown.
"""
from __future__ import annotations

import functools
import re
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from guiderag.errors import GuideragError, InputError, ModelBusyError, ModelError, ModelReplyError, StoreError
from guiderag.settings import COVERAGE_MODEL, EXTRACT, GENERATE, LINES, MODEL_MODES, MODES, OURS, PROTOCOL, Settings
from guiderag.retrieval.result import RetrievalResult
from guiderag.store import Store

from . import generate as gen
from . import replies
from .answer import (
    ANSWERED, DECLINED, FAILED, FELL_BACK, GOVERNED, KEYWORDS_FAILED, KEYWORDS_IGNORED, KEYWORDS_SKIPPED,
    KEYWORDS_USED, NOT_ASKED, NOT_GOVERNED, Answer,
)
from .answer_type import missing_figure
from .audit import AuditLog
from .coverage_decision import CoverageDecision, CoverageVerdict
from .coverage_reasons import rule_reason
from .extract import extract, line_coverage
from .lines import LINES_SYSTEM_PROMPT, judge_reply, lines_stop, lines_user_message, number_reference, ranked_picks
from .llm import Completion, LLMClient, Progress
from .question import clean_question
from .shown import Pick, layout, render

if TYPE_CHECKING:
    from guiderag.retrieval import Retriever
    from guiderag.retrieval.pipeline_ours import OursRetriever

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
        guideline: dict[str, str] | None = None,
        routing: dict[str, Any] | None = None,
    ) -> None:
        self.settings = settings
        # Which guideline answers ({"id", "title"}; None: the retriever's, looked up when
        # asked) and how it was chosen (chatbot.library routes above this class).
        self.guideline = guideline
        self.routing = routing
        self._retriever = retriever
        self.llm = llm or LLMClient(settings)
        # The audit table lives in the page store's file. create=False: asking against a
        # store that does not exist must not leave an empty database behind.
        self._own_store = store is None
        self.store = store or Store(settings.store, create=False)
        self.audit = AuditLog(self.store.conn)
        self._analyzer: Callable[[str], list[str]] | None = None
        self._decision: CoverageDecision | None = None

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

    def _model_decides(self, result: RetrievalResult) -> bool:
        """Whether the coverage model decides (settings.coverage_decision; the ours pipeline)."""
        return self.settings.coverage_decision == COVERAGE_MODEL and result.pipeline == OURS

    def decision(self, *, refresh: bool = False) -> CoverageDecision:
        """The coverage model of this guideline: its calibration when the store holds one
        (read when this Chatbot first decides, or again with `refresh`: a new calibration
        reaches the next ask), else the shipped model of its form."""
        if self._decision is None or refresh:
            self._decision = CoverageDecision.for_retriever(self._ours(), self.store)
        return self._decision

    def _ours(self) -> OursRetriever:
        """The retriever, as the ours pipeline's (what the coverage model measures: only its
        results are decided by the model, _model_decides)."""
        return cast("OursRetriever", self.retriever)

    def _judge(self, question: str, result: RetrievalResult, keywords: Sequence[str] = ()) -> CoverageVerdict:
        """The coverage model's verdict; `keywords`: a model's, which may only raise P (the
        question's own offline keywords are its words already, as the model was fitted)."""
        cut = self.settings.coverage_operating_point
        return self.decision().judge(question, result, self._ours(), self._analyze(), None if cut < 0 else cut,
                                     keywords=keywords)

    def _verdict(self, question: str, result: RetrievalResult,
                 state: dict[str, Any]) -> tuple[CoverageVerdict, dict[str, Any]]:
        """The coverage model's verdict on `result` (kept in `state`) and the retrieval JSON
        that records it."""
        verdict = state.get("verdict") or self._judge(question, result)
        state["verdict"] = verdict
        rjson = self._retrieval_json(result)
        rjson["coverage_model"] = verdict.to_json()
        return verdict, rjson

    def _analyze(self) -> Callable[[str], list[str]]:
        """The retriever's analyzer, cached (the same reference lines recur)."""
        if self._analyzer is None:
            self._analyzer = functools.lru_cache(maxsize=ANALYSIS_CACHE)(self.retriever.analyze)
        return self._analyzer

    def _idf(self) -> Callable[[str], float]:
        return self.retriever.idf

    # -- asking -------------------------------------------------------------------
    def ask(self, question: str, mode: str | None = None, *, progress: Progress | None = None) -> Answer:
        """Answer one question on its own (no history). The audit row is written first.

        `progress(stage, chars)` hears where the answer is: "keywords" and "answering" (a
        model is writing; chars so far), "queued" (waiting for a free model slot)."""
        started = time.perf_counter()
        mode = mode or self.settings.mode
        state: dict[str, Any] = {"keywords": [], "result": None, "keywords_model": None,
                                 "model_use": {}, "replies": {}, "progress": progress}
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
        except ModelReplyError as exc:  # the model answered, unusably: always the verbatim answer
            answer = self._fallback(text, mode, exc, state, failure="reply")
        except ModelError as exc:
            if not self.settings.fallback_to_extract:
                self._use_failed(state, exc, FAILED, mode)
                self._record_error(text, exc, mode, state, started)
                raise
            answer = self._fallback(text, mode, exc, state, failure="call")
        except StoreError:
            raise
        except Exception as exc:  # a bug or an unexpected failure: still leave a trace
            self._record_error(text, exc, mode, state, started)
            raise
        answer.notes = list(cleaned.notes) + answer.notes
        verdict = state.get("verdict")
        if verdict is not None:
            answer.coverage_probability = round(verdict.probability, 4)
            answer.coverage_reasons = list(verdict.reasons)
        elif answer.coverage_reasons == [] and not answer.governed:
            answer.coverage_reasons = [rule_reason(answer.retrieval)]
        answer.attach_guideline(self._guideline_ref(), self.routing)
        answer.retrieval_result = state["result"]
        answer.model_use = state["model_use"]
        answer.model_replies = state["replies"]
        answer.latency_ms = (time.perf_counter() - started) * 1000.0
        answer.audit_id = self.audit.record(
            answer, requested_mode=mode, keywords_model=state["keywords_model"]
        )
        return answer

    def _answer(self, question: str, mode: str, state: dict[str, Any]) -> Answer:
        if mode != EXTRACT:
            self.llm.require("answer")  # ModelNotConfiguredError before any work
        keywords = self._keywords(question, state)
        result = self._search(question, keywords, state)
        state["result"] = result
        state["keywords"] = list(result.keywords)
        if self._model_decides(result):
            verdict, rjson = self._verdict(question, result, state)
            if not verdict.covered:
                self._not_asked(state, mode, f"the coverage model refused it (P(governed) {verdict.probability:.3f} "
                                f"below {verdict.operating_point:.3f})")
                return self._refusal(question, mode, result, rjson)
        elif not result.governed:
            self._not_asked(state, mode, "nothing in the guideline cleared the retrieval threshold")
            return self._refusal(question, mode, result, self._retrieval_json(result))
        else:
            covered, rjson = self._gate(question, result)
            if not covered:
                self._not_asked(state, mode, "the question asks for a figure no reference line gives"
                                if "asked_figure_missing" in rjson else
                                "no reference line speaks to enough of the question (evidence gate)")
                return self._refusal(question, mode, result, rjson)
        if mode == EXTRACT:
            return self._extract(question, result, rjson)
        if mode == LINES:
            return self._lines(question, result, rjson, state)
        return self._generate(question, result, rjson, state)

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
        from guiderag.retrieval.keywords import (KEYWORD_COUNT, MODEL_TERMS, guide_terms_prompt, keyword_prompt,
                                                 parse_keywords)

        if self.settings.pipeline == PROTOCOL:  # the published prompt
            count = KEYWORD_COUNT
            system, user = keyword_prompt(question, count)
        else:  # the guideline's words for the question; they may only add evidence
            count = MODEL_TERMS
            system, user = guide_terms_prompt(question, count)
        state["keywords_model"] = self.llm.model_for("keywords")
        try:
            reply = self._call(state, "keywords", system, user, max_tokens=KEYWORDS_MAX_TOKENS,
                               stop_when=_lines_read(count),
                               queue_timeout_s=self.settings.keywords_queue_timeout_s).text
        except ModelError as exc:  # optional: a busy or failing model costs only them
            busy = isinstance(exc, ModelBusyError)
            self._use(state, "keywords", KEYWORDS_SKIPPED if busy else KEYWORDS_FAILED,
                      reason=f"{exc}; the question's own keywords were used", **({} if busy else {"failure": "call"}))
            return None
        keywords = parse_keywords(reply, count)
        self._use(state, "keywords", KEYWORDS_USED if keywords else KEYWORDS_IGNORED, keywords=keywords,
                  **({} if keywords else {"reason": "no keyword could be read from the reply"}))
        return keywords or None  # nothing usable: offline keywords

    def _search(self, question: str, keywords: list[str] | None, state: dict[str, Any]) -> RetrievalResult:
        """Retrieval with the model's keywords, which may only add evidence: when they leave
        the question refused (threshold or evidence gate) but its own words would not, the
        question's own keywords are used. The protocol pipeline stays as published."""
        result: RetrievalResult = self.retriever.search(question, keywords)
        if keywords is None or result.pipeline == PROTOCOL or self._passes(question, result, state, keywords):
            return result
        own: RetrievalResult = self.retriever.search(question, None)
        if not self._passes(question, own, state):
            self._passes(question, result, state, keywords)  # neither passes: the keywords' result decides
            return result
        self._use(state, "keywords", KEYWORDS_IGNORED, keywords=list(keywords), reason=(
            f"the model's keywords left the question below the threshold or the evidence gate "
            f"(top score {result.top_score:.3f}), its own words do not ({own.top_score:.3f}): "
            f"used {list(own.keywords)}"))
        return own

    def _passes(self, question: str, result: RetrievalResult, state: dict[str, Any] | None = None,
                keywords: Sequence[str] = ()) -> bool:
        """Whether a retrieval would be answered: the coverage model's verdict (kept in
        `state` for the answer), else over the threshold and through the gate."""
        if self._model_decides(result):
            verdict = self._judge(question, result, keywords)
            if state is not None:
                state["verdict"] = verdict
            return verdict.covered
        if not result.governed:
            return False
        coverage = self._evidence(question, result)
        return coverage is None or coverage >= self.settings.min_line_coverage

    # -- modes ----------------------------------------------------------------------
    def _extract(
        self, question: str, result: RetrievalResult, rjson: dict[str, Any], *, error: str | None = None
    ) -> Answer:
        text, shown = extract(
            question, result.keywords, result.passages, self.settings.answer_chars,
            self._analyze(), self._idf(),
            slots=(self._slots(question, result) or [None])[-1],
        )
        if not text:
            return self._refusal(question, EXTRACT, result, rjson, error=error)
        return Answer(
            question=question, keywords=list(result.keywords), mode=EXTRACT, coverage=GOVERNED,
            answer=text, passages=shown, retrieval=rjson, error=error,
        )

    def _lines(
        self, question: str, result: RetrievalResult, rjson: dict[str, Any], state: dict[str, Any]
    ) -> Answer:
        reference = number_reference(result.passages)
        model = self.llm.model_for("answer")
        completion = self._call(
            state, "answer", LINES_SYSTEM_PROMPT, lines_user_message(reference, question),
            max_tokens=self.settings.lines_max_tokens, stop_when=lines_stop([LINES_SYSTEM_PROMPT]),
        )
        verdict = judge_reply(completion.text, reference, [LINES_SYSTEM_PROMPT])
        if verdict.declined:
            self._use(state, "answer", DECLINED, shown="refusal", reason="the model named no line (「行: なし」)")
            return self._refusal(question, LINES, result, rjson, model=model)
        if verdict.problem is not None:
            raise ModelReplyError(f"the model's line selection cannot be used: {verdict.problem.reason}",
                                  verdict.problem.code)
        budget = self.settings.answer_chars
        text, shown = render(ranked_picks(reference, verdict.numbers), budget)
        wanted = {(nl.page.url, nl.page.version, nl.line) for n in verdict.numbers if (nl := reference.get(n))}
        kept = sum(1 for p in shown for n in p.lines if (p.url, p.version, n) in wanted)
        extra: dict[str, Any] = {"lines_picked": len(wanted), "lines_shown": kept}
        if kept < len(wanted):
            extra["reason"] = (f"the model picked {len(wanted)} lines; the {kept} highest-ranked that fit "
                               f"the {budget}-character answer are shown")
        self._use(state, "answer", ANSWERED, shown="lines", **extra)
        return Answer(
            question=question, keywords=list(result.keywords), mode=LINES, coverage=GOVERNED,
            answer=text, passages=shown, retrieval=rjson, model=model,
        )

    def _generate(
        self, question: str, result: RetrievalResult, rjson: dict[str, Any], state: dict[str, Any]
    ) -> Answer:
        # The protocol pipeline keeps its literal reference; ours sends whole lines.
        reference = getattr(result, "literal_reference", None) or result.reference_text
        model = self.llm.model_for("answer")
        system = gen.system_prompt(self.settings.answer_chars)
        max_chars = int(self.settings.answer_chars * self.settings.summary_max_factor)
        completion = self._call(
            state, "answer", system, gen.user_message(reference, question),
            max_tokens=self.settings.answer_max_tokens,
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
            self._use(state, "answer", DECLINED, shown="refusal",
                      reason="the model said the reference does not answer the question")
            return self._refusal(question, GENERATE, result, rjson, model=model)
        summary = reply.strip()
        _, shown = layout(Pick(p.page, n, float(p.score)) for p in result.passages for n in p.lines)
        self._use(state, "answer", ANSWERED, shown="generate")
        return Answer(
            question=question, keywords=list(result.keywords), mode=GENERATE, coverage=GOVERNED,
            answer=summary, passages=shown, retrieval=rjson, summary=summary,
            unsupported_sentences=gen.unsupported_sentences(summary, reference, self._analyze()),
            model=model,
        )

    # -- the model calls and what they did ------------------------------------------
    def _call(
        self, state: dict[str, Any], role: str, system: str, user: str, *, max_tokens: int,
        stop_when: Callable[[str], str | None] | None = None, queue_timeout_s: float | None = None,
    ) -> Completion:
        """One model call for a role, its progress reported and its raw reply kept for the audit."""
        progress = state.get("progress")
        stage = "keywords" if role == "keywords" else "answering"

        def report(what: str, chars: int) -> None:
            if progress is not None:
                progress("queued" if what == "queued" else stage, chars)

        report(stage, 0)
        completion = self.llm.chat(
            system, user, role=role, temperature=gen.TEMPERATURE, max_tokens=max_tokens, n=gen.N,
            progress=report, stop_when=stop_when, queue_timeout_s=queue_timeout_s,
        )
        state["replies"][role] = completion.text
        state.setdefault("timing", {})[role] = {
            "ms": round(completion.seconds * 1000.0, 1),
            "queued_ms": round(completion.queued_s * 1000.0, 1),
            "finish_reason": completion.finish_reason,
            **({"stopped_reading": completion.stopped} if completion.stopped else {}),
        }
        return completion

    def _use(self, state: dict[str, Any], role: str, outcome: str, **fields: Any) -> None:
        """Record what the model of a role did (Answer.model_use)."""
        use = {"model": self.llm.model_for(role), "outcome": outcome}
        use.update(state.get("timing", {}).get(role, {}))
        use.update(fields)
        state["model_use"][role] = use

    def _not_asked(self, state: dict[str, Any], mode: str, why: str) -> None:
        if mode in MODEL_MODES:
            self._use(state, "answer", NOT_ASKED, shown="refusal", reason=why)

    def _use_failed(self, state: dict[str, Any], exc: ModelError, outcome: str, mode: str,
                    shown: str | None = None) -> None:
        """A failed answer call (or no answer model configured): `outcome` is fell_back, or
        failed when nothing is shown."""
        if mode in MODEL_MODES:
            fields: dict[str, Any] = {"failure": "call", "reason": str(exc)}
            if shown is not None:
                fields["shown"] = shown
            self._use(state, "answer", outcome, **fields)

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

    def _fallback(
        self, question: str, mode: str, exc: ModelError, state: dict[str, Any], *, failure: str
    ) -> Answer:
        """The model could not be used: answer offline (extract), saying why."""
        if failure == "reply":
            note = f"{mode} mode: {exc}; answered with extract instead"
        else:
            note = f"{mode} mode failed ({exc}); answered with extract instead"
        result = state.get("result")
        if result is None:  # failed before retrieval (no answer model configured): offline keywords
            result = self.retriever.search(question, None)
            state["result"] = result
            state["keywords"] = list(result.keywords)
        answer = self._offline(question, result, note, state)
        shown = "extract" if answer.governed else "refusal"
        if failure == "reply":
            self._use(state, "answer", FELL_BACK, failure="reply", code=getattr(exc, "code", "unusable"),
                      reason=str(exc), shown=shown)
        else:
            self._use_failed(state, exc, FELL_BACK, mode, shown)
        return answer

    def _offline(self, question: str, result: RetrievalResult, note: str, state: dict[str, Any] | None = None) -> Answer:
        if self._model_decides(result):
            verdict, rjson = self._verdict(question, result, state if state is not None else {})
            if not verdict.covered:
                return self._refusal(question, EXTRACT, result, rjson, error=note)
            return self._extract(question, result, rjson, error=note)
        if not result.governed:
            return self._refusal(question, EXTRACT, result, error=note)
        covered, rjson = self._gate(question, result)
        if not covered:
            return self._refusal(question, EXTRACT, result, rjson, error=note)
        return self._extract(question, result, rjson, error=note)

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
        self, question: str, exc: BaseException, mode: str | None, state: dict[str, Any], started: float
    ) -> None:
        result = state.get("result")
        guideline = self._guideline_ref()
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
            guideline=guideline["id"] if guideline else None,
            routing=self.routing,
            model_use=state.get("model_use") or {},
            model_replies=state.get("replies") or {},
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


def ask(settings: Settings, question: str, mode: str | None = None) -> Answer:
    """One-shot convenience: open, ask, close."""
    with Chatbot(settings) as bot:
        return bot.ask(question, mode)


__all__: Sequence[str] = ("Chatbot", "MODES", "ask")
