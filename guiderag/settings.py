"""All configuration: `Settings`, composed of each stage's frozen config, read from the
environment and CLI flags through the registry (guiderag/scopes.py declares every setting,
guiderag/registry.py reads, checks and shows them).

Precedence: explicit keyword overrides (CLI flags) > environment variables > defaults.
Each stage is handed its own config (`settings.retrieval`, `settings.answer`, ...; the
answer stage a chatbot.config.BotConfig of the configs it needs), never the whole Settings:
only the CLI, the API, the chat and eval read Settings, and there is no flat
`settings.<name>` (#19). Which guideline a command works on is not a setting of its stage but a
`GuidelineScope` passed explicitly (guiderag/guideline.py); `settings.storage.guideline` is only
the one the user asked for (--guideline, GUIDERAG_GUIDELINE).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .errors import InputError
from .guideline import (AUTO_GUIDELINE, DEFAULT_GUIDELINE, GUIDELINE_ID, RESERVED_GUIDELINE_IDS, GuidelineScope,
                        check_guideline_id)
from .progress import ProgressReporter
from .registry import DEFAULT, ENVIRONMENT, FLAG, Setting, settings_of
from .scopes import (COVERAGE_DECISIONS, COVERAGE_MODEL, COVERAGE_RULES, DEFAULT_ESCALATION, DEFAULT_REFUSAL, EXTRACT,
                     GENERATE, LINES, MODEL_MODES, MODES, OURS,
                     PIPELINES, PROTOCOL, SCOPES, AnswerConfig, ApiConfig, ChatConfig, CliConfig, EvalConfig,
                     ModelConfig, RetrievalConfig, ScraperConfig, StoreConfig)

CODE = "code"  # a value set by the program itself (Settings.replace), not by the user

# Every registered setting, in stage order, and by name (names are unique across stages).
REGISTRY: tuple[Setting, ...] = tuple(s for stage, (config, _) in SCOPES.items() for s in settings_of(config, stage))
BY_NAME: dict[str, Setting] = {s.name: s for s in REGISTRY}
_ATTR = {stage: attr for stage, (_, attr) in SCOPES.items()}
if len(BY_NAME) != len(REGISTRY):  # pragma: no cover - a declaration error
    raise RuntimeError("two stages declare a setting of the same name")


@dataclass(frozen=True)
class Settings:
    """Every setting of guiderag, one frozen config per stage. Build with `Settings.load(...)`."""

    storage: StoreConfig = field(default_factory=StoreConfig)
    scraper: ScraperConfig = field(default_factory=ScraperConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    answer: AnswerConfig = field(default_factory=AnswerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    api: ApiConfig = field(default_factory=ApiConfig)
    chat: ChatConfig = field(default_factory=ChatConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    cli: CliConfig = field(default_factory=CliConfig)
    # setting name -> where its value came from when not the default (ENVIRONMENT, FLAG, CODE)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    # --- derived -----------------------------------------------------------
    @property
    def store(self) -> Path | str:
        """What Store() opens: the PostgreSQL URL of a shared store, else the SQLite file."""
        return self.storage.store

    @property
    def store_name(self) -> str:
        """The store as messages name it (a URL without its password)."""
        return self.storage.store_name

    @property
    def model_configured(self) -> bool:
        """True when an answer model and credentials (or a local base URL) are set."""
        return self.model.configured

    @property
    def progress_reporter(self) -> ProgressReporter:
        """Where the stages report progress: stderr bars, unless --no-progress / GUIDERAG_PROGRESS=0."""
        return ProgressReporter(enabled=self.cli.progress)

    def guideline_scope(self, gid: str) -> GuidelineScope:
        """Guideline `gid` of this store: its index folder, URL workbook and check status."""
        return GuidelineScope.of(self.storage, gid)

    def value(self, name: str) -> Any:
        """A setting's value by name (`guiderag config`): the store's location for db."""
        s = BY_NAME[name]
        if name == "db":
            return self.store
        return getattr(getattr(self, _ATTR[s.stage]), name)

    def source(self, name: str) -> str:
        """Where a setting's value came from: default, environment, flag (or code)."""
        return self.sources.get(name, DEFAULT)

    # --- building ----------------------------------------------------------
    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults, then the GUIDERAG_* / OPENAI_* environment, then the non-None
        overrides (CLI flags); each value checked, InputError naming where it came from."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        wheres: dict[str, str] = {}
        for s in REGISTRY:
            found, value, key = s.from_env(env)
            if found:
                values[s.name], sources[s.name], wheres[s.name] = value, ENVIRONMENT, f"environment variable {key}"
        for name, value in overrides.items():
            s = _setting(name)
            if value is not None:
                where = s.flag or s.in_code()
                values[name], sources[name], wheres[name] = s.coerce(value, where), FLAG, where
        return cls._build(values, sources, wheres)

    @classmethod
    def _build(cls, values: dict[str, Any], sources: dict[str, str], wheres: dict[str, str],
               base: Settings | None = None) -> Settings:
        for name, value in values.items():
            BY_NAME[name].check(value, wheres[name])
        by_stage: dict[str, dict[str, Any]] = {}
        for name, value in values.items():
            by_stage.setdefault(BY_NAME[name].stage, {})[name] = value
        parts: dict[str, Any] = {}
        for stage, changes in by_stage.items():
            config, attr = SCOPES[stage]
            if stage == "store" and "db" in changes:
                changes = {**changes, "store_url": None}  # derived again from the new location
            parts[attr] = dataclasses.replace(getattr(base, attr), **changes) if base else config(**changes)
        merged = {**(base.sources if base else {}), **sources}
        return dataclasses.replace(base, sources=merged, **parts) if base else cls(sources=merged, **parts)

    def replace(self, **changes: Any) -> Settings:
        """A copy with some settings changed, by name (flat: `replace(threshold=0.3)`), or
        a stage's whole config (`replace(retrieval=...)`); each value checked."""
        configs = {k: v for k, v in changes.items() if k in _ATTR.values()}
        values, wheres = {}, {}
        for name, value in changes.items():
            if name in configs:
                continue
            s = _setting(name)
            values[name], wheres[name] = s.coerce(value, s.in_code()), s.in_code()
        new = self._build(values, {name: CODE for name in values}, wheres, base=self)
        return dataclasses.replace(new, **configs) if configs else new

    def validate(self) -> None:
        """Raise InputError for a value no run could use (every setting's declared rules)."""
        for s in REGISTRY:
            s.check(getattr(getattr(self, _ATTR[s.stage]), s.name), s.in_code())


