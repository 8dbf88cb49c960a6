"""Every setting of guiderag, declared once, in the frozen config of the stage it belongs to.

Each field declared with `setting(default, help, ...)` is a setting (guiderag/registry.py:
its environment variable, CLI flag, rules, whether it is a secret); `Settings`
(guiderag/settings.py) is composed of these configs, so that a stage can be handed only
its own (`settings.retrieval`). A field without `setting()` is derived, not configurable.
docs/settings.md is generated from these declarations (`guiderag config --markdown`).

Knobs no deployment should turn are constants beside the code that uses them, with what
was measured (the ranking formula's parameters in retrieval/scoring.py, query.py,
bm25.py, passages.py; the heading rule in store/structure.py; the benchmark's split in
eval/jsquad.py).
"""
from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path

from .guideline import GUIDELINE_ID_RULE, is_guideline_id
from .redact import redact_url
from .registry import NOT_EMPTY, Check, above, at_least, between, one_of, setting
from .resources import default_db, is_postgres_url, shared_store_anchor

# Names defined once: answer modes (extract needs no model) and retrieval pipelines.
EXTRACT, LINES, GENERATE = "extract", "lines", "generate"
MODES = (EXTRACT, LINES, GENERATE)
MODEL_MODES = (LINES, GENERATE)
OURS, PROTOCOL = "ours", "protocol"
PIPELINES = (OURS, PROTOCOL)
# Who decides whether a guideline governs a question (settings.coverage_decision).
COVERAGE_MODEL, COVERAGE_RULES = "model", "rules"
COVERAGE_DECISIONS = (COVERAGE_MODEL, COVERAGE_RULES)

DEFAULT_REFUSAL = (
    "申し訳ありません。このご質問に答えられる内容は、このガイドラインには書かれていません。"
)
DEFAULT_ESCALATION = (
    "詳しくは、担当の医師・看護師などの医療チーム、またはお近くのがん診療連携拠点病院の"
    "「がん相談支援センター」にご相談ください。"
)
DEFAULT_CAPPED = "ご質問が長いため、最初の{limit}文字までを使って回答しています（元の長さ {chars} 文字）。"


def _formats(*names: str) -> Check:
    """A message template that may use {name} for each of `names` and nothing else."""
    def test(text: str) -> bool:
        try:
            text.format(**{n: 0 for n in names})
        except (KeyError, IndexError, ValueError):
            return False
        return True
    return Check(test, "a text whose only {placeholders} are " + ", ".join("{" + n + "}" for n in names))


def _is_timezone(name: str) -> bool:
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


_ORIGIN = re.compile(r"https?://[^/\s]+", re.I)  # matched whole (fullmatch: `$` lets a trailing newline by)
_ORIGINS = Check(lambda v: all(o.strip() == "*" or _ORIGIN.fullmatch(o.strip()) for o in v.split(",") if o.strip()),
                 "comma-separated origins such as https://portal.example.org (scheme and host, no path), or *")
_HTTP_URL = Check(lambda v: str(v).lower().startswith(("http://", "https://")), "an http:// or https:// URL")
_GUIDELINE = Check(lambda v: v == "" or is_guideline_id(v), GUIDELINE_ID_RULE)


