"""Run a question set through the chatbot, one fresh session per question, and score it.

Each question gets a new `Chatbot` (sharing only the read-only retrievers, the model
client and the store connection), so no conversation state can leak from one question to
the next: a turn of a conversation (eval.workbook: `conversation`, `turn`) carries its
earlier turns' questions as its history, and is asked with them (any worker can ask it);
in a store of several guidelines the question is first routed to one
(chatbot.Library), and the row records which, and whether the gold page belongs to it
(routing accuracy). Each answer carries the retrieval result it came from
(`Answer.retrieval_result`): the candidates and the whole reference, which the answer's
JSON alone does not hold.

Big sets (PARALLEL_MIN questions or more) are spread over one worker
process per core (spawned, each loading its own retriever), in batches; results are put
back in question order, so they are the same as in-process, latency aside (latencies
are measured inside each worker, with the other workers running).

The results workbook is rewritten (atomically) now and then while the run goes on and
once more at the end, also on Ctrl-C: an interrupted run leaves a valid workbook with
every question done so far, marked partial; interrupted before the first question was
done, it writes nothing (an older workbook at that path stays, untouched).
"""
from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from guiderag.errors import EvalError, GuideragError, ModelNotConfiguredError
from guiderag.processes import pool_worker_signals
from guiderag.progress import Progress
from guiderag.redact import redact
from guiderag.settings import EXTRACT, Settings
from guiderag.clock import utc_now

from . import metrics
from .workbook import IN_SCOPE, Question, write_results

if TYPE_CHECKING:  # the chatbot and retrieval load MeCab and numpy: imported when a run starts
    from guiderag.chatbot.answer import Answer
    from guiderag.chatbot.llm import LLMClient
    from guiderag.retrieval import Retriever
    from guiderag.retrieval.result import RetrievalResult

# Rewrite the workbook at most this often while a run goes on (seconds), and never more
# often than every CHECKPOINT_COST_FACTOR times what the last save took.
CHECKPOINT_MIN_S = 30.0
CHECKPOINT_COST_FACTOR = 10.0
BATCH_QUESTIONS = 25  # questions per task sent to a worker process
MAX_AUTO_WORKERS = 4
# With eval_workers 0, a set of fewer questions is answered in-process: starting workers
# (each loads MeCab and the index, a few seconds) costs more than it saves below this.
PARALLEL_MIN = 200


class EvalInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during a run: how far it got, and whether the results workbook
    now holds this run's questions done so far (marked partial) or was not touched."""

    def __init__(self, done: int, total: int, written: bool) -> None:
        super().__init__(f"interrupted after {done} of {total} questions")
        self.done = done
        self.total = total
        self.written = written


@dataclass
class RunOutcome:
    """What a run produced."""

    rows: list[dict]
    summary: dict[str, dict]
    total: int
    complete: bool
    out_path: Path | None
    meta: list[tuple[str, Any]] = field(default_factory=list)


class _PageLines:
    """The page store, and the stored lines (and titles) of cited page versions, cached,
    for the verbatim check."""

    def __init__(self, db: Path | str) -> None:
        from guiderag.store import Store

        self.store = Store(db, create=False)
        self._cache: dict[tuple[str, int], tuple[str, ...]] = {}
        self._owners: list[tuple[str, str]] | None = None

    def guideline_of(self, url: str | None) -> str | None:
        """The guideline holding the page `url` names (a site path matches any host, as in
        metrics.same_page), or None when no stored page is it."""
        if not url:
            return None
        if self._owners is None:
            self._owners = [(p.url, p.guideline) for p in self.store.current_pages(include_removed=True)]
        return next((g for page_url, g in self._owners if metrics.same_page(page_url, url)), None)

    def lines(self, url: str, version: int | None) -> tuple[str, ...]:
        url = url.split("#", 1)[0]  # a PDF passage's url names its page: …pdf#page=5
        key = (url, int(version or 0))
        if key not in self._cache:
            page = self.store.get_version(url, key[1]) if version else self.store.get_page(url)
            self._cache[key] = (page.title,) + tuple(page.lines) if page else ()
        return self._cache[key]

    def close(self) -> None:
        self.store.close()