# Former settings (issue 19): no deployment should turn them, so they are constants beside
# the code that uses them, with what was measured; their environment variables are ignored
# (the CLI warns). name -> where the value lives now.
RETIRED: dict[str, str] = {
    "store_url": "derived from GUIDERAG_DB when it is a postgresql:// URL",
    "split_lines_over_chars": "the constant scraper.textlines.DEFAULT_SPLIT_OVER",
    "max_redirects": "the constant scraper.fetch.MAX_REDIRECTS",
    "sample_site_url": "the constant guiderag.resources.SAMPLE_SITE_URL",
    "heading_max_chars": "the constant store.structure.HEADING_MAX_CHARS",
    "keyword_count": "the constant retrieval.keywords.KEYWORD_COUNT",
    "model_terms": "the constant retrieval.keywords.MODEL_TERMS",
    "passage_chars": "the constant retrieval.passages.PASSAGE_CHARS",
    "bm25_k1": "the constant retrieval.bm25.K1",
    "bm25_b": "the constant retrieval.bm25.B",
    "bigram_weight": "the constant retrieval.scoring.BIGRAM_WEIGHT",
    "page_weight": "the constant retrieval.scoring.PAGE_WEIGHT",
    "span_weight": "the constant retrieval.scoring.SPAN_WEIGHT",
    "score_power": "the constant retrieval.scoring.SCORE_POWER",
    "unknown_term_weight": "the constant retrieval.scoring.UNKNOWN_TERM_WEIGHT",
    "verb_weight": "the constant retrieval.query.VERB_WEIGHT",
    "unknown_compound_weight": "the constant retrieval.query.UNKNOWN_COMPOUND_WEIGHT",
    "unknown_verb_weight": "the constant retrieval.query.UNKNOWN_VERB_WEIGHT",
    "specific_rare_zipf": "the constant retrieval.specificity.RARE_ZIPF",
    "specific_common_zipf": "the constant retrieval.specificity.COMMON_ZIPF",
    "compound_parts": "always on (retrieval.analyzer.Analyzer.parts)",
    "jsquad_held_out": "the constant eval.jsquad.HELD_OUT",
    "jsquad_seed": "the constant eval.jsquad.SEED",
    "bootstrap_resamples": "the constant eval.compare.RESAMPLES",
    "bootstrap_seed": "the constant eval.compare.SEED",
    "eval_parallel_min": "the constant eval.runner.PARALLEL_MIN",
}
# GUIDERAG_* variables that are not settings: read by the scripts (scripts/chat.sh, venv.sh).
SCRIPT_VARIABLES = frozenset({"GUIDERAG_HOST", "GUIDERAG_PORT", "GUIDERAG_PYTHON"})


