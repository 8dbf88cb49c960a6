"""A real PostgreSQL server for the tests: Debian's package, `initdb` into a temporary folder as
a non-root user, listening on 127.0.0.1 (a free port) and on a socket in that folder, stopped
and removed at the end.

PostgreSQL refuses to run as root; when the tests run as root, the server runs as the
`postgres` system user that Debian's package creates (runuser). scripts/test.sh installs
the package when it is missing.
"""
from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

from guiderag.processes import free_port

START_TIMEOUT_S = 60.0


def pg_bin(name: str) -> str:
    """A PostgreSQL program: Debian keeps them in /usr/lib/postgresql/<version>/bin."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    if found:
        return found[-1]
    on_path = shutil.which(name)
    if on_path:
        return on_path
    raise AssertionError(f"PostgreSQL's {name} not found: install Debian's postgresql package "
                         "(scripts/test.sh does) and run the tests again")


# Where runuser lives (util-linux): root's PATH may lack the sbin folders (PATH=/usr/bin:/bin).
RUNUSER_PLACES = ("/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser", "/bin/runuser")


def runuser() -> str:
    """The runuser program, on PATH or in the sbin folders; AssertionError saying what is missing."""
    found = shutil.which("runuser") or next((p for p in RUNUSER_PLACES if os.access(p, os.X_OK)), None)
    if found is None:
        raise AssertionError("the tests run as root, where PostgreSQL will not run: they start it as the "
                             "postgres user with runuser (util-linux), found neither on PATH nor in "
                             "/usr/sbin or /sbin; install util-linux, or run the tests as another user")
    return found


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return [runuser(), "-u", "postgres", "--", *cmd]


def _run(cmd: list[str], timeout: float = 120) -> None:
    proc = subprocess.run(_as_server_user(cmd), capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-2000:]}")


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Yield the URL of a fresh server's `guiderag` database (user `guiderag`, no password,
    trust authentication on loopback only)."""
    folder = Path(tempfile.mkdtemp(prefix="guiderag-pg-", dir="/tmp"))
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
    data = folder / "data"
    port = free_port()
    try:
        _run([pg_bin("initdb"), "-D", str(data), "-U", "guiderag", "--auth=trust", "-E", "UTF8",
              "--locale=C.UTF-8", "--no-sync"])
        _run([pg_bin("pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-w", "-t", "60",
              "-o", f"-c listen_addresses=127.0.0.1 -c port={port} -k {folder} -c fsync=off "
                    "-c max_connections=200", "start"])
        _run([pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "guiderag", "guiderag"])
        yield f"postgresql://guiderag@127.0.0.1:{port}/guiderag"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(_as_server_user([pg_bin("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                           capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def wait_ready(url: str) -> None:
    """Wait until the server accepts connections (pg_ctl -w already waits; belt and braces)."""
    import psycopg

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