def score(
    question: Question,
    answer: Answer,
    retrieval: RetrievalResult | None,
    latency_ms: float,
    page_lines: Callable[[str, int | None], Sequence[str]] | None,
    guideline_of: Callable[[str | None], str | None] | None = None,
) -> dict:
    """One results row from a question, its Answer and the recorded RetrievalResult;
    `guideline_of` names the guideline holding a page (for routing accuracy)."""
    data = answer.to_json()
    governed = bool(answer.governed)
    candidates = _candidates(retrieval, data)
    reference_text = retrieval.reference_text if retrieval is not None else "\n".join(
        p.get("text", "") for p in data.get("passages", [])
    )
    shown = answer.answer if governed else ""
    golds = question.golds
    row: dict[str, Any] = {
        "id": question.id,
        "question": question.question,
        "kind": question.kind,
        "reference_answer": question.reference_answer,
        "gold_url": question.gold_url,
        "gold_answers": question.gold_answers or None,
        "answer": answer.answer,
        "coverage": answer.coverage,
        "coverage_probability": data.get("coverage_probability"),
        "coverage_reasons": "\n".join(data.get("coverage_reasons") or []) or None,
        "keywords": " / ".join(answer.keywords),
        "candidates": "\n".join(f"{s:.4f} {u}" for u, s in candidates),
        "top_url": candidates[0][0] if candidates else None,
        "reference_chars": data.get("retrieval", {}).get("reference_chars", len(reference_text)),
        "answer_chars": len(shown) if governed else None,
        "latency_ms": latency_ms,
        "governed": governed,
        "refused": not governed,
        "no_candidate": not candidates,
        "verbatim": None,
        "failed": False,
        "error": answer.error,
        "guideline": (data.get("routing") or {}).get("chosen") or (data.get("guideline") or {}).get("id"),
        "json": data,
        **_turn_columns(question),
        "context": data.get("context"),
        **_model_columns(answer),
    }
    if governed and page_lines is not None:
        pool: list[str] = []
        for p in data.get("passages", []):
            pool.extend(page_lines(p["url"], p.get("version")))
        row["verbatim"] = metrics.verbatim_lines(answer.answer, pool)
    if question.kind == IN_SCOPE:
        if golds:
            row["gold_hit"] = governed and metrics.contains_any(shown, golds)
            row["answer_in_reference"] = metrics.contains_any(reference_text, golds)
        if question.gold_url:
            row["page_first"] = bool(candidates) and metrics.same_page(candidates[0][0], question.gold_url)
            if guideline_of is not None:
                row["routed_right"] = guideline_of(question.gold_url) == row["guideline"]
        if question.reference_answer:
            rl = metrics.rouge_l(shown, question.reference_answer)
            tp = metrics.token_prf(shown, question.reference_answer)
            row.update(rouge_l_p=rl.precision, rouge_l_r=rl.recall, rouge_l_f1=rl.f1,
                       token_p=tp.precision, token_r=tp.recall, token_f1=tp.f1)
    return row


def _turn_columns(question: Question) -> dict:
    """The conversation and turn of a question asked in one (none for a question alone)."""
    if question.conversation is None:
        return {}
    return {"conversation": question.conversation, "turn": question.turn}


def _model_columns(answer: Answer) -> dict:
    """What the answer model did (None in extract mode, where none is asked)."""
    use = answer.model_use.get("answer")
    summary = answer.summary
    repeats = metrics.repeats_itself(summary) if summary else None
    if use is None:
        return {"model_outcome": None, "model_fell_back": None, "model_declined": None, "summary_repeats": repeats}
    outcome: str = use["outcome"]
    return {"model_outcome": outcome + (f" ({use['code']})" if use.get("code") else ""),
            "model_fell_back": outcome == "fell_back", "model_declined": outcome == "declined",
            "summary_repeats": repeats}


def failed_row(question: Question, error: Exception, latency_ms: float) -> dict:
    """A results row for a question that raised (counted as a miss, with the message)."""
    row: dict[str, Any] = {
        "id": question.id, "question": question.question, "kind": question.kind,
        "reference_answer": question.reference_answer, "gold_url": question.gold_url,
        "gold_answers": question.gold_answers or None, "answer": "", "coverage": "error",
        "latency_ms": latency_ms, "governed": False, "refused": False, "no_candidate": None,
        "failed": True, "error": redact(f"{type(error).__name__}: {error}"),
        **_turn_columns(question),
    }
    if question.kind == IN_SCOPE:
        if question.golds:
            row.update(gold_hit=False, answer_in_reference=False)
        if question.gold_url:
            row["page_first"] = False
            row["routed_right"] = False
        if question.reference_answer:
            row.update(rouge_l_p=0.0, rouge_l_r=0.0, rouge_l_f1=0.0, token_p=0.0, token_r=0.0, token_f1=0.0)
    return row


