"""Bounded waits on a hung PostgreSQL (issue #24): a real server of this module's own
(tests/pgkit.py, started with PATH=/usr/bin:/bin, as root without runuser on PATH) stopped
with `kill -STOP` (pgkit.paused; SIGCONT in a finally). Making a connection, a statement
and a checkout of the pool each end within their bound with a one-line StoreTimeoutError
saying which wait ran out (never the password); a live server's own statement_timeout
ends a slow statement the same way; and once the server resumes, the same process works
again: its pool replaced the connections it gave up on.

Each bound is checked from both sides: the wait lasted at least the bound (the server
really was hung and the setting was applied) and ended soon after it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from guiderag.errors import InputError, StoreTimeoutError
from guiderag.processes import clean_env
from guiderag.settings import Settings, StoreConfig
from guiderag.store import Store
from guiderag.store.connection import PgOptions, configure, pg_options
from guiderag.store.pg import close_pools
from pgkit import paused, postgres_server

pytestmark = pytest.mark.slow  # each test waits out a PostgreSQL connect, statement or pool timeout

PASSWORD = "S3cretPw"
# Scheduling slack on a loaded 2-core machine: a wait ends at most this long after its bound.
SLACK_S = 1.5
# Two bounds apart, so each test sees which one ended its wait.
OPTIONS = PgOptions(pool_size=2, connect_timeout_s=2, statement_timeout_s=1.5, pool_timeout_s=1.0)
STATEMENT_BOUND_S = OPTIONS.statement_timeout_s + 1.0  # the client's deadline for a silent server


@pytest.fixture(scope="module")
def server():
    """A server of this module's own (stopping it must not touch other tests' databases),
    started the way #24 found failing: as root with PATH=/usr/bin:/bin."""
    saved = os.environ["PATH"]
    os.environ["PATH"] = "/usr/bin:/bin"
    try:
        with postgres_server() as url:
            os.environ["PATH"] = saved
            secret = url.replace("postgresql://guiderag@", f"postgresql://guiderag:{PASSWORD}@")  # trust: any password
            Store(secret, options=OPTIONS).close()  # the store's tables, once
            yield secret
            close_pools()  # before the server goes: no pool left reconnecting to it
    finally:
        os.environ["PATH"] = saved


def _timed(call):
    start = time.monotonic()
    with pytest.raises(StoreTimeoutError) as info:
        call()
    return time.monotonic() - start, info.value


def _one_line_without_password(exc: StoreTimeoutError) -> str:
    message = str(exc)
    assert "\n" not in message and PASSWORD not in message and "***@127.0.0.1" in message, message
    return message


def _works_again(url: str, options: PgOptions = OPTIONS) -> None:
    with Store(url, create=False, options=options) as store:
        assert store.current_pages() == [] and store.state() == "run 0; removed 0"


def test_a_connection_to_a_stopped_server_ends_within_the_connect_timeout(server: str) -> None:
    fresh = PgOptions(pool_size=3, connect_timeout_s=2, statement_timeout_s=1.5, pool_timeout_s=1.0)  # no pool yet
    with paused(server):
        for call in (lambda: Store(server, readonly=True, options=fresh),  # `check`: a connection of its own
                     lambda: Store(server, create=False, options=fresh)):  # the first pooled open
            seconds, exc = _timed(call)
            print(f"connect: StoreTimeoutError after {seconds:.2f} s (bound {fresh.connect_timeout_s} s)")
            assert fresh.connect_timeout_s - 0.1 <= seconds <= fresh.connect_timeout_s + SLACK_S
            assert exc.wait == "connect" and exc.seconds == fresh.connect_timeout_s
            message = _one_line_without_password(exc)
            assert "did not accept a connection within 2 s (GUIDERAG_PG_CONNECT_TIMEOUT_S)" in message
    _works_again(server, fresh)