@dataclass(frozen=True)
class StoreConfig:
    """Where the corpus lives and which guideline a command works on."""

    # --db / GUIDERAG_DB may be a postgresql://user@host:port/dbname URL: the shared store
    # is then `store_url`, and `db` a local anchor for what is kept on this machine beside
    # a store (index, URL workbook, check status: resources.shared_store_anchor).
    db: Path = setting(Path(), "the page store: an SQLite file, or a postgresql:// URL of a shared store",
                       flag="--db", factory=default_db, default_doc="$XDG_DATA_HOME/guiderag/guiderag.db "
                       "(~/.local/share/guiderag/guiderag.db)")
    index_root: Path | None = setting(
        None, "keep the retrieval indexes under this folder (e.g. a volume replicas share) instead of beside the store")
    guideline: str = setting(
        "", "the guideline commands work on (unset: the store's only one; for `ask`, the one routing chooses)",
        flag="--guideline", flag_help=False, check=_GUIDELINE)
    max_age_hours: float = setting(
        0.0, "a corpus older than this (hours since its last good scrape) is a divergence for `check` and a "
        "warning in the chat; 0: no age limit", flag="--max-age", check=at_least(0))
    # A PostgreSQL server forks a process per connection, so each replica reuses a few.
    pg_pool_size: int = setting(10, "a PostgreSQL store: the most connections one process keeps open to it",
                                check=at_least(1))
    # Bounded waits on a PostgreSQL store (store/pg.py), each a StoreTimeoutError saying which
    # ran out (the API answers it with 503); no 0 for "for ever". libpq counts the connect
    # timeout in whole seconds, at least 2, per address of the host.
    pg_connect_timeout_s: int = setting(10, "a PostgreSQL store: seconds a new connection may take",
                                        check=at_least(2))
    pg_statement_timeout_s: float = setting(
        30.0, "a PostgreSQL store: seconds a statement may take (the server's statement_timeout; a server that "
        "does not answer at all is given up 1 s later)", check=above(0))
    pg_pool_timeout_s: float = setting(10.0, "a PostgreSQL store: seconds a request waits for a free connection "
                                       "of its process's pool", check=above(0))
    store_url: str | None = field(default=None, repr=False)  # derived from db, not a setting

    def __post_init__(self) -> None:
        location = self.db
        if isinstance(location, str) and is_postgres_url(location):
            object.__setattr__(self, "store_url", location)
            object.__setattr__(self, "db", shared_store_anchor(location))
        elif isinstance(location, str):
            object.__setattr__(self, "db", Path(location))

    @property
    def store(self) -> Path | str:
        """What Store() opens: the PostgreSQL URL of a shared store, else the SQLite file."""
        return self.store_url or self.db

    @property
    def store_name(self) -> str:
        """The store as messages name it (a URL without its password)."""
        return redact_url(self.store_url) if self.store_url else str(self.db)


@dataclass(frozen=True)
class ScraperConfig:
    """How guideline sites are fetched (`scrape`, `check`)."""

    user_agent: str = setting("guiderag/0.1 (clinical-guideline chatbot; polite crawler)",
                              "the User-Agent sent to guideline sites (name a contact for the site's operators)",
                              check=NOT_EMPTY)
    timeout_s: float = setting(15.0, "seconds per socket operation of a fetch (connect, each read)", check=above(0))
    # A server trickling bytes (each read within timeout_s), even inside its headers, fails
    # the page; the run goes on (scraper.deadline.Deadline).
    fetch_deadline_s: float = setting(120.0, "seconds a fetch may take from connecting to the last byte (status "
                                      "line, headers, body)",
                                      check=above(0))
    # A site asking for more is left alone: the scrape is abandoned (the previous corpus
    # kept) rather than hammering it.
    retry_after_max_s: float = setting(120.0, "the longest Retry-After (429, 503) waited for; a site asking "
                                       "more ends the scrape", check=at_least(0))
    max_pages: int = setting(2000, "at most this many guide pages per scrape or check (a TOC listing more is "
                             "refused before anything is fetched); 0: no limit", check=at_least(0))
    retries: int = setting(3, "attempts after the first for a page failing with a connection error, 429 or 5xx",
                           check=at_least(0))
    backoff_s: float = setting(0.5, "seconds before the first retry (doubled each time)", check=at_least(0))
    delay_s: float = setting(0.5, "seconds between requests to a site", flag="--delay", check=at_least(0))
    max_page_bytes: int = setting(5_000_000, "a page larger than this many bytes fails", check=above(0))
    urls_xlsx: Path | None = setting(
        None, "the URL workbook a scrape reads hand edits (include, category) from, and rewrites", flag="--urls-xlsx",
        default_doc="<db stem>.urls.xlsx beside the store (<db stem>.<id>.urls.xlsx for another guideline)")
    # `scrape --force` turns it off, so that a change of the text-extraction rules reaches
    # pages the server says are unchanged.
    conditional_get: bool = setting(True, "send If-None-Match / If-Modified-Since (off: --force)",
                                    flag="--force", flag_help=False)
    # Connection errors or 5xx after retries, in a row: the site went down, and the scrape
    # is aborted with the previous corpus kept as it was.
    abort_after_failures: int = setting(3, "this many pages failing in a row abort the scrape (the previous "
                                        "corpus kept); 0: never", check=at_least(0))
    # PDF documents (scraper/pdf.py) are read in a worker process of their own, with an
    # address-space and CPU limit; a refused PDF fails its page, its previous version stays.
    pdf_max_bytes: int = setting(50_000_000, "a PDF larger than this many bytes is refused unread (an HTML "
                                 "page's limit is max_page_bytes)", check=above(0))
    pdf_max_pages: int = setting(1000, "a PDF of more pages than this is refused before its text is read",
                                 check=above(0))
    # A stream inflating past this is a decompression bomb (scraper/pdfscan.py).
    pdf_max_stream_bytes: int = setting(100_000_000, "a PDF with a stream inflating to more bytes than this is "
                                        "refused as a decompression bomb", check=above(0))
    pdf_memory_mb: int = setting(2048, "megabytes of address space the worker reading one PDF may use",
                                 check=above(0))
    pdf_timeout_s: float = setting(120.0, "seconds the worker may take to read one PDF (its CPU time too)",
                                   check=above(0))


