"""`guiderag loadbench`: concurrent clients against 1..R `guiderag serve` replicas of one store.

For each store (a SQLite file, and a PostgreSQL database when --pg URL is given), each
replica count, each worker count (`serve --workers W`) and each client count, the bench
starts that many `guiderag serve` processes on loopback over the same store, waits until
each is ready (its index loaded), then runs k client threads that post questions
round-robin over the replicas until `requests` answers are in or `seconds` have passed.
It prints requests per second, p50/p95 latency, errors, the audit rows the store gained
(which must equal the requests answered), and the CPU the serving processes spent per
answer (read from /proc: it does not depend on what else the machine runs), and compares
with the cost of one question through the CLI (`guiderag ask`, a new process each time)
and in-process (`Library.ask`, api.askbench: CPU per question and MeCab parses per ask).

Timings are of this machine under whatever else it runs: compare the rows of one run.
"""
from __future__ import annotations

import contextlib
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, Sequence
from urllib.parse import urlsplit

from guiderag.errors import EvalError, InputError
from guiderag.processes import answers_200, clean_env, free_port, stop_process, wait_until_serving
from guiderag.settings import Settings
from guiderag.redact import redact
from guiderag.store import Store
from guiderag.store.pages import store_exists

from .askbench import in_process

QUESTIONS = (
    "胸腺腫瘍にはどのような治療法がありますか？",
    "抗がん剤の副作用が心配です",
    "手術の後、いつから仕事に戻れますか",
    "治療費が払えるか不安です",
    "放射線治療の副作用は？",
    "骨折したときのギプスの巻き方を教えてください",
)
START_TIMEOUT_S = 180.0


@dataclass
class BenchRow:
    store: str  # "sqlite" | "postgresql"
    replicas: int
    clients: int
    requests: int = 0  # answered with 200
    errors: int = 0
    seconds: float = 0.0
    rps: float = 0.0
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    audit_rows: int = 0  # rows the store gained during the run
    error_samples: list[str] = field(default_factory=list)
    workers: int = 1  # uvicorn processes per replica (serve --workers)
    preload: bool = True  # the workers forked from a process that loaded the index
    server_cpu_ms: float = 0.0  # CPU of the serving processes per answer
    client_cpu_ms: float = 0.0  # CPU of the bench's client threads per answer


@dataclass
class Replicas:
    """Running `serve` processes: their URLs and process ids."""

    urls: list[str]
    pids: list[int]

    def cpu_s(self) -> float:
        """CPU seconds spent so far by the replicas and their worker processes."""
        return sum(tree_cpu_s(pid) for pid in self.pids)


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its live children (Linux /proc; 0 elsewhere)."""
    total = 0.0
    try:
        tick = os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):  # not a POSIX system
        return 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{p}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, ValueError, IndexError):
            continue
    return total


@contextlib.contextmanager
def replicas(db: str, count: int, logs: Path, index_roots: Sequence[Path | None] = (), *, workers: int = 1,
             preload: bool = True) -> Iterator[Replicas]:
    """`count` serve processes over `db` (each with `workers` workers), each ready (index
    loaded); yields their URLs. `index_roots[i]`: where replica i keeps its index
    (GUIDERAG_INDEX_ROOT; default beside the store, or this machine's folder for a
    PostgreSQL store)."""
    procs: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    try:
        for i in range(count):
            port = free_port()
            log = open(logs / f"serve-{i}.log", "wb")
            root = index_roots[i] if i < len(index_roots) else None
            extra = {"GUIDERAG_INDEX_ROOT": str(root)} if root is not None else {}
            extra["GUIDERAG_API_PRELOAD"] = "1" if preload else "0"
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "guiderag", "serve", "--port", str(port), "--workers", str(workers)],
                env=clean_env(GUIDERAG_DB=db, **extra), stdout=log, stderr=subprocess.STDOUT))
            log.close()
            urls.append(f"http://127.0.0.1:{port}")
        for url, proc in zip(urls, procs):
            if not wait_until_serving(proc, lambda: answers_200(url + "/readyz", timeout_s=60), START_TIMEOUT_S):
                raise EvalError(f"a replica did not start ({url}); see {logs}")
            for _ in range(4 * workers):  # every worker loaded (readyz of each: the kernel picks one)
                answers_200(url + "/readyz", timeout_s=60)
        yield Replicas(urls, [p.pid for p in procs])
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            stop_process(proc)


def audit_count(db: str) -> int:
    """Rows in the audit log (0 when no answer was ever written)."""
    with Store(db, create=False) as store:
        if not store.conn.table_exists("audit"):
            return 0
        return int(store.conn.execute("SELECT COUNT(*) FROM audit").fetchone()[0])


def startup(db: str, work: Path) -> list[dict]:
    """Seconds from starting one replica to its /readyz: with an index folder already built
    (a volume the replicas share), and with an empty one (each replica builds its own)."""
    shared = work / "shared-index"
    rows = []
    for how, root in (("builds its own index at start-up", work / "own-index"), ("shared, prebuilt index", shared)):
        if how.startswith("shared"):
            with replicas(db, 1, work, [shared], workers=1):  # a first replica builds it
                pass
        t0 = time.perf_counter()
        with replicas(db, 1, work, [root], workers=1):
            ready = time.perf_counter() - t0
        rows.append({"replica": how, "seconds_to_ready": round(ready, 2)})
    return rows


class Client:
    """One client thread's keep-alive connections, one per replica (http.client: the bench
    shares the machine's cores with the servers, so its own cost per request is kept small
    and no request pays a connection set-up)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._conns: dict[str, http.client.HTTPConnection] = {}

    def post(self, url: str, path: str, body: dict) -> tuple[int, bytes]:
        """(status, body) of one POST of `body` as JSON; a kept connection the server closed
        meanwhile is opened again, once (else OSError or http.client.HTTPException)."""
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "Content-Length": str(len(data))}
        for attempt in (1, 2):
            conn = self._conns.get(url)
            fresh = conn is None
            if conn is None:
                parts = urlsplit(url)
                conn = self._conns[url] = http.client.HTTPConnection(parts.hostname or "", parts.port,
                                                                     timeout=self.timeout_s)
            try:
                conn.request("POST", path, body=data, headers=headers)
                reply = conn.getresponse()
                content = reply.read()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                del self._conns[url]
                # only a kept connection the server had closed (idle) is tried again
                if fresh or attempt == 2 or not isinstance(exc, (ConnectionResetError, BrokenPipeError)):
                    raise
                continue
            if reply.will_close:
                conn.close()
                del self._conns[url]
            return reply.status, content
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