def test_a_statement_on_a_stopped_server_ends_within_its_bound(server: str) -> None:
    reading, writing = Store(server, create=False, options=OPTIONS), Store(server, create=False, options=OPTIONS)
    try:
        with paused(server):
            for what, call in (("read", reading.current_pages), ("write", lambda: writing.set_meta("k", "v"))):
                seconds, exc = _timed(call)
                print(f"statement ({what}): StoreTimeoutError after {seconds:.2f} s (bound {STATEMENT_BOUND_S} s)")
                assert STATEMENT_BOUND_S - 0.1 <= seconds <= STATEMENT_BOUND_S + SLACK_S
                assert exc.wait == "statement" and exc.seconds == OPTIONS.statement_timeout_s
                assert "did not finish a statement within 1.5 s" in _one_line_without_password(exc)
    finally:
        reading.close()
        writing.close()
    _works_again(server)
    with Store(server, create=False, options=OPTIONS) as store:
        assert store.get_meta("k") is None  # the interrupted write was not committed


def test_a_live_servers_statement_timeout_ends_a_slow_statement(server: str) -> None:
    with Store(server, create=False, options=OPTIONS) as store:
        seconds, exc = _timed(lambda: store.conn.execute("SELECT pg_sleep(10)").fetchone())
        print(f"statement (server-side statement_timeout): after {seconds:.2f} s")
        assert OPTIONS.statement_timeout_s - 0.1 <= seconds <= OPTIONS.statement_timeout_s + SLACK_S
        assert exc.wait == "statement"
        assert store.conn.execute("SELECT 1").fetchone()[0] == 1  # the server cancelled it: still usable


def test_a_pool_checkout_ends_within_the_pool_timeout_while_the_server_hangs(server: str) -> None:
    """Both connections of the pool hang in statements; a third request waits for one."""
    Store(server, create=False, options=OPTIONS).close()  # the pool exists
    outcomes: list[tuple[str, float]] = []

    def hung_request() -> None:
        start = time.monotonic()
        try:
            with Store(server, create=False, options=OPTIONS) as store:
                store.current_pages()
            outcomes.append(("answered", time.monotonic() - start))
        except StoreTimeoutError as exc:
            outcomes.append((exc.wait, time.monotonic() - start))

    with paused(server):
        threads = [threading.Thread(target=hung_request) for _ in range(OPTIONS.pool_size)]
        for t in threads:
            t.start()
        time.sleep(0.3)  # both hold their connection, waiting on the server
        seconds, exc = _timed(lambda: Store(server, create=False, options=OPTIONS))
        print(f"pool: StoreTimeoutError after {seconds:.2f} s (bound {OPTIONS.pool_timeout_s} s)")
        assert OPTIONS.pool_timeout_s - 0.1 <= seconds <= OPTIONS.pool_timeout_s + SLACK_S
        assert exc.wait == "pool"
        message = _one_line_without_password(exc)
        assert "no connection to the PostgreSQL store" in message and "all 2 of this process are busy" in message
        for t in threads:
            t.join(timeout=STATEMENT_BOUND_S + 10)
    print(f"the hung requests: {[(w, round(s, 2)) for w, s in outcomes]}")
    assert [w for w, _ in outcomes] == ["statement"] * OPTIONS.pool_size
    assert all(s <= STATEMENT_BOUND_S + SLACK_S for _, s in outcomes)
    for _ in range(OPTIONS.pool_size + 1):  # every connection of the pool works again
        _works_again(server)