@dataclass(frozen=True)
class RetrievalConfig:
    """Which passages form the reference, and when a question is not covered."""

    pipeline: str = setting(OURS, "the retrieval pipeline: ours, or protocol (the published one, literal)",
                            flag="--pipeline", check=one_of(PIPELINES))
    threshold: float = setting(0.2, "a passage scoring below this is not evidence; none above it: the refusal",
                               flag="--threshold", check=between(0, 1))
    reference_chars: int = setting(4096, "the reference handed to an answer: at most this many characters, "
                                   "whole lines", check=at_least(200))
    synonyms: Path | None = setting(None, "the maintainer's synonym table (TSV), applied at index and query time "
                                    "(default: the bundled data/synonyms.tsv)")
    # A word the corpus never uses weighs by how specific it is in general Japanese
    # (retrieval.specificity): fully when rare, this much when everyday (髪, 戻る).
    specific_min_weight: float = setting(0.1, "weight of an everyday word the guideline never uses, against a "
                                         "rare one; 1 turns the specificity weighting off", check=between(0, 1))
    # 0.25 measured (issue 11): 1.0 answered 2 fewer in-scope patient questions and one more
    # other-disease one; JSQuAD out-of-scope refused 0.923 -> 0.921.
    frame_word_weight: float = setting(0.25, "weight of a word naming the kind of answer asked for (違い, 方法, "
                                       "時期) in a query", check=between(0, 1))
    patient_table: Path | None = setting(None, "the table of patient expressions (TSV) expanded at query time "
                                         "(default: the bundled data/patient_terms.tsv)")
    patient_table_weight: float = setting(0.8, "weight of a patient-table expansion against an exact match; "
                                          "0 turns it off", check=between(0, 1))
    synonym_dict_weight: float = setting(0.6, "weight of a Sudachi synonym of a word the guideline never uses; "
                                         "0 turns it off", check=between(0, 1))
    # Off by default, measured (issue 11, round 3): 0.8 on JSQuAD answered 2 more in-scope
    # questions (京都市長, 経済特区) and 1 more out-of-scope one (ロマン主義, inside
    # 新ロマン主義), out-of-scope refused 0.923 -> 0.921; no change on the patient sets.
    compound_parts_weight: float = setting(
        0.0, "weight of a compound the guideline never writes (胃切除) found where one line says its words next "
        "to each other; 0: off", check=between(0, 1))
    # Measured on the patient-worded sets (issue 11): with 0.5 and 1.14 the gastric set's
    # in-scope gold shown went 0.58 -> 0.72 (lay 0.50 -> 0.67) with every out-of-scope
    # category refused >= 0.96; JSQuAD's pages are articles, no Q&A pages: unchanged.
    qa_page_weight: float = setting(0.5, "share of the whole page's score in a passage of a Q&A page (a title "
                                    "that asks, or Q12); 0 turns it off", check=between(0, 1))
    qa_threshold_exponent: float = setting(
        1.14, "a Q&A page's passage clears threshold ** this (0.2 -> 0.16); 1: the threshold of every page",
        check=at_least(1))
    # Issue 20: the coverage model measures questions below the threshold too (it decides
    # whether the guideline governs them); the reference of such a question is the passages
    # over this floor. 0.01 keeps every passage sharing a word with the question.
    reference_floor: float = setting(
        0.01, "none clearing the threshold, the passages scoring at least this are the reference the coverage "
        "model weighs (0: none, a refusal at once)", check=between(0, 1))
    max_candidates: int = setting(100, "at most this many candidate pages listed in an answer's retrieval "
                                  "(the best ones; the total is kept)", check=at_least(1))
    index_workers: int = setting(2, "processes analysing a large corpus when building an index (0 or 1: this "
                                 "process alone)", check=at_least(0))


