"""Shared pytest fixtures (keep this file small; one concern per test file)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/sitekit.py and friends

from guiderag.processes import SETTINGS_ENV_PREFIXES  # noqa: E402
from guiderag.scopes import ScraperConfig, StoreConfig  # noqa: E402
from guiderag.settings import Settings  # noqa: E402

# Scraping loopback sites fast: no delay, a tiny backoff, few retries, short timeouts.
FAST_SCRAPING = {"delay_s": 0.0, "backoff_s": 0.01, "timeout_s": 5.0, "retries": 2}


@pytest.fixture
def fast_scraper() -> ScraperConfig:
    """The scraper stage's own config for loopback sites (what scraper tests hand it)."""
    return ScraperConfig(**FAST_SCRAPING)


@pytest.fixture
def store_config(tmp_path: Path) -> StoreConfig:
    """The store stage's config: an SQLite store in tmp_path (the one fast_settings opens)."""
    return StoreConfig(db=tmp_path / "guide.db")


@pytest.fixture
def fast_settings(tmp_path: Path) -> Settings:
    """All the settings, for tests that go on from scraping to later stages: the store in
    tmp_path, scraping as fast_scraper, no progress bars."""
    return Settings.load(env={}, db=tmp_path / "guide.db", progress=False, **FAST_SCRAPING)


@pytest.fixture
def refused_port():
    """A loopback port on which every connection is refused, for as long as the test runs:
    bound by this process and never listening, so no other test (or service) can take it
    meanwhile, as one could a fixed port such as 9."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture(autouse=True)
def _no_library_left_loaded():
    """Each test starts without the libraries an earlier test loaded into this process
    (chatbot.library_cache keeps one per settings, as a server does)."""
    yield
    cache = sys.modules.get("guiderag.chatbot.library_cache")
    if cache is not None:
        cache.clear()


@pytest.fixture
def no_settings_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GUIDERAG_* / OPENAI_* value of the shell running pytest reaches the test."""
    import os

    for key in list(os.environ):
        if key.startswith(SETTINGS_ENV_PREFIXES):
            monkeypatch.delenv(key)


@pytest.fixture
def fast_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Environment for CLI runs: no stray GUIDERAG_* values, fast retries; returns the db path."""
    import os

    for key in list(os.environ):
        if key.startswith("GUIDERAG_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("GUIDERAG_DELAY_S", "0")
    monkeypatch.setenv("GUIDERAG_BACKOFF_S", "0.01")
    monkeypatch.setenv("GUIDERAG_RETRIES", "1")
    monkeypatch.setenv("GUIDERAG_TIMEOUT_S", "5")
    monkeypatch.setenv("GUIDERAG_PROGRESS", "0")
    db = tmp_path / "cli.db"
    monkeypatch.setenv("GUIDERAG_DB", str(db))
    return db


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt in this process, as at a terminal. A shell starting
    pytest in the background (`cmd &` without job control) hands it SIGINT ignored."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def scraped_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample scraped and indexed once per session, in a clean environment.
    Tests copy it (storekit.copy_store) before they change anything."""
    import os

    from guiderag.cli import main

    db = tmp_path_factory.mktemp("scraped-sample") / "guide.db"
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(SETTINGS_ENV_PREFIXES)}
    try:
        assert main(["scrape", "--sample", "--db", str(db), "--no-progress", "--delay", "0"]) == 0
    finally:
        os.environ.update(saved)
    return db


@pytest.fixture()
def sample_db(scraped_sample: Path, tmp_path: Path, no_settings_env, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the scraped sample store of this test's own, in a clean environment
    without progress bars (for CLI runs that read or change it)."""
    from storekit import copy_store

    monkeypatch.setenv("GUIDERAG_PROGRESS", "0")
    return copy_store(scraped_sample, tmp_path / "guide.db")


@pytest.fixture(scope="session")
def local_model(tmp_path_factory: pytest.TempPathFactory):
    """The real local model (llama.cpp's server with Gemma 3 270M, tests/local_model.py) on
    loopback, started once for the session and stopped at its end. Not installed: a failure
    saying how to install it (the README's test command does), never a skip."""
    import local_model as lm

    problem = lm.missing()
    if problem:
        pytest.fail(problem)
    with lm.serve(tmp_path_factory.mktemp("llm")) as model:
        yield model


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server for the session (tests/pgkit.py); yields its admin URL."""
    from pgkit import postgres_server

    with postgres_server() as url:
        yield url


@pytest.fixture
def pg_database(postgres: str):
    """A fresh, empty database on the session's server; yields its URL, drops it after."""
    import uuid

    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    yield postgres.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_at(request: pytest.FixtureRequest, tmp_path: Path):
    """Where a test's store lives, once per backend: an SQLite file, or a PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "g.db"
    return request.getfixturevalue("pg_database")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """How pytest-xdist (`-n auto`, scripts/test.sh; `--dist loadgroup --no-loadscope-reorder`,
    pyproject.toml) shares the tests between its workers, each of which has its own session
    fixtures (a scraped sample, a PostgreSQL server, the local model):

    - a module that uses the real local model runs whole in one worker: one llama.cpp
      server for the run, not one per worker, and no two model tests at once;
    - a module with a module-scoped fixture runs whole in one worker, so that the fixture
      is made once (interleaved with other tests, it would be torn down and made again);
    - every other test is a unit of its own, handed to whichever worker is free;
    - the long ones start first (the local model's, then those marked slow, browser or
      early), so that none is left running alone at the end while the other worker idles.
    Without -n the order is the same and the groups mean nothing."""
    model_modules = {item.nodeid.split("::")[0] for item in items if "local_model" in item.fixturenames}
    group: dict[str, str] = {}  # nodeid -> its xdist_group
    for item in items:
        module = item.nodeid.split("::")[0]
        if module in model_modules:
            group[item.nodeid] = "local_model"
        elif any(defs and defs[-1].scope in ("module", "class", "package") for defs in fixture_defs(item)):
            group[item.nodeid] = module
        if item.nodeid in group:
            item.add_marker(pytest.mark.xdist_group(group[item.nodeid]))

    def start(item: pytest.Item) -> int:
        if group.get(item.nodeid) == "local_model":
            return 0
        if any(item.get_closest_marker(name) for name in ("slow", "browser", "model")):
            return 1
        return 2 if item.get_closest_marker("early") else 3

    first: dict[str, int] = {}  # a group starts with its earliest test, all of it together
    for item in items:
        if item.nodeid in group:
            first[group[item.nodeid]] = min(first.get(group[item.nodeid], 3), start(item))
    items.sort(key=lambda item: first[group[item.nodeid]] if item.nodeid in group else start(item))  # stable


def fixture_defs(item: pytest.Item) -> list:
    """The fixture definitions a test uses, each name's candidates (the last one applies)."""
    info = getattr(item, "_fixtureinfo", None)  # pytest's own record of them (no public API)
    return list(info.name2fixturedefs.values()) if info is not None else []
