"""Settings: defaults, environment, CLI overrides, validation."""
from __future__ import annotations

from pathlib import Path

import pytest

from guiderag.cli import main
from guiderag.errors import InputError
from guiderag.settings import Settings


def test_defaults_keep_the_protocol_parameters():
    s = Settings.load(env={})
    assert s.threshold == 0.2 and s.reference_chars == 4096 and s.mode == "extract"
    assert s.pipeline == "ours" and not s.model_configured


def test_environment_then_overrides():
    env = {"GUIDERAG_DB": "/tmp/x.db", "GUIDERAG_THRESHOLD": "0.3", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
           "GUIDERAG_MODEL": "m", "GUIDERAG_FALLBACK_TO_EXTRACT": "yes"}
    s = Settings.load(env=env, threshold=0.5)
    assert s.db == Path("/tmp/x.db") and s.threshold == 0.5
    assert s.answer_model == "m" and s.keywords_model == "m" and s.model_configured
    assert s.fallback_to_extract is True
    assert s.index_dir == Path("/tmp/x.db.index")


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
    from guiderag.errors import InputError

    with pytest.raises(InputError):
        Settings.load(env={}, **{field: value})


@pytest.mark.parametrize("field, value", [
    ("pg_pool_size", 0), ("pg_connect_timeout_s", 1), ("pg_statement_timeout_s", 0.0), ("pg_pool_timeout_s", -1.0),
])
def test_unbounded_or_impossible_postgresql_waits_are_refused(field, value):
    """Each wait on PostgreSQL is bounded (no 0 for "for ever"); libpq's connect timeout is
    whole seconds, at least 2."""
    with pytest.raises(InputError, match=field):
        Settings.load(env={}, **{field: value})
