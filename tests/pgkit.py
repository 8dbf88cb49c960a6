"""A real PostgreSQL server for the tests: Debian's package, `initdb` into a temporary folder as
a non-root user, listening on 127.0.0.1 (a free port) and on a socket in that folder, stopped
and removed at the end.

PostgreSQL refuses to run as root; when the tests run as root, the server runs as the
`postgres` system user that Debian's package creates, through `runuser` (util-linux: in
/usr/sbin, which a root PATH of /usr/bin:/bin lacks, so it is looked for there too).
scripts/test.sh installs the package when it is missing.

`paused(url)` stops the whole server (`kill -STOP` of the postmaster and every backend)
for a block and resumes it at the end, however the block ends: a hung database.
"""
from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

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


# Where util-linux puts runuser when it is not on PATH (Debian: /usr/sbin; older: /sbin).
RUNUSER_DIRS = ("/usr/sbin", "/sbin")
# The data folder of each server started here, by port (for paused()).
_DATA_DIRS: dict[int, Path] = {}


def runuser() -> str:
    """The runuser program: on PATH, else in /usr/sbin or /sbin."""
    found = shutil.which("runuser") or next(
        (str(Path(d) / "runuser") for d in RUNUSER_DIRS if os.access(Path(d) / "runuser", os.X_OK)), None)
    if found is None:
        raise AssertionError("runuser not found on PATH nor in /usr/sbin or /sbin: the tests run as root start "
                             "PostgreSQL as the postgres user with it; install util-linux (Debian: "
                             "apt-get install util-linux), or run the tests as a user other than root")
    return found


def _server_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise AssertionError("no `postgres` system user to run PostgreSQL as (the tests run as root): install "
                             "Debian's postgresql package, which creates it (scripts/test.sh does)") from None


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
        user = _server_user()
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
        _DATA_DIRS[port] = data
        yield f"postgresql://guiderag@127.0.0.1:{port}/guiderag"
    finally:
        _DATA_DIRS.pop(port, None)
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


def server_pids(url: str) -> list[int]:
    """The postmaster of the server at `url` (one started here) and its children."""
    master = int((_DATA_DIRS[urlsplit(url).port or 5432] / "postmaster.pid").read_text().split()[0])
    return [master] + _children(master)


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the process ended meanwhile
        if ppid == pid:
            found.append(int(stat.parent.name))
    return found


@contextlib.contextmanager
def paused(url: str) -> Iterator[list[int]]:
    """`kill -STOP` the whole server at `url` (the postmaster first, so that it forks no new
    backend, then every backend), yield the pids; SIGCONT them all when the block ends."""
    master = server_pids(url)[0]
    stopped = [master]
    os.kill(master, signal.SIGSTOP)
    try:
        for pid in _children(master):
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        yield stopped
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
