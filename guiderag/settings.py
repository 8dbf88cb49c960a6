"""All configuration in one place: a frozen dataclass read from the environment and CLI flags.

Precedence: explicit keyword overrides (CLI flags) > environment variables > defaults.
Every environment variable is named GUIDERAG_<FIELD> in upper case, except the OpenAI
ones, which keep their standard names (OPENAI_API_KEY, OPENAI_BASE_URL).
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from .errors import InputError
from .redact import redact
from .resources import default_db, is_postgres_url, shared_store_anchor

# Names defined once: answer modes (extract needs no model) and retrieval pipelines.
EXTRACT, LINES, GENERATE = "extract", "lines", "generate"
MODES = (EXTRACT, LINES, GENERATE)
MODEL_MODES = (LINES, GENERATE)
OURS, PROTOCOL = "ours", "protocol"
PIPELINES = (OURS, PROTOCOL)

# Guidelines: the one a store holds when none is named, and what `ask` routes by itself.
DEFAULT_GUIDELINE = "default"
AUTO_GUIDELINE = "auto"
# A guideline id names folders and files beside the store: lower-case letters, digits,
# '-' and '_'. Not the index's own names (v-*, tmp-*, CURRENT) nor words the CLI reserves.
GUIDELINE_ID = re.compile(r"^(?!v-|tmp-)[a-z0-9][a-z0-9_-]{0,39}$")
RESERVED_GUIDELINE_IDS = frozenset({AUTO_GUIDELINE, "all", "none", "current"})

DEFAULT_REFUSAL = (
    "申し訳ありません。このご質問に答えられる内容は、このガイドラインには書かれていません。"
)
DEFAULT_ESCALATION = (
    "詳しくは、担当の医師・看護師などの医療チーム、またはお近くのがん診療連携拠点病院の"
    "「がん相談支援センター」にご相談ください。"
)


@dataclass(frozen=True)
class Settings:
    """Every tunable of guiderag. Build with `Settings.load(...)`, not by hand."""

    # --- store -------------------------------------------------------------
    # Default: $XDG_DATA_HOME/guiderag/guiderag.db (~/.local/share/...), see resources.py.
    # --db / GUIDERAG_DB may also be a postgresql://user@host:port/dbname URL: the shared
    # store is then `store_url`, and `db` is a local anchor for what is kept on this machine
    # beside a store (index, URL workbook, check status: resources.shared_store_anchor).
    db: Path = field(default_factory=default_db)
    store_url: str | None = field(default=None, repr=False)
    # The retrieval indexes live under this folder instead of beside the store
    # (<db>.index/): e.g. a volume several replicas share (README, "Replicas").
    index_root: Path | None = None
    # The guideline a command works on: "" is the store's only guideline (DEFAULT_GUIDELINE
    # for a scrape), and for `ask` the one the question is routed to (AUTO_GUIDELINE).
    guideline: str = ""
    # A corpus older than this (hours since its last good scrape) is a divergence for
    # `guiderag check` and a warning in the app's sidebar; 0: no age limit.
    max_age_hours: float = 0.0

    # --- scraper -----------------------------------------------------------
    user_agent: str = "guiderag/0.1 (clinical-guideline chatbot; polite crawler)"
    timeout_s: float = 15.0  # per socket operation (connect, each read)
    # A whole response (status, headers and body) must have arrived within this: a server
    # trickling bytes (each read within timeout_s) fails the page, and the run goes on.
    fetch_deadline_s: float = 120.0
    # Retry-After (429, 503) is waited for up to this long; a site asking for more is left
    # alone: the scrape is abandoned (the previous corpus kept) rather than hammering it.
    retry_after_max_s: float = 120.0
    # At most this many guide pages per scrape (0: no limit); a TOC listing more is refused
    # before anything is fetched, with the URL workbook written for review.
    max_pages: int = 2000
    retries: int = 3
    backoff_s: float = 0.5
    delay_s: float = 0.5
    max_page_bytes: int = 5_000_000
    urls_xlsx: Path | None = None  # default: <db stem>.urls.xlsx beside the db
    progress: bool = True
    # Send If-None-Match / If-Modified-Since; `scrape --force` turns it off so that a
    # change of the text-extraction rules reaches pages the server says are unchanged.
    conditional_get: bool = True
    # A block (paragraph, list item...) longer than this is stored as one line per
    # sentence, so that a cited line stays short; 0 keeps one line per block.
    split_lines_over_chars: int = 160
    # Redirects followed per page (within the site only; an off-site one is a failure).
    max_redirects: int = 5
    # This many pages in a row failing with connection errors or 5xx (after retries) means
    # the site went down: the scrape is aborted and the previous corpus kept as it was.
    abort_after_failures: int = 3
    # `scrape --sample` serves the bundled site on a random loopback port; its pages are
    # stored under this stable site URL instead, so that every re-scrape compares like with
    # like (.invalid: a reserved name, plainly not a real site).
    sample_site_url: str = "http://sample-guide.guiderag.invalid"

    # --- retrieval ---------------------------------------------------------
    pipeline: str = OURS  # one of PIPELINES
    threshold: float = 0.2
    reference_chars: int = 4096
    synonyms: Path | None = None  # TSV of patient words <-> guideline words
    keyword_count: int = 2
    # ours, with a keywords model: at most this many guideline terms asked of it.
    model_terms: int = 5
    # ours: a passage is a window of about this many characters of lines under a heading
    # (windows overlap by half), scored together with the page title and heading.
    passage_chars: int = 300
    # ours: a line at most this long, not ending like a sentence, is taken as a heading.
    heading_max_chars: int = 40
    # ours: BM25 parameters of the saturated term weights stored in the index.
    bm25_k1: float = 0.5  # low: close to "is the term there", which separates out-of-scope best
    bm25_b: float = 0.75
    # ours: share of the character-bigram channel in a score (the rest: MeCab terms).
    bigram_weight: float = 0.3
    # ours: share of the whole page's score in a passage's score (0 measured best on JSQuAD:
    # a long page covers an out-of-scope question's words too easily).
    page_weight: float = 0.0
    # ours: a passage's score is scaled by (1 - span_weight + span_weight * r), r the share of
    # its matched question terms that its best line span (title, heading and one line)
    # also holds: only passages whose terms lie scattered over unrelated lines lose.
    # 0.45 measured on JSQuAD (devbench) and the patient-worded sample set
    # (0.4 left the surgery page above the threshold for 放射線治療の期間); 0 turns it off.
    span_weight: float = 0.45
    # ours: weight of verb/adjective lemmas relative to nouns in a query.
    verb_weight: float = 0.5
    # ours: weight of a query term found nowhere in the corpus, relative to its idf; it
    # lowers the score of questions about what the guideline never mentions.
    unknown_term_weight: float = 1.0
    # ours: the same for a compound found nowhere when its words are (手術のあと息切れ ->
    # 後息切れ is an accident of joining; its words 後 and 息切れ carry the meaning), and
    # for an affixed word found nowhere whose noun is found (年齢的, 治療中 -> 年齢, 治療).
    unknown_compound_weight: float = 0.5
    # ours: such a compound (胃切除, 再発胃がん) is found, at this weight, where one line
    # span says all its words next to each other (retrieval.query, Slot.parts); so is a
    # patient table target the guideline never uses whose words it does (胃切除 where it
    # says 胃を切除), on one line. 0 (off) by default, measured (issue 11, round 3): 0.8 on
    # JSQuAD answered 2 more in-scope questions (京都市長, 経済特区) and 1 more out-of-scope
    # one (ロマン主義, which the corpus says inside 新ロマン主義), out-of-scope refused
    # 0.923 -> 0.921; no change on patient-gastric or the sample set.
    compound_parts_weight: float = 0.0
    # ours: the same for a verb/adjective lemma found nowhere (払える, 痛い, おかしい): a
    # patient's verb is rarely the topic, a noun the guideline never uses often is.
    # Relative to the unseen idf, after verb_weight. Measured on the sample patient set.
    unknown_verb_weight: float = 0.5
    # ours: a question word the corpus never uses weighs by how specific it is in general
    # Japanese (wordfreq's Zipf scale, retrieval.specificity): fully at or below
    # specific_rare_zipf, specific_min_weight at or above specific_common_zipf, linear in
    # between; so 髪 or 戻る (everyday words) hardly count against a question, 白血病 fully.
    # specific_min_weight 1 turns it off.
    specific_rare_zipf: float = 3.5
    specific_common_zipf: float = 5.0
    specific_min_weight: float = 0.1
    # ours: a word naming the kind of answer asked for, not its topic (retrieval.framing.
    # ANSWER_FRAMES: 違い, 方法, 時期, 仕組み, 決まる) weighs this much in a query. 0.25 measured
    # (issue 11): 1.0 answered 2 fewer in-scope patient questions and one more other-disease
    # one; JSQuAD out-of-scope refused 0.923 -> 0.921 (one question asking 「どういう意味」).
    frame_word_weight: float = 0.25
    # ours: query-side expansions (retrieval.expansion), each weighed below an exact match:
    # the patient table (data/patient_terms.tsv, or this file) and the Sudachi synonym
    # dictionary (for words the corpus never uses); 0 turns one off.
    patient_table: Path | None = None
    patient_table_weight: float = 0.8
    synonym_dict_weight: float = 0.6
    # analyzer: also emit the words inside a compound (胸腺腫 -> 胸, 腺腫) as terms.
    compound_parts: bool = True
    # ours: a score is (share of the question's idf mass found, BM25-saturated) ** this, so
    # that the threshold 0.2 falls where about 0.45 of it is found (measured on JSQuAD).
    score_power: float = 2.0
    # ours: a Q&A page (its title asks one question, or is numbered Q12: retrieval.passages.
    # is_question_title) answers that question as a whole: a passage's score mixes in the
    # page's own score with this weight (page_weight elsewhere), and such a passage clears
    # threshold ** qa_threshold_exponent (0.2 -> 0.16; 0 and 1 stay themselves). Measured on
    # the patient-worded sets (issue 11): with 0.5 and 1.14 the gastric set's in-scope gold
    # shown went 0.58 -> 0.72 (lay 0.50 -> 0.67) with every out-of-scope category refused
    # >= 0.96; the sweep (0.3-0.6 x 0.16-0.2) is in the issue report. JSQuAD's pages are
    # articles, no Q&A pages: unchanged. qa_page_weight 0 and qa_threshold_exponent 1 turn it off.
    qa_page_weight: float = 0.5
    qa_threshold_exponent: float = 1.14
    # ours: at most this many candidate pages are listed (the best ones; the total is kept).
    max_candidates: int = 100
    # Processes analysing large corpora when building the index: this one and
    # index_workers - 1 forked workers (0 or 1: this process alone).
    index_workers: int = 2

    # --- answers -----------------------------------------------------------
    mode: str = EXTRACT  # one of MODES
    answer_chars: int = 500
    max_question_chars: int = 500
    refusal_message: str = DEFAULT_REFUSAL
    escalation_text: str = DEFAULT_ESCALATION
    # Not covered unless one reference line (read with its page title) holds at least this
    # share of the question's idf mass (chatbot.extract.line_coverage); 0 turns it off.
    # Applies to the `ours` pipeline in every mode (no model is asked when it refuses).
    # 0.5 measured (issue 11, devbench curves): on JSQuAD 0.45 refused 0.919 of out-of-scope
    # questions, 0.5 0.925 with gold in the answer 0.947; the patient set's in-scope answers
    # hardly move between them (the threshold, not the gate, refuses most of those).
    min_line_coverage: float = 0.5
    # Not covered either when the question asks for a figure (when, how long, how often, how
    # much: chatbot.answer_type) and no line of the reference's pages gives one: the guideline
    # names the topic, not what is asked about it (禁煙外来の費用はいくら). Measured (issue 11):
    # the sample set's two answered out-of-scope questions and the gastric set's not_covered
    # one are refused; one gastric in-scope question with them. False turns it off.
    require_asked_figure: bool = True
    # Shown with the answer when a question over max_question_chars was cut ({limit}, {chars}).
    question_capped_message: str = (
        "ご質問が長いため、最初の{limit}文字までを使って回答しています（元の長さ {chars} 文字）。"
    )

    # --- language model (OpenAI-compatible) ----------------------------------
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    keywords_model: str | None = None  # None: offline keywords
    answer_model: str | None = None  # needed by lines / generate
    model_timeout_s: float = 30.0  # one model call, from sending to the last word
    model_retries: int = 2
    # An unreachable, failing or timed-out model: answer with extract instead of an error.
    # (A reply that arrived but cannot be shown always falls back: see chatbot.replies.)
    fallback_to_extract: bool = False
    # Read replies as a stream: progress while the model writes, and a reply that turns
    # degenerate (a loop, an echo, far too long) is stopped there instead of running on to
    # max_tokens. Nothing streamed is shown before the whole reply passed its checks.
    model_stream: bool = True
    # Model calls at once from this process (the others wait, at most model_queue_timeout_s,
    # then count as a model failure); 0: no limit. Set it to what the server runs in
    # parallel: 1 for llama-cpp-python's server, which runs one request at a time.
    model_concurrency: int = 4
    model_queue_timeout_s: float = 30.0
    # Model keywords are optional (they may only add evidence): a keywords call waits at
    # most this long for a slot, then the question's own keywords are used, so that a busy
    # model does not hold up questions that need no model answer.
    keywords_queue_timeout_s: float = 0.0
    # Reply budgets: generate keeps the protocol's 1024 tokens; a line selection is short.
    answer_max_tokens: int = 1024
    lines_max_tokens: int = 96
    # A generated summary longer than answer_chars times this is degenerate, not an answer.
    summary_max_factor: float = 2.0

    # --- evaluation (eval/) -------------------------------------------------
    # JSQuAD folder for `guiderag devbench`; None: ../shared/bench/jsquad-v1.3 beside the
    # checkout (resources.shared_bench_dir).
    jsquad_dir: Path | None = None
    jsquad_held_out: float = 0.2  # share of JSQuAD articles kept off the site (out of scope)
    jsquad_seed: str = "guiderag-devbench-1"  # salt of the deterministic held-out split
    devbench_sample: int = 0  # 0: every JSQuAD question; N: a deterministic sample of N
    bootstrap_resamples: int = 2000  # paired bootstrap of `guiderag eval --compare`
    bootstrap_seed: int = 20261129
    # Worker processes of `guiderag eval` / devbench: 0 = one per CPU core (at most 4) when
    # a set has at least eval_parallel_min questions, else in-process; N = exactly N.
    eval_workers: int = 0
    eval_parallel_min: int = 200

    # --- HTTP API (guiderag serve) -------------------------------------------
    # When set, every /v1 request must send `Authorization: Bearer <key>` (compared in
    # constant time); /healthz and /readyz stay open for load balancers.
    api_key: str | None = field(default=None, repr=False)
    # Requests with a larger body are refused (413) before it is read whole.
    api_max_body_bytes: int = 65_536
    # A question longer than this is refused (422); up to it, the chatbot answers the first
    # max_question_chars characters and says so, as in the chat.
    api_max_question_chars: int = 10_000
    # Origins allowed to call the API from a browser (comma-separated); empty: no CORS headers.
    api_cors_origins: str = ""
    # A PostgreSQL store: the most connections one process keeps open to it (a pool); the
    # server forks a process per connection, so each replica reuses a few. Applied by every
    # command and process that opens a PostgreSQL store (store.connection.configure).
    pg_pool_size: int = 10
    # Bounded waits on a PostgreSQL store, each a StoreTimeoutError saying which ran out (an
    # API answers it with 503): a new connection must be made within pg_connect_timeout_s
    # (whole seconds, at least 2: libpq's rule; per address of the host); a statement must
    # finish within pg_statement_timeout_s (the server's statement_timeout; a server that
    # does not answer at all, stopped or cut off, is given up 1 s later by the client); a
    # free connection of the pool must come within pg_pool_timeout_s.
    pg_connect_timeout_s: int = 10
    pg_statement_timeout_s: float = 30.0
    pg_pool_timeout_s: float = 10.0

    # --- chat app (app.py) ---------------------------------------------------
    # An empty store (never held a page) is filled with the bundled sample guideline on
    # first start; set GUIDERAG_SAMPLE_ON_EMPTY=0 for a deployment that must not do that.
    sample_on_empty: bool = True
    display_timezone: str = "Asia/Tokyo"  # dates shown to users (fetched, last scraped)

    # --- derived paths -----------------------------------------------------
    @property
    def index_dir(self) -> Path:
        """Directory holding the retrieval index versions of this guideline, beside the db:
        <db>.index/ for the default guideline (as before there were several), else
        <db>.index/<guideline id>/."""
        root = self.index_root if self.index_root is not None else self.db.with_name(self.db.name + ".index")
        return root if self.guideline in ("", DEFAULT_GUIDELINE) else root / self.guideline

    @property
    def workbook_path(self) -> Path:
        """The URL workbook written by each scrape of this guideline: <db stem>.urls.xlsx for
        the default guideline, <db stem>.<guideline id>.urls.xlsx for another."""
        if self.urls_xlsx:
            return self.urls_xlsx
        infix = "" if self.guideline in ("", DEFAULT_GUIDELINE) else "." + self.guideline
        return self.db.with_name(f"{self.db.stem}{infix}.urls.xlsx")

    @property
    def check_status_path(self) -> Path:
        """Where `guiderag check` records its last result for this guideline (a small JSON
        file beside the store, never the store itself): <db>.check/<guideline id>.json."""
        return self.db.with_name(self.db.name + ".check") / f"{self.guideline or DEFAULT_GUIDELINE}.json"

    @property
    def store(self) -> Path | str:
        """What Store() opens: the PostgreSQL URL of a shared store, else the SQLite file."""
        return self.store_url or self.db

    @property
    def store_name(self) -> str:
        """The store as messages name it (a URL without its password)."""
        return redact(self.store_url) if self.store_url else str(self.db)

    @property
    def model_configured(self) -> bool:
        """True when an answer model and credentials (or a local base URL) are set."""
        return bool(self.answer_model and (self.openai_api_key or self.openai_base_url))

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> "Settings":
        """Defaults, then GUIDERAG_* / OPENAI_* environment, then non-None overrides."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = f.name.upper() if f.name.startswith("openai_") else "GUIDERAG_" + f.name.upper()
            if key in env and env[key] != "":
                values[f.name] = _coerce(f, env[key], key)
        if "GUIDERAG_MODEL" in env and env["GUIDERAG_MODEL"]:
            values.setdefault("answer_model", env["GUIDERAG_MODEL"])
            values.setdefault("keywords_model", env["GUIDERAG_MODEL"])
        for name, value in overrides.items():
            if value is not None:
                values[name] = value
        location = values.get("db")
        if isinstance(location, str) and is_postgres_url(location):
            values["store_url"] = location
            values["db"] = shared_store_anchor(location)
        elif isinstance(location, str):
            values["db"] = Path(location)
        settings = cls(**values)
        settings.validate()
        return settings

    def replace(self, **changes: Any) -> "Settings":
        """A copy with some fields changed (validated)."""
        new = dataclasses.replace(self, **changes)
        new.validate()
        return new

    def validate(self) -> None:
        """Raise InputError for values no run could use."""
        if self.guideline:
            check_guideline_id(self.guideline)
        if self.max_age_hours < 0:
            raise InputError(f"max_age_hours must be >= 0 (0: no limit), not {self.max_age_hours}")
        if self.pipeline not in PIPELINES:
            raise InputError(f"pipeline must be one of {', '.join(PIPELINES)}, not {self.pipeline!r}")
        if self.mode not in MODES:
            raise InputError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if not 0.0 <= self.threshold <= 1.0:
            raise InputError(f"threshold must be between 0 and 1, not {self.threshold}")
        if self.reference_chars < 200:
            raise InputError(f"reference_chars must be at least 200, not {self.reference_chars}")
        if self.delay_s < 0 or self.timeout_s <= 0 or self.retries < 0:
            raise InputError("delay_s must be >= 0, timeout_s > 0 and retries >= 0")
        if self.max_page_bytes <= 0 or self.max_redirects < 0 or self.abort_after_failures < 0:
            raise InputError("max_page_bytes must be > 0, max_redirects >= 0 and abort_after_failures >= 0")
        if self.fetch_deadline_s <= 0 or self.retry_after_max_s < 0 or self.max_pages < 0:
            raise InputError("fetch_deadline_s must be > 0, retry_after_max_s >= 0 and max_pages >= 0 (0: no limit)")
        if self.backoff_s < 0 or self.split_lines_over_chars < 0:
            raise InputError("backoff_s and split_lines_over_chars must be >= 0")
        if not (0.0 <= self.bigram_weight <= 1.0 and 0.0 <= self.page_weight <= 1.0):
            raise InputError("bigram_weight and page_weight must be between 0 and 1")
        if not (0.0 <= self.patient_table_weight <= 1.0 and 0.0 <= self.synonym_dict_weight <= 1.0
                and 0.0 <= self.specific_min_weight <= 1.0):
            raise InputError("patient_table_weight, synonym_dict_weight and specific_min_weight must be "
                             "between 0 and 1 (0 turns an expansion off, 1 the specificity weighting)")
        if not (0.0 <= self.frame_word_weight <= 1.0 and 0.0 <= self.qa_page_weight <= 1.0
                and self.qa_threshold_exponent >= 1.0):
            raise InputError("frame_word_weight and qa_page_weight must be between 0 and 1, "
                             "qa_threshold_exponent at least 1 (1: the threshold of every page)")
        if not 0.0 <= self.span_weight <= 1.0:
            raise InputError(f"span_weight must be between 0 and 1, not {self.span_weight}")
        if self.model_timeout_s <= 0 or self.model_concurrency < 0 or min(
                self.model_queue_timeout_s, self.keywords_queue_timeout_s) < 0:
            raise InputError("model_timeout_s must be > 0; model_concurrency and the queue timeouts >= 0")
        if self.answer_max_tokens < 1 or self.lines_max_tokens < 1 or self.summary_max_factor <= 1.0:
            raise InputError("answer_max_tokens and lines_max_tokens must be >= 1, summary_max_factor > 1")
        if self.pg_pool_size < 1 or self.pg_connect_timeout_s < 2 or min(
                self.pg_statement_timeout_s, self.pg_pool_timeout_s) <= 0:
            raise InputError("pg_pool_size must be >= 1, pg_connect_timeout_s >= 2 (whole seconds, libpq's "
                             "minimum), pg_statement_timeout_s and pg_pool_timeout_s > 0")
        if self.api_max_body_bytes < 1024 or self.api_max_question_chars < 1:
            raise InputError("api_max_body_bytes must be at least 1024 and api_max_question_chars at least 1")
        if self.passage_chars < 1 or self.bm25_k1 <= 0 or not 0.0 <= self.bm25_b <= 1.0 or self.score_power <= 0:
            raise InputError("passage_chars must be >= 1, bm25_k1 > 0, bm25_b in [0, 1] and score_power > 0")


def check_guideline_id(gid: str) -> str:
    """`gid` when it can name a guideline, else InputError saying what an id may be."""
    if not isinstance(gid, str) or not GUIDELINE_ID.match(gid) or gid in RESERVED_GUIDELINE_IDS:
        raise InputError(
            f"{gid!r} cannot name a guideline: use 1-40 lower-case letters, digits, '-' or '_', "
            f"starting with a letter or digit (not v-/tmp-, not {', '.join(sorted(RESERVED_GUIDELINE_IDS))}), "
            "e.g. --guideline gastric"
        )
    return gid


def _coerce(f: dataclasses.Field, raw: str, key: str) -> Any:
    kind = str(f.type)
    if f.name == "db":
        return raw  # a path or a postgresql:// URL: Settings.load decides
    try:
        if "Path" in kind:
            return Path(raw)
        if kind.startswith("bool"):
            return raw.strip().lower() in ("1", "true", "yes", "on")
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
    except ValueError as exc:
        raise InputError(f"environment variable {key}={raw!r} is not a valid {kind}") from exc
    return raw
