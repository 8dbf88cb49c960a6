"""The tests' PostgreSQL kit works from a minimal PATH: as root it starts the server through
runuser, which Debian keeps in /usr/sbin (issue #24: with PATH=/usr/bin:/bin all 20
PostgreSQL tests errored)."""
from __future__ import annotations

import os

import pytest

from pgkit import postgres_server, runuser


def test_runuser_is_found_outside_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert os.path.basename(runuser()) == "runuser" and os.access(runuser(), os.X_OK)


@pytest.mark.skipif(os.geteuid() != 0, reason="runuser is used only when the tests run as root")
def test_a_server_starts_as_root_with_path_usr_bin_bin(monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    with postgres_server() as url:
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT current_user").fetchone()[0] == "guiderag"