def _candidates(retrieval: RetrievalResult | None, data: dict) -> list[tuple[str, float]]:
    """(url, score) of the candidate pages, best first."""
    if retrieval is not None:
        pairs = [(c.url, float(c.score)) for c in retrieval.candidates]
    else:
        pages = data.get("retrieval", {}).get("candidate_pages") or data.get("passages", [])
        pairs = [(p["url"], float(p.get("score") or 0.0)) for p in pages]
    seen: dict[str, float] = {}
    for url, s in pairs:
        seen[url] = max(s, seen.get(url, s))
    return sorted(seen.items(), key=lambda kv: -kv[1])


def seeded(retriever: Retriever | None) -> dict[str, Retriever] | None:
    """A retriever already loaded, by the guideline it serves (chatbot.library_cache.load_library)."""
    return {retriever.guideline: retriever} if retriever is not None else None


class _Asker:
    """Asks questions one at a time, each in a fresh Chatbot (routed to a guideline of the
    store first), and scores the answers.

    The library is the process's shared one for these settings (chatbot.library_cache),
    taken once: the whole run answers from the corpus it was loaded for. A `retriever` or
    `llm` passed in makes a library of the run's own around them instead."""

    def __init__(self, settings: Settings, mode: str, retriever: Retriever | None = None,
                 llm: LLMClient | None = None) -> None:
        from guiderag.chatbot.config import BotConfig
        from guiderag.chatbot.library_cache import load_library, shared_library

        self.settings = settings
        self.mode = mode
        self.page_lines = _PageLines(settings.store)
        self._own_library = retriever is not None or llm is not None
        try:
            config = BotConfig.of(settings)
            self.library = (load_library(config, seeded(retriever), llm) if self._own_library
                            else shared_library(config))
        except BaseException:
            self.page_lines.close()
            raise

    def ask(self, q: Question) -> dict:
        # A fresh session: a new Chatbot (Library.ask makes one), sharing only read-only or
        # pooled resources; its audit row goes through the run's store connection.
        t0 = time.perf_counter()
        try:
            # a turn of a conversation is asked with its earlier turns' questions
            history = list(q.history) if q.history else None
            ans = self.library.ask(q.question, self.mode, store=self.page_lines.store, history=history)
            latency = (time.perf_counter() - t0) * 1000.0
            return score(q, ans, ans.retrieval_result, latency, self.page_lines.lines, self.page_lines.guideline_of)
        except ModelNotConfiguredError:
            raise
        except GuideragError as exc:
            return failed_row(q, exc, (time.perf_counter() - t0) * 1000.0)

    def close(self) -> None:
        if self._own_library:
            self.library.close()
        self.page_lines.close()


_WORKER: _Asker | None = None


def _worker_init(settings: Settings, mode: str) -> None:
    """In a worker process: the pool's signals (guiderag.processes: Ctrl-C is the parent's,
    SIGTERM ends it quietly), then the pipeline, loaded once."""
    global _WORKER
    pool_worker_signals()
    from guiderag.store.connection import configure

    configure(settings.storage)  # a PostgreSQL store: the parent's pool size and bounded waits
    _WORKER = _Asker(settings, mode)


def _worker_batch(batch: list[tuple[int, Question]]) -> list[tuple[int, dict]]:
    assert _WORKER is not None
    return [(i, _WORKER.ask(q)) for i, q in batch]


def worker_count(settings: Settings, n_questions: int) -> int:
    """Processes to use: settings.eval.eval_workers, or (0) one per core for big sets."""
    if settings.eval.eval_workers > 0:
        return settings.eval.eval_workers
    if n_questions < PARALLEL_MIN:
        return 1
    return max(1, min(os.cpu_count() or 1, MAX_AUTO_WORKERS))


