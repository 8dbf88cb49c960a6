"""Settings: one registry, scoped configs, environment and CLI flags, validation, `guiderag
config`, and the generated settings reference kept in step with the registry."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from guiderag.cli import build_parser, main
from guiderag.errors import InputError
from guiderag.registry import STAGES
from guiderag.scopes import SCOPES, RetrievalConfig, StoreConfig
from guiderag.settings import (BY_NAME, REGISTRY, RETIRED, SCRIPT_VARIABLES, GuidelineScope, Settings,
                               ignored_variables, reference_markdown)

REPO = Path(__file__).resolve().parents[1]
CONTRACT = REPO.parent / "shared" / "CONTRACT.md"


def test_defaults_keep_the_protocol_parameters():
    s = Settings.load(env={})
    assert s.retrieval.threshold == 0.2 and s.retrieval.reference_chars == 4096 and s.answer.mode == "extract"
    assert s.retrieval.pipeline == "ours" and not s.model_configured
    assert s == Settings()  # the defaults are the declarations'
    s.validate()  # and every one passes its own rules


def test_environment_then_overrides():
    env = {"GUIDERAG_DB": "/tmp/x.db", "GUIDERAG_THRESHOLD": "0.3", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
           "GUIDERAG_MODEL": "m", "GUIDERAG_FALLBACK_TO_EXTRACT": "yes"}
    s = Settings.load(env=env, threshold=0.5)
    assert s.storage.db == Path("/tmp/x.db") and s.retrieval.threshold == 0.5
    assert s.model.answer_model == "m" and s.model.keywords_model == "m" and s.model_configured
    assert s.model.fallback_to_extract is True
    assert s.guideline_scope("default").index_dir == Path("/tmp/x.db.index")
    assert s.source("threshold") == "flag" and s.source("db") == "environment" and s.source("mode") == "default"
    # a model's own variable wins over GUIDERAG_MODEL
    s = Settings.load(env={"GUIDERAG_MODEL": "both", "GUIDERAG_KEYWORDS_MODEL": "kw"})
    assert (s.model.keywords_model, s.model.answer_model) == ("kw", "both")


@pytest.mark.parametrize("env", [{"GUIDERAG_THRESHOLD": "high"}, {"GUIDERAG_PIPELINE": "bm99"},
                                 {"GUIDERAG_MODE": "chat"}, {"GUIDERAG_THRESHOLD": "1.5"}])
def test_bad_values_are_input_errors(env):
    with pytest.raises(InputError):
        Settings.load(env=env)


def test_bad_usage_exits_2_with_one_line(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["ask"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("guiderag: error:") and "\n" not in err


def test_bad_environment_exits_2(monkeypatch, capsys):
    monkeypatch.setenv("GUIDERAG_THRESHOLD", "lots")
    assert main(["pages", "--db", "/nonexistent/x.db"]) == 2
    assert "GUIDERAG_THRESHOLD" in capsys.readouterr().err


@pytest.mark.parametrize("field, value", [
    ("model_concurrency", -1), ("model_queue_timeout_s", -1.0), ("keywords_queue_timeout_s", -0.5),
    ("summary_max_factor", 1.0), ("lines_max_tokens", 0), ("answer_max_tokens", 0), ("model_timeout_s", 0.0),
])
def test_model_budgets_that_no_run_could_use_are_refused(field, value):
    with pytest.raises(InputError):
        Settings.load(env={}, **{field: value})


# -- the registry ---------------------------------------------------------------------

def test_every_setting_is_declared_once_in_the_config_of_its_stage():
    assert list(SCOPES) == list(STAGES)
    names = [s.name for s in REGISTRY]
    assert len(names) == len(set(names)) == len(BY_NAME)
    for s in REGISTRY:
        config, attr = SCOPES[s.stage]
        assert s.name in {f.name for f in dataclasses.fields(config)}
        assert s.help and not s.help[0].isupper() and "\n" not in s.help and len(s.help) <= 160, s.name
        assert s.env == ("OPENAI_" + s.name[len("openai_"):].upper() if s.name.startswith("openai_")
                         else "GUIDERAG_" + s.name.upper())
    assert {s.name for s in REGISTRY if s.secret} == {"api_key", "openai_api_key"}
    assert not set(RETIRED) & set(BY_NAME)


def test_a_stage_is_handed_only_its_own_config():
    s = Settings.load(env={}, threshold=0.3, delay_s=0.0)
    assert isinstance(s.retrieval, RetrievalConfig) and s.retrieval.threshold == 0.3
    assert {f.name for f in dataclasses.fields(s.retrieval)} == {x.name for x in REGISTRY if x.stage == "retrieval"}
    assert not hasattr(s.retrieval, "delay_s") and s.scraper.delay_s == 0.0
    # a stage's whole config can be replaced
    t = s.replace(retrieval=dataclasses.replace(s.retrieval, threshold=0.4))
    assert t.retrieval.threshold == 0.4 and t.retrieval.threshold == 0.4 and t.scraper.delay_s == 0.0 and s.retrieval.threshold == 0.3
    # every stage is handed its own config: no flat names (#19 phase 2)
    assert not hasattr(s, "delay_s") and not hasattr(s, "pg_pool_size") and s.value("delay_s") == 0.0


def test_each_setting_is_read_from_its_stage_config_only():
    """Every stage is handed its own config (#19 phase 2): Settings has no flat
    `settings.<name>` for any setting (nor store_url, derived from db); Settings.load(name=...)
    and replace(name=...) set each setting in its stage's config, which value(name) reads."""
    assert [s.name for s in REGISTRY if hasattr(Settings, s.name)] == []
    assert not hasattr(Settings, "store_url")
    base = Settings.load(env={})
    for s in REGISTRY:
        value = _another_value(s)
        for changed in (Settings.load(env={}, **{s.name: value}), base.replace(**{s.name: value})):
            config = getattr(changed, SCOPES[s.stage][1])
            expected = Path(value) if s.kind is Path and not isinstance(value, Path) else value
            assert getattr(config, s.name) == changed.value(s.name) == expected, s.name
            assert changed != base, s.name


def _another_value(s):
    """A valid value other than the default, per setting."""
    special = {"pipeline": "protocol", "mode": "generate", "guideline": "gastric", "db": Path("/tmp/other.db"),
               "openai_base_url": "http://127.0.0.1:9/v1", "display_timezone": "Europe/Paris",
               "question_capped_message": "{limit} / {chars}", "qa_threshold_exponent": 1.5,
               "api_max_body_bytes": 2048, "summary_max_factor": 3.0, "api_cors_origins": "https://portal.example",
               "coverage_decision": "rules"}
    if s.name in special:
        return special[s.name]
    if s.kind is bool:
        return not s.default
    if s.kind is int:
        return (s.default or 0) + 1
    if s.kind is float:
        return 0.5 if s.default != 0.5 else 0.25
    if s.kind is Path:
        return Path("/tmp/some-file.tsv")
    return "x" + (s.default or "")


def test_environment_text_is_parsed_for_every_setting():
    for s in REGISTRY:
        value = _another_value(s)
        text = ("1" if value else "0") if s.kind is bool else str(value)
        got = Settings.load(env={s.env: text}).value(s.name)
        assert str(got) == str(value) if s.kind is Path else got == value, s.name


# A value each rule refuses; every setting with a rule is listed, so that a new one is tested too.
BAD = {
    "guideline": "Bad Name", "max_age_hours": -1.0, "pg_pool_size": 0, "pg_connect_timeout_s": 1,
    "pg_statement_timeout_s": 0.0, "pg_pool_timeout_s": -1.0, "user_agent": " ", "timeout_s": 0.0,
    "fetch_deadline_s": 0.0, "retry_after_max_s": -1.0, "max_pages": -1, "retries": -1, "backoff_s": -0.1,
    "delay_s": -1.0, "max_page_bytes": 0, "abort_after_failures": -1, "pdf_max_bytes": 0, "pdf_max_pages": 0,
    "pdf_max_stream_bytes": -1, "pdf_memory_mb": 0, "pdf_timeout_s": 0.0, "pipeline": "bm99", "threshold": 1.5,
    "reference_chars": 100, "specific_min_weight": 1.5, "frame_word_weight": -0.1, "patient_table_weight": 2.0,
    "synonym_dict_weight": -1.0, "compound_parts_weight": 1.1, "qa_page_weight": 1.5,
    "qa_threshold_exponent": 0.9, "max_candidates": 0, "index_workers": -1, "mode": "chat", "answer_chars": 0,
    "max_question_chars": 0, "min_line_coverage": 1.5, "question_capped_message": "{limit} {nope}",
    "history_max_turns": 0,
    "openai_base_url": "127.0.0.1:8080", "model_timeout_s": 0.0, "model_retries": -1, "model_concurrency": -1,
    "model_queue_timeout_s": -1.0, "keywords_queue_timeout_s": -1.0, "answer_max_tokens": 0,
    "lines_max_tokens": 0, "summary_max_factor": 1.0, "api_max_body_bytes": 100, "api_max_question_chars": 0,
    "display_timezone": "Mars/Olympus", "api_cors_origins": "portal.example.org", "api_workers": 0, "api_answer_threads": 0,
    "devbench_sample": -1, "eval_workers": -1,
    "api_ready_timeout_s": 0.0, "api_request_timeout_s": -1.0,
    "reference_floor": 1.5, "coverage_decision": "oracle", "coverage_operating_point": 2.0,
}


def test_every_rule_is_tested():
    assert {s.name for s in REGISTRY if s.spec.checks} == set(BAD)


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_value_names_its_variable_or_flag(name):
    s = BY_NAME[name]
    with pytest.raises(InputError, match=re.escape(f"environment variable {s.env} must be ")):
        Settings.load(env={s.env: str(BAD[name])})
    with pytest.raises(InputError, match=re.escape(s.flag or s.env)):
        Settings.load(env={}, **{name: BAD[name]})
    with pytest.raises(InputError, match=re.escape(s.env)):
        Settings().replace(**{name: BAD[name]})


@pytest.mark.parametrize("name, raw", [(s.name, {int: "2.5", float: "lots", bool: "maybe"}[s.kind])
                                       for s in REGISTRY if s.kind in (int, float, bool)])
def test_text_that_is_no_value_of_the_type_is_refused(name, raw):
    s = BY_NAME[name]
    with pytest.raises(InputError, match=re.escape(f"environment variable {s.env} must be ")):
        Settings.load(env={s.env: raw})


def test_a_secret_is_never_shown():
    key = BY_NAME["api_key"]
    assert key.shown("s3cret") == key.shown_raw("s3cret") == key.json_value("s3cret") == "***"
    assert key.json_value(None) is None  # whether it is set is shown


def test_empty_variables_are_unset_and_bad_flags_exit_2(capsys):
    assert Settings.load(env={"GUIDERAG_THRESHOLD": "", "GUIDERAG_MODE": ""}) == Settings.load(env={})
    with pytest.raises(SystemExit) as exc:
        main(["ask", "q", "--threshold", "2"])
    assert exc.value.code == 2
    assert "argument --threshold: the value must be between 0 and 1, not 2" in capsys.readouterr().err


def test_cli_flags_take_their_help_from_the_registry():
    text = build_parser()._subparsers._group_actions[0].choices["scrape"].format_help()  # type: ignore[union-attr]
    flat = " ".join(text.split())
    for name in ("db", "threshold", "pipeline", "delay_s", "urls_xlsx"):
        assert " ".join(BY_NAME[name].help.split()) in flat, name
        assert "$" + BY_NAME[name].env in flat
    check = build_parser()._subparsers._group_actions[0].choices["check"].format_help()  # type: ignore[union-attr]
    assert " ".join(BY_NAME["max_age_hours"].help.split()) in " ".join(check.split())


def test_unknown_and_former_variables_are_reported():
    warnings = ignored_variables({"GUIDERAG_SPAN_WEIGHT": "0.3", "GUIDERAG_TRESHOLD": "0.3", "GUIDERAG_PORT": "1",
                                  "GUIDERAG_THRESHOLD": "0.3", "GUIDERAG_MODEL": "m", "HOME": "/root"})
    assert warnings == [
        "GUIDERAG_SPAN_WEIGHT is ignored: span_weight is no longer a setting (the constant "
        "retrieval.scoring.SPAN_WEIGHT); unset it",
        "GUIDERAG_TRESHOLD is not a setting and is ignored (`guiderag config` lists them)",
    ]


# -- the guideline being worked on -------------------------------------------------------

def test_the_guideline_scope_follows_from_the_store_and_the_id(tmp_path):
    s = Settings.load(env={}, db=tmp_path / "g.db")
    default, other = s.guideline_scope("default"), s.guideline_scope("gastric")
    assert default == GuidelineScope("default", tmp_path / "g.db.index", tmp_path / "g.urls.xlsx",
                                     tmp_path / "g.db.check" / "default.json")
    assert other == GuidelineScope("gastric", tmp_path / "g.db.index" / "gastric", tmp_path / "g.gastric.urls.xlsx",
                                   tmp_path / "g.db.check" / "gastric.json")
    shared = s.replace(index_root=tmp_path / "shared").guideline_scope("gastric")
    assert shared.index_dir == tmp_path / "shared" / "gastric"
    for bad in ("", "auto", "Bad"):
        with pytest.raises(InputError):
            s.guideline_scope(bad)


def test_a_postgresql_location_is_the_store_and_a_local_anchor():
    s = Settings.load(env={"GUIDERAG_DB": "postgresql://u:pw@db.internal:5433/guide"})
    assert s.store == "postgresql://u:pw@db.internal:5433/guide" and s.store_name == "postgresql://***@db.internal:5433/guide"
    assert s.storage.db.name == "db.internal-5433-guide.db"
    local = s.replace(db=Path("/tmp/local.storage.db"))  # a new location is derived again
    assert local.store == Path("/tmp/local.storage.db") and local.storage.store_url is None
    assert StoreConfig(db="postgresql://h/x").store_url == "postgresql://h/x"  # type: ignore[arg-type]


# -- guiderag config ---------------------------------------------------------------------

def _config(capsys, args, monkeypatch, env):
    for key in [k for k in __import__("os").environ if k.startswith(("GUIDERAG_", "OPENAI_"))]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code = main(["config", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_config_json_lists_every_setting_with_its_value_and_source(capsys, monkeypatch):
    code, out, _ = _config(capsys, ["--json", "--threshold", "0.3", "--db", "postgresql://u:hunter2@h:5432/g"],
                           monkeypatch, {"GUIDERAG_API_KEY": "s3cret", "OPENAI_API_KEY": "sk-live",
                                         "OPENAI_BASE_URL": "http://me:pw@127.0.0.1:8080/v1", "GUIDERAG_MODE": "lines"})
    assert code == 0
    data = json.loads(out)
    assert list(data) == ["settings"]
    rows = {r["name"]: r for r in data["settings"]}
    assert [r["name"] for r in data["settings"]] == [s.name for s in REGISTRY]
    assert all(list(r) == ["name", "env", "stage", "default", "value", "source", "help"] for r in rows.values())
    assert rows["threshold"] == {"name": "threshold", "env": "GUIDERAG_THRESHOLD", "stage": "retrieval",
                                 "default": 0.2, "value": 0.3, "source": "flag", "help": BY_NAME["threshold"].help}
    assert rows["mode"]["value"] == "lines" and rows["mode"]["source"] == "environment"
    assert rows["reference_chars"]["source"] == "default" and rows["reference_chars"]["value"] == 4096
    assert rows["api_key"]["value"] == "***" and rows["openai_api_key"]["value"] == "***"
    assert rows["db"]["value"] == "postgresql://***@h:5432/g" and rows["db"]["source"] == "flag"
    assert rows["openai_base_url"]["value"] == "http://***@127.0.0.1:8080/v1"
    for secret in ("s3cret", "sk-live", "hunter2", ":pw@"):
        assert secret not in out


def test_config_text_groups_the_settings_by_stage(capsys, monkeypatch):
    code, out, err = _config(capsys, [], monkeypatch, {"GUIDERAG_MAX_PAGES": "50", "GUIDERAG_BM25_K1": "1.2"})
    assert code == 0
    assert [line for line in out.splitlines() if line.startswith("[")] == [f"[{s}]" for s in STAGES]
    assert re.search(r"^max_pages +50 +\(environment; default 2000\) +GUIDERAG_MAX_PAGES$", out, re.M)
    assert "GUIDERAG_BM25_K1 is ignored: bm25_k1 is no longer a setting" in err


def test_config_with_a_bad_value_exits_2_naming_it(capsys, monkeypatch):
    code, out, err = _config(capsys, ["--json"], monkeypatch, {"GUIDERAG_MODEL_CONCURRENCY": "-2"})
    assert code == 2 and out == ""
    assert err.strip() == ("guiderag: error: environment variable GUIDERAG_MODEL_CONCURRENCY must be at least 0, "
                           "not -2")


# -- the docs ------------------------------------------------------------------------------

def test_the_settings_reference_is_generated_from_the_registry(capsys, monkeypatch):
    """docs/settings.md is `guiderag config --markdown`: regenerate it when a setting changes."""
    doc = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    assert doc == reference_markdown(), "docs/settings.md is stale: run `guiderag config --markdown > docs/settings.md`"
    code, out, _ = _config(capsys, ["--markdown"], monkeypatch, {"GUIDERAG_THRESHOLD": "0.3"})
    assert code == 0 and out == doc  # machine- and environment-independent
    for s in REGISTRY:
        assert f"| `{s.name}` | `{s.env}` |" in doc


def test_the_docs_name_only_variables_that_exist():
    """README, ARCHITECTURE and CONTRACT name no variable that is not a setting (a former
    one, a typo), and README links the reference."""
    known = {key for s in REGISTRY for key in (s.env, *s.spec.aliases)} | SCRIPT_VARIABLES
    docs = [REPO / "README.md", REPO / "ARCHITECTURE.md"] + ([CONTRACT] if CONTRACT.exists() else [])
    for path in docs:
        named = set(re.findall(r"\b(?:GUIDERAG|OPENAI)_[A-Z0-9_]*[A-Z0-9]", path.read_text(encoding="utf-8")))
        assert named <= known, (path.name, sorted(named - known))
    assert "docs/settings.md" in (REPO / "README.md").read_text(encoding="utf-8")