def ignored_variables(env: Mapping[str, str] | None = None) -> list[str]:
    """A warning for each GUIDERAG_* variable set in `env` that no setting reads (a typo,
    or a former setting), naming what to do."""
    env = os.environ if env is None else env
    known = {key for s in REGISTRY for key in (s.env, *s.spec.aliases)} | SCRIPT_VARIABLES
    out = []
    for key in sorted(k for k in env if k.startswith("GUIDERAG_") and k not in known and env[k] != ""):
        name = key[len("GUIDERAG_"):].lower()
        if name in RETIRED:
            out.append(f"{key} is ignored: {name} is no longer a setting ({RETIRED[name]}); unset it")
        else:
            out.append(f"{key} is not a setting and is ignored (`guiderag config` lists them)")
    return out


def describe(settings: Settings) -> list[dict[str, Any]]:
    """`guiderag config --json`'s rows: every setting with its current value and where it
    came from; secrets masked, passwords out of URLs."""
    return [{"name": s.name, "env": s.env, "stage": s.stage, "default": s.json_value(s.default),
             "value": s.json_value(settings.value(s.name)), "source": settings.source(s.name), "help": s.help}
            for s in REGISTRY]


def reference_markdown() -> str:
    """docs/settings.md: the settings reference, generated from the registry (machine-
    independent: computed defaults are described, not printed)."""
    out = [
        "# Settings",
        "",
        "<!-- Generated from the settings registry (guiderag/scopes.py) by `guiderag config --markdown`;",
        "     tests/test_settings.py fails when this file and the registry differ. Do not edit by hand. -->",
        "",
        "Every setting of guiderag, by the stage it belongs to. Each is read from its environment variable;",
        "a command-line flag, where there is one, wins over it. An empty variable counts as unset.",
        "`guiderag config` lists every setting with its current value and where it came from (default,",
        "environment, flag), secrets masked; `guiderag config --json` prints the same as JSON.",
        "`GUIDERAG_MODEL` sets both model names (`answer_model` and `keywords_model`) where their own",
        "variables are unset. A bad value is refused (exit 2) with a message naming its variable or flag.",
    ]
    for stage, (config, _) in SCOPES.items():
        out += ["", f"## {stage}", "", (config.__doc__ or "").strip(), "",
                "| setting | environment variable | flag | type | default | what it does |",
                "|---|---|---|---|---|---|"]
        for s in (s for s in REGISTRY if s.stage == stage):
            flag = f"`{s.flag}`" if s.flag else ""
            default = s.default_text().replace("|", "\\|")
            what = s.help.replace("|", "\\|") + (" (secret: never shown)" if s.secret else "")
            out.append(f"| `{s.name}` | `{s.env}` | {flag} | {s.type_name} | {default} | {what} |")
    out += ["", "## Former settings", "",
            "Knobs no deployment should turn are constants beside the code that uses them, each with a comment",
            "saying why and what was measured; their `GUIDERAG_*` variables are ignored, with a warning.", "",
            "| former setting | now |", "|---|---|"]
    out += [f"| `{name}` | {now} |" for name, now in RETIRED.items()]
    return "\n".join(out) + "\n"


def _setting(name: str) -> Setting:
    try:
        return BY_NAME[name]
    except KeyError:
        raise TypeError(f"no setting named {name!r}") from None


__all__ = [
    "AUTO_GUIDELINE", "BY_NAME", "CODE", "COVERAGE_DECISIONS", "COVERAGE_MODEL", "COVERAGE_RULES", "DEFAULT", "DEFAULT_ESCALATION", "DEFAULT_GUIDELINE", "DEFAULT_REFUSAL",
    "ENVIRONMENT", "EXTRACT", "FLAG", "GENERATE", "GUIDELINE_ID", "LINES", "MODEL_MODES", "MODES", "OURS",
    "PIPELINES", "PROTOCOL", "REGISTRY", "RETIRED", "describe", "ignored_variables", "reference_markdown", "RESERVED_GUIDELINE_IDS", "AnswerConfig", "ApiConfig", "ChatConfig",
    "CliConfig", "EvalConfig", "GuidelineScope", "ModelConfig", "RetrievalConfig", "ScraperConfig", "Settings",
    "Setting", "StoreConfig", "check_guideline_id",
]