def run_questions(
    settings: Settings,
    questions: Sequence[Question],
    out_path: Path | None,
    *,
    mode: str | None = None,
    retriever: Retriever | None = None,
    llm: LLMClient | None = None,
    label: str = "eval",
    extra_meta: Sequence[tuple[str, Any]] = (),
) -> RunOutcome:
    """Ask every question in a fresh session; write and return the scored results.

    Big sets are spread over worker processes (see `worker_count`); each loads its own
    retriever, so a `retriever` or `llm` passed in is used only when running in-process.
    On KeyboardInterrupt the workbook is written with the questions done so far
    (marked partial), and EvalInterrupted (a KeyboardInterrupt) says so; an interrupt
    before any question was done writes nothing, leaving an older workbook as it was.
    """
    mode = mode or settings.answer.mode
    settings = settings.replace(mode=mode)
    if mode != EXTRACT and not settings.model_configured:
        raise ModelNotConfiguredError(
            f"mode {mode!r} needs a language model: set GUIDERAG_MODEL (or GUIDERAG_ANSWER_MODEL) "
            "and OPENAI_API_KEY or OPENAI_BASE_URL, or use --mode extract"
        )
    started = utc_now()
    workers = worker_count(settings, len(questions))
    asker: _Asker | None = None
    corpus_version = ""
    done: dict[int, dict] = {}
    notes = [("normalisation and tokens", metrics.TOKENS_DESCRIPTION),
             ("review categories", "hallucination: absent / present; relevance: very relevant / relevant / "
              "irrelevant; completeness: major omission / minor omission / just right / minor addition / "
              "major addition")]
    complete = False
    written = False  # this run has written out_path (a checkpoint): it is this run's file now
    last_save = time.monotonic()
    save_cost = 0.0

    def meta_base() -> list[tuple[str, Any]]:
        return [
            ("mode", mode),
            ("pipeline", settings.retrieval.pipeline),
            ("threshold", settings.retrieval.threshold),
            ("db", str(settings.storage.db)),
            ("corpus_version", corpus_version),
            ("answer_model", settings.model.answer_model if mode != EXTRACT else None),
            ("keywords_model", settings.model.keywords_model),
            ("worker_processes", workers),
            ("started_at", started),
            *extra_meta,
        ]

    def rows() -> list[dict]:
        return [done[i] for i in sorted(done)]

    def save(final: bool) -> None:
        nonlocal last_save, save_cost, written
        if out_path is None:
            return
        t0 = time.monotonic()
        status = "complete" if final and complete else f"partial: {len(done)} of {len(questions)} questions"
        current = rows()
        meta = meta_base() + [("status", status), ("questions_done", len(done)),
                              ("questions_total", len(questions)), ("written_at", utc_now())]
        write_results(out_path, current, metrics.summarize(current), meta, notes)
        written = True
        save_cost = time.monotonic() - t0
        last_save = time.monotonic()

    def checkpoint() -> None:
        if out_path is not None and time.monotonic() - last_save >= max(CHECKPOINT_MIN_S, CHECKPOINT_COST_FACTOR * save_cost):
            save(final=False)

    def finish() -> None:
        """Close, and write the results, unless nothing was done: then an older workbook at
        out_path (another run's) is left as it was, not replaced by an empty one."""
        if asker is not None:
            asker.close()
        if complete or done or written:
            save(final=True)

    try:
        if workers > 1:
            # (re)builds stale indexes once, here; not the shared library: the workers load
            # their own, and this process need not hold every retriever meanwhile
            from guiderag.chatbot.config import BotConfig
            from guiderag.chatbot.library_cache import load_library

            library = load_library(BotConfig.of(settings), seeded(retriever))
            corpus_version = library.corpus_versions()
            library.close()
        else:
            asker = _Asker(settings, mode, retriever, llm)
            corpus_version = asker.library.corpus_versions()
        with Progress(len(questions), label, enabled=settings.cli.progress) as bar:
            if asker is not None:
                for i, q in enumerate(questions):
                    done[i] = asker.ask(q)
                    bar.update(1, note=q.id)
                    checkpoint()
            else:
                _run_parallel(settings, mode, questions, workers, done, bar, checkpoint)
        complete = True
    except KeyboardInterrupt as exc:
        finish()
        raise EvalInterrupted(len(done), len(questions), written and out_path is not None) from exc
    except BaseException:
        finish()
        raise
    finish()
    final_rows = rows()
    meta = meta_base() + [("status", "complete"), ("questions_done", len(done)), ("questions_total", len(questions))]
    return RunOutcome(final_rows, metrics.summarize(final_rows), len(questions), True, out_path, meta)


def _run_parallel(
    settings: Settings,
    mode: str,
    questions: Sequence[Question],
    workers: int,
    done: dict[int, dict],
    bar: Progress,
    checkpoint: Callable[[], None],
) -> None:
    """Spread questions over worker processes in small batches; fill `done` as they finish."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    indexed = list(enumerate(questions))
    batches = [indexed[k:k + BATCH_QUESTIONS] for k in range(0, len(indexed), BATCH_QUESTIONS)]
    # spawn, not fork: the parent holds SQLite connections and threads.
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_init, initargs=(settings, mode))
    try:
        pending = {pool.submit(_worker_batch, b) for b in batches}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                try:
                    batch = fut.result()
                except BrokenProcessPool as exc:
                    raise EvalError(
                        f"a worker process of the evaluation failed ({exc}); its traceback is above. "
                        "Set GUIDERAG_EVAL_WORKERS=1 to run in this process instead"
                    ) from exc
                for i, row in batch:
                    done[i] = row
                    bar.update(1, note=row["id"])
            checkpoint()
    finally:
        # On Ctrl-C or an error: drop the batches not started; running ones finish quickly.
        pool.shutdown(wait=True, cancel_futures=True)