@dataclass(frozen=True)
class AnswerConfig:
    """How an answer is made from the reference, and what a refusal says."""

    mode: str = setting(EXTRACT, "the answer mode: extract (verbatim lines, no model), lines (the model picks "
                        "lines) or generate (the model's summary, labelled)", flag="--mode", check=one_of(MODES))
    answer_chars: int = setting(500, "an answer is about this many characters (whole lines)", check=at_least(1))
    max_question_chars: int = setting(500, "a longer question is answered from its first this many characters, "
                                      "and says so", check=at_least(1))
    refusal_message: str = setting(DEFAULT_REFUSAL, "the answer when the guideline does not cover the question")
    escalation_text: str = setting(DEFAULT_ESCALATION, "where to ask instead, shown with a refusal")
    # Issue 20: the coverage model (data/coverage_model.json, or the guideline's own from
    # `guiderag calibrate`) decides; "rules" is the decision before it: the threshold,
    # min_line_coverage and require_asked_figure below.
    coverage_decision: str = setting(
        COVERAGE_MODEL, "who decides whether the guideline governs a question: model (the coverage model) or rules "
        "(the threshold, min_line_coverage, require_asked_figure)",
        check=one_of(COVERAGE_DECISIONS))
    # For evaluation sweeps (devbench's refusal curves answer with 0 and cut afterwards).
    coverage_operating_point: float = setting(
        -1.0, "refuse below this P(governed) instead of the coverage model's own operating point (shipped or "
        "calibrated); -1: its own", check=Check(lambda v: v == -1.0 or 0.0 <= v <= 1.0,
                                                        "-1, or a probability between 0 and 1"))
    # 0.5 measured (issue 11, devbench curves): on JSQuAD 0.45 refused 0.919 of out-of-scope
    # questions, 0.5 0.925 with gold in the answer 0.947; the patient set's in-scope
    # answers hardly move between them (the threshold, not the gate, refuses most).
    min_line_coverage: float = setting(
        0.5, "not covered unless one reference line (with its page title) holds this share of the question's "
        "weight (the `ours` pipeline, every mode); 0 turns it off", check=between(0, 1))
    # Measured (issue 11): the sample set's two answered out-of-scope questions and the
    # gastric set's not_covered one are refused; one gastric in-scope question with them.
    require_asked_figure: bool = setting(
        True, "a question asking when, how long, how often or how much is covered only where the guideline "
        "gives such a figure")
    question_capped_message: str = setting(DEFAULT_CAPPED, "the note shown when a question was cut to "
                                           "max_question_chars ({limit}, {chars})", check=_formats("limit", "chars"))
    # A follow-up leans on the last few questions; the API refuses a longer history (422).
    history_max_turns: int = setting(5, "a follow-up is read with at most this many earlier questions of its "
                                     "conversation (the last ones); the API refuses more, the chat sends "
                                     "the last ones", check=at_least(1))


@dataclass(frozen=True)
class ModelConfig:
    """The OpenAI-compatible language model, its budgets, and what happens when it fails."""

    openai_api_key: str | None = setting(None, "the API key of the OpenAI-compatible endpoint",
                                         env="OPENAI_API_KEY", secret=True)
    openai_base_url: str | None = setting(None, "the endpoint's base URL (vLLM, Ollama, llama.cpp: "
                                          "http://host:port/v1); default: OpenAI's", env="OPENAI_BASE_URL",
                                          check=_HTTP_URL)
    keywords_model: str | None = setting(None, "the model asked for keywords and topic selection (unset: "
                                         "offline keywords)", aliases=("GUIDERAG_MODEL",))
    answer_model: str | None = setting(None, "the model of the lines and generate modes (GUIDERAG_MODEL sets "
                                       "both model names)", aliases=("GUIDERAG_MODEL",))
    model_timeout_s: float = setting(30.0, "seconds one model call may take, from sending to the last word",
                                     check=above(0))
    model_retries: int = setting(2, "retries of a failed model call (connection error, timeout, 429, 5xx)",
                                 check=at_least(0))
    # (A reply that arrived but cannot be shown always falls back: see chatbot.replies.)
    fallback_to_extract: bool = setting(False, "answer with extract when the model is unreachable, fails or "
                                        "times out, instead of an error (recommended with a local model)")
    # Nothing streamed is shown before the whole reply passed its checks.
    model_stream: bool = setting(True, "read replies as a stream: a reply turning degenerate is stopped there, "
                                 "not run on to max_tokens")
    # Set it to what the server runs in parallel: 1 for llama-cpp-python's server.
    model_concurrency: int = setting(4, "model calls at once from this process (the others wait); 0: no limit",
                                     check=at_least(0))
    model_queue_timeout_s: float = setting(30.0, "seconds a call waits for a free model slot, then counts as "
                                           "a failed call", check=at_least(0))
    # Model keywords may only add evidence: a busy model must not hold up questions that
    # need no model answer.
    keywords_queue_timeout_s: float = setting(0.0, "seconds a keywords call waits for a slot before the "
                                              "question's own keywords are used", check=at_least(0))
    answer_max_tokens: int = setting(1024, "the reply budget of generate (the protocol's 1024 tokens)",
                                     check=at_least(1))
    lines_max_tokens: int = setting(96, "the reply budget of a lines selection", check=at_least(1))
    summary_max_factor: float = setting(2.0, "a summary longer than answer_chars times this is degenerate, "
                                        "not an answer", check=above(1))

    @property
    def configured(self) -> bool:
        """True when an answer model and credentials (or a local base URL) are set."""
        return bool(self.answer_model and (self.openai_api_key or self.openai_base_url))