def test_an_api_request_on_a_hung_store_ends_with_store_timeout(server: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """What the API's 503 rests on: Service (the API's store access) configures this
    process's store from its settings, and a request on a stopped server ends within the
    pool and statement bounds with StoreTimeoutError, then answers again after SIGCONT."""
    import guiderag.store.connection as connection
    from guiderag.api.service import Service

    monkeypatch.setattr(connection, "_configured", connection._configured)  # put back after the test
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    settings = Settings.load(env={}, db=server, pg_pool_size=2, pg_connect_timeout_s=2,
                             pg_statement_timeout_s=1.5, pg_pool_timeout_s=1.0, progress=False)
    service = Service(settings)
    assert pg_options() == OPTIONS  # applied to every store this process opens
    assert service.pages() == []
    with paused(server):
        seconds, exc = _timed(service.pages)
    print(f"API request (pages): StoreTimeoutError after {seconds:.2f} s")
    assert exc.wait in ("statement", "pool") and seconds <= STATEMENT_BOUND_S + SLACK_S
    assert service.pages() == []


def test_the_cli_reads_the_bounds_from_the_environment(server: str, tmp_path: Path) -> None:
    """GUIDERAG_PG_CONNECT_TIMEOUT_S reaches the connection a command makes (not the 10 s
    default): one line naming the wait and the setting, exit 1, no password."""
    env = clean_env(GUIDERAG_PG_CONNECT_TIMEOUT_S="2", XDG_DATA_HOME=str(tmp_path / "xdg"))
    with paused(server):
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "guiderag", "pages", "--db", server], env=env,
                              capture_output=True, text=True, timeout=60)
        seconds = time.monotonic() - start
    print(f"`guiderag pages` on a stopped server: exit {done.returncode} after {seconds:.2f} s")
    assert done.returncode == 1 and seconds >= 2.0  # (the message names the 2 s: the default is 10)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr and PASSWORD not in done.stderr, done.stderr
    assert "did not accept a connection within 2 s (GUIDERAG_PG_CONNECT_TIMEOUT_S)" in lines[0]


def test_settings_reach_the_store_where_no_entry_point_configured_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that never configured its store (a script) takes GUIDERAG_PG_* from the
    environment; configure() takes the store stage's own config (a command's
    settings.storage), not the whole Settings."""
    import guiderag.store.connection as connection

    monkeypatch.setattr(connection, "_configured", None)
    monkeypatch.setenv("GUIDERAG_PG_POOL_SIZE", "3")
    monkeypatch.setenv("GUIDERAG_PG_STATEMENT_TIMEOUT_S", "7.5")
    assert pg_options() == PgOptions(pool_size=3, connect_timeout_s=10, statement_timeout_s=7.5, pool_timeout_s=10.0)
    configure(StoreConfig(pg_pool_size=5))
    assert pg_options().pool_size == 5 and pg_options().statement_timeout_s == 30.0
    configure(Settings.load(env={}, pg_pool_size=5).storage)
    assert pg_options().pool_size == 5 and pg_options().statement_timeout_s == 30.0
    monkeypatch.setattr(connection, "_configured", None)
    monkeypatch.setenv("GUIDERAG_PG_POOL_SIZE", "0")  # checked as Settings.load checks it
    with pytest.raises(InputError, match="environment variable GUIDERAG_PG_POOL_SIZE must be at least 1"):
        pg_options()


def test_psycopg_offers_what_the_deadline_rests_on() -> None:
    """store.pg's DeadlineConnection overrides psycopg's Connection.wait(gen, interval,
    timeout) and catches its wait timeout: pinned, so an upgrade of psycopg that changes
    them fails here rather than in production."""
    import inspect

    assert list(inspect.signature(psycopg.Connection.wait).parameters) == ["self", "gen", "interval", "timeout"]
    assert issubclass(psycopg.errors._WaitTimeout, psycopg.OperationalError)


def test_a_timeout_told_from_the_callers_side_stays_a_timeout() -> None:
    """The audit log and the store's open restate a failure ("could not write the audit
    log..."): a StoreTimeoutError stays one, with which wait ran out, for the API's 503."""
    from guiderag.store.connection import restate

    exc = StoreTimeoutError("the store did not answer", path="postgresql://***@h:5432/d", reason="no answer within 1 s",
                            advice="check the server", wait="statement", seconds=1.0)
    told = restate(exc, "could not write the audit log, so the answer was not shown")
    assert isinstance(told, StoreTimeoutError) and (told.wait, told.seconds, told.path) == ("statement", 1.0, exc.path)
    assert str(told) == ("could not write the audit log, so the answer was not shown (no answer within 1 s). "
                         "Check the server")