def run_clients(urls: Sequence[str], clients: int, total: int, seconds: float,
                questions: Sequence[str] = QUESTIONS) -> tuple[list[float], list[str], float]:
    """k client threads, round-robin over `urls`, until `total` answers or `seconds` pass:
    (latencies in ms of the answered requests, error texts, wall seconds)."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    issued = 0
    deadline = time.monotonic() + seconds

    def client(k: int) -> None:
        nonlocal issued
        session = Client(timeout_s=max(1.0, seconds + 30))
        try:
            while time.monotonic() < deadline:
                with lock:
                    if issued >= total:
                        return
                    n = issued
                    issued += 1
                url = urls[n % len(urls)]
                t0 = time.perf_counter()
                try:
                    status, content = session.post(url, "/v1/ask", {"question": questions[n % len(questions)]})
                    ok = status == 200
                    why = "" if ok else f"HTTP {status}: {content[:200].decode('utf-8', 'replace')}"
                except (OSError, http.client.HTTPException) as exc:
                    ok, why = False, f"{type(exc).__name__}: {exc}"
                ms = (time.perf_counter() - t0) * 1000.0
                with lock:
                    (latencies.append(ms) if ok else errors.append(why))
        finally:
            session.close()

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors, time.monotonic() - started


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def bench_store(kind: str, db: str, replica_counts: Sequence[int], clients: Sequence[int], total: int,
                seconds: float, logs: Path, worker_counts: Sequence[int] = (1,),
                preloads: Sequence[bool] = (True,)) -> list[BenchRow]:
    rows = []
    for count in replica_counts:
        for workers in worker_counts:
            for preload in (preloads if workers > 1 else (True,)):
                with replicas(db, count, logs, workers=workers, preload=preload) as running:
                    for k in clients:
                        before = audit_count(db)
                        server, client = running.cpu_s(), time.process_time()
                        latencies, errors, wall = run_clients(running.urls, k, total, seconds)
                        server, client = running.cpu_s() - server, time.process_time() - client
                        gained = audit_count(db) - before
                        answered = max(1, len(latencies))
                        rows.append(BenchRow(
                            store=kind, replicas=count, clients=k, requests=len(latencies), errors=len(errors),
                            seconds=round(wall, 2), rps=round(len(latencies) / wall, 1) if wall else 0.0,
                            p50_ms=round(statistics.median(latencies), 1) if latencies else 0.0,
                            p95_ms=round(_percentile(latencies, 0.95), 1), audit_rows=gained,
                            error_samples=errors[:3], workers=workers, preload=preload,
                            server_cpu_ms=round(1000 * server / answered, 2),
                            client_cpu_ms=round(1000 * client / answered, 2),
                        ))
    return rows


def cli_cost(db: str, questions: int = 3) -> float:
    """Seconds for one question through `guiderag ask` (a new process each time), median."""
    times = []
    for q in QUESTIONS[:questions]:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "guiderag", "ask", q, "--json"], env=clean_env(GUIDERAG_DB=db),
                       capture_output=True, check=True, timeout=300)
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times), 3)


def sample_store(folder: Path, location: str | None = None) -> str:
    """The bundled sample scraped (with its index) into `location`, by default a new SQLite
    store in `folder`."""
    db = location or str(folder / "loadbench.db")
    subprocess.run([sys.executable, "-m", "guiderag", "scrape", "--sample", "--db", db], env=clean_env(GUIDERAG_DB=db),
                   capture_output=True, check=True, timeout=600)
    return db


def run(settings: Settings, *, clients: Sequence[int], total: int, seconds: float, replica_counts: Sequence[int],
        pg_url: str | None, sqlite_db: str | None, workdir: Path | None = None,
        worker_counts: Sequence[int] = (1,), preloads: Sequence[bool] = (True,)) -> dict:
    """The whole bench; returns the report printed by `guiderag loadbench`."""
    if (not clients or min(clients) < 1 or total < 1 or seconds <= 0 or not replica_counts
            or min(replica_counts) < 1 or not worker_counts or min(worker_counts) < 1):
        raise InputError("--clients, --requests and --seconds must be positive, --replicas and --workers at least 1")
    with tempfile.TemporaryDirectory(prefix="guiderag-loadbench-") as tmp:
        work = Path(workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        db = sqlite_db or sample_store(work)
        rows = bench_store("sqlite", db, replica_counts, clients, total, seconds, work, worker_counts, preloads)
        notes = [f"sqlite store: {db}"]
        starts: list[dict] = []
        if pg_url:
            if not _has_pages(pg_url):
                sample_store(work, pg_url)
            rows += bench_store("postgresql", pg_url, replica_counts, clients, total, seconds, work, worker_counts,
                                preloads)
            notes.append("postgresql store: " + redact(pg_url))
            starts = startup(pg_url, work)
        else:
            notes.append("no --pg URL: PostgreSQL rows left out")
            starts = startup(db, work)
        cli = cli_cost(db)
        own = in_process(settings, db)
    notes.append(f"load average {os.getloadavg()[0]:.2f} at the end, {os.cpu_count()} cores; server_cpu_ms and "
                 "client_cpu_ms: CPU per answer of the serving processes and of the client threads")
    return {"rows": [asdict(r) for r in rows], "cli_seconds_per_question": cli, "in_process": own, "startup": starts,
            "notes": notes}


def _has_pages(location: str) -> bool:
    if not store_exists(location):
        return False
    with Store(location, create=False) as store:
        return bool(store.current_pages())


def table(report: dict) -> str:
    cols = ("store", "replicas", "workers", "preload", "clients", "requests", "errors", "seconds", "rps", "p50_ms",
            "p95_ms", "audit_rows", "server_cpu_ms", "client_cpu_ms")
    lines = ["\t".join(cols)]
    for row in report["rows"]:
        lines.append("\t".join(str(row[c]) for c in cols))
    lines.append(f"# guiderag ask through the CLI (a new process per question): "
                 f"{report['cli_seconds_per_question']} s per question")
    own = report.get("in_process")
    if own:
        lines.append(f"# in-process Library.ask (extract, SQLite, audit row included), {own['questions']} questions "
                     f"not asked before: {own['cpu_ms_per_ask']} ms CPU per question ({own['wall_ms_per_ask']} ms "
                     f"wall); MeCab parses (retrieval.analyzer.tokenize) per ask: {own['tokenize_per_ask']}")
        for entry in own.get("profile_top", [])[:6]:
            lines.append(f"#   profile: {entry['function']}: {entry['own_ms_per_ask']} ms own, "
                         f"{entry['cumulative_ms_per_ask']} ms with callees per ask ({entry['calls']} calls)")
    for start in report.get("startup", []):
        lines.append(f"# a replica that {start['replica'] if start['replica'].startswith('builds') else 'reads a ' + start['replica']}: "
                     f"ready in {start['seconds_to_ready']} s")
    lines += [f"# {n}" for n in report["notes"]]
    return "\n".join(lines)


def print_report(report: dict, as_json: bool) -> None:
    print(json.dumps(report, ensure_ascii=False, indent=2) if as_json else table(report))