@dataclass(frozen=True)
class ApiConfig:
    """The HTTP API (`guiderag serve`)."""

    api_key: str | None = setting(None, "when set, every /v1 request must send `Authorization: Bearer <key>` "
                                  "(/healthz and /readyz stay open)", secret=True)
    api_max_body_bytes: int = setting(65_536, "a request body larger than this is refused (413) before it is "
                                      "read whole", check=at_least(1024))
    api_max_question_chars: int = setting(10_000, "a longer question is refused (422); up to it, the first "
                                          "max_question_chars are answered", check=at_least(1))
    api_cors_origins: str = setting("", "origins allowed to call the API from a browser (comma-separated); "
                                    "empty: no CORS headers", check=_ORIGINS)
    api_workers: int = setting(2, "uvicorn processes `serve` answers with, on one port (one process runs "
                               "one request's Python at a time: about one core each)", flag="--workers",
                               check=at_least(1))
    api_answer_threads: int = setting(1, "threads per `serve` process for answers that wait on no model: they "
                                      "hold the GIL throughout, so more threads only contend", check=at_least(1))
    api_preload: bool = setting(True, "with several workers, load the index once before forking them "
                                "(they share it in memory and start ready); off: each worker loads its own")
    # /readyz touches the store and may load the indexes; the probe must answer a load
    # balancer in time whatever the store does (a hung PostgreSQL): api/health.py.
    api_ready_timeout_s: float = setting(2.0, "/readyz answers within this many seconds: a store (or an index load) "
                                         "not answering by then is reported not ready (503)", check=above(0))
    # uvicorn bounds neither a request's headers nor its body: api/protocol.py does.
    api_request_timeout_s: float = setting(30.0, "a client must send its whole request (headers, body) within this "
                                           "many seconds, else it gets 408 and is disconnected", check=above(0))


@dataclass(frozen=True)
class ChatConfig:
    """The chat page (`guiderag chat`, app.py)."""

    # Never a store someone configured (--db, GUIDERAG_DB, PostgreSQL): ui.bootstrap.needs_bootstrap.
    sample_on_empty: bool = setting(True, "fill the default store (no --db / GUIDERAG_DB) with the bundled sample "
                                    "guideline while it never held a page")
    display_timezone: str = setting("Asia/Tokyo", "the time zone of dates shown to users (an IANA name)",
                                    check=Check(_is_timezone, "an IANA time zone name such as Asia/Tokyo"))


@dataclass(frozen=True)
class EvalConfig:
    """Evaluation runs (`eval`, `devbench`)."""

    jsquad_dir: Path | None = setting(None, "the JSQuAD folder of `devbench` (default: "
                                      "../shared/bench/jsquad-v1.3 beside the checkout)")
    devbench_sample: int = setting(0, "`devbench` asks a deterministic sample of this many JSQuAD questions; "
                                   "0: every one", check=at_least(0))
    eval_workers: int = setting(0, "worker processes of `eval` and `devbench`; 0: one per core (at most 4) "
                                "for a large set", check=at_least(0))


@dataclass(frozen=True)
class CliConfig:
    """The command line's own output."""

    progress: bool = setting(True, "progress on stderr (off: --no-progress)", flag="--no-progress",
                             flag_help=False)


# stage name -> (its config, the Settings attribute holding it), in pipeline order.
SCOPES: dict[str, tuple[type, str]] = {
    "store": (StoreConfig, "storage"),
    "scraper": (ScraperConfig, "scraper"),
    "retrieval": (RetrievalConfig, "retrieval"),
    "answer": (AnswerConfig, "answer"),
    "model": (ModelConfig, "model"),
    "api": (ApiConfig, "api"),
    "chat": (ChatConfig, "chat"),
    "eval": (EvalConfig, "eval"),
    "cli": (CliConfig, "cli"),
}
