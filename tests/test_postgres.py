"""PostgreSQL as the shared store, with a real server (tests/pgkit.py): the same guarantees as
SQLite. A scrape is one transaction and a failed one leaves the last good corpus; two scrapes
of one store cannot interleave (an advisory lock); a newer schema is refused and two processes
migrating at once migrate once; a store that cannot be reached is one line naming it without
its password; the CLI's answers and listings are those of an SQLite store of the same site.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from guiderag.processes import clean_env
from guiderag.cli import main
from guiderag.store import Store
from sitekit import Site, html_page
from storekit import copy_store

THYMIC = "胸腺腫瘍にはどのような治療法がありますか？"


def cli(args: list[str], tmp_path: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = clean_env(GUIDERAG_DELAY_S="0", GUIDERAG_BACKOFF_S="0.01", GUIDERAG_RETRIES="0",
                    XDG_DATA_HOME=str(tmp_path / "xdg"))
    return subprocess.run([sys.executable, "-m", "guiderag", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def _site(n: int = 3) -> Site:
    site = Site()
    links = "".join(f'<li><a href="q{i}.html">Q{i}</a></li>' for i in range(1, n + 1))
    site.page("/guide/index.html", html_page("目次", f"<main><h1>目次</h1><ul>{links}</ul></main>"))
    for i in range(1, n + 1):
        site.page(f"/guide/q{i}.html", html_page(f"Q{i} 治療{i}", f"<main><h1>Q{i} 治療{i}</h1>"
                                                               f"<p>治療{i}について説明します。</p></main>"))
    return site


def without_time(item: dict) -> dict:
    """A passage or page listing without its fetch time (the two stores were scraped apart)."""
    return {k: v for k, v in item.items() if k != "fetched_at"}


def dump(url: str) -> list:
    with Store(url, create=False) as store:
        return [(p.url, p.version, p.content_hash) for p in store.current_pages()]


@pytest.mark.early  # nine CLI processes
@pytest.mark.slow
def test_the_sample_in_postgresql_answers_and_lists_as_sqlite_does(pg_database: str, scraped_sample: Path,
                                                                   tmp_path: Path) -> None:
    sqlite_db = copy_store(scraped_sample, tmp_path / "s.db")  # `scrape --sample` into SQLite (conftest)
    done = cli(["scrape", "--sample", "--db", pg_database], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "added 32" in done.stdout
    pg_ask = cli(["ask", THYMIC, "--json", "--db", pg_database], tmp_path)
    sq_ask = cli(["ask", THYMIC, "--json", "--db", str(sqlite_db)], tmp_path)
    a, b = json.loads(pg_ask.stdout), json.loads(sq_ask.stdout)
    for key in ("coverage", "answer", "keywords", "guideline"):
        assert a[key] == b[key], key
    assert [without_time(p) for p in a["passages"]] == [without_time(p) for p in b["passages"]]
    assert a["audit_id"] == 1
    pages = [json.loads(cli(["pages", "--json", "--db", w], tmp_path).stdout)["pages"] for w in (pg_database, str(sqlite_db))]
    assert [without_time(p) for p in pages[0]] == [without_time(p) for p in pages[1]] and len(pages[0]) == 32
    guidelines = json.loads(cli(["guidelines", "--json", "--db", pg_database], tmp_path).stdout)["guidelines"]
    assert [g["id"] for g in guidelines] == ["default"] and guidelines[0]["pages"] == 32
    out = tmp_path / "audit.xlsx"
    assert cli(["audit", "--out", str(out), "--db", pg_database], tmp_path).returncode == 0 and out.is_file()
    again = cli(["scrape", "--sample", "--db", pg_database], tmp_path)
    assert "unchanged 32" in again.stdout and "no page changed" in again.stdout
    with psycopg.connect(pg_database) as conn:
        assert conn.execute("SELECT COUNT(*) FROM audit").fetchone()[0] == 1
        assert conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] >= 2


def test_a_failed_scrape_leaves_the_last_good_corpus(pg_database: str, tmp_path: Path) -> None:
    site = _site(4)
    with site.serve() as base:
        toc = base + "/guide/index.html"
        assert cli(["scrape", toc, "--db", pg_database, "--no-index"], tmp_path).returncode == 0
        before = dump(pg_database)
        for i in range(1, 5):
            site.page(f"/guide/q{i}.html", html_page(f"Q{i}", f"<main><h1>Q{i}</h1><p>改訂{i}</p></main>"))
        site.go_down_after(3)  # robots.txt, the TOC, one page: then down
        failed = cli(["scrape", toc, "--db", pg_database, "--no-index"], tmp_path)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert dump(pg_database) == before
    with Store(pg_database, create=False) as store:
        assert store.runs()[0]["status"] == "failed"


def test_two_scrapes_of_one_store_cannot_interleave(pg_database: str, tmp_path: Path) -> None:
    site = _site(2)
    with site.serve() as base:
        toc = base + "/guide/index.html"
        assert cli(["scrape", toc, "--db", pg_database, "--no-index"], tmp_path).returncode == 0
        before, hits = dump(pg_database), dict(site.hits)
        holder = subprocess.Popen(
            [sys.executable, "-c",
             "import sys; from guiderag.store.lock import scrape_lock\n"
             "with scrape_lock(sys.argv[1]):\n    print('held', flush=True); sys.stdin.readline()",
             pg_database],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=clean_env(),
        )
        try:
            assert holder.stdout.readline().strip() == "held"
            busy = cli(["scrape", toc, "--db", pg_database, "--no-index"], tmp_path)
            assert busy.returncode == 1
            assert "another scrape is writing to" in busy.stderr and "server process" in busy.stderr
            assert dump(pg_database) == before and dict(site.hits) == hits
        finally:
            holder.communicate("\n", timeout=30)
        assert cli(["scrape", toc, "--db", pg_database, "--no-index"], tmp_path).returncode == 0


def test_an_unreachable_store_is_one_line_without_the_password(tmp_path: Path, refused_port: int) -> None:
    url = f"postgresql://nurse:S3cretPw@127.0.0.1:{refused_port}/guiderag"
    for args in (["ask", THYMIC], ["pages"], ["guidelines"], ["index"]):
        done = cli([*args, "--db", url], tmp_path, timeout=60)
        assert done.returncode == 1, (args, done.stderr)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
        assert "cannot reach the PostgreSQL store" in lines[0] and "S3cretPw" not in done.stderr


def test_an_empty_database_is_no_store_for_readers_and_gains_nothing(pg_database: str, tmp_path: Path) -> None:
    done = cli(["ask", THYMIC, "--db", pg_database], tmp_path)
    assert done.returncode == 2 and "holds no page store yet" in done.stderr
    with psycopg.connect(pg_database) as conn:
        tables = conn.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'").fetchone()[0]
    assert tables == 0


def test_two_processes_migrate_a_fresh_database_once(pg_database: str) -> None:
    code = "import sys; from guiderag.store import Store\nStore(sys.argv[1]).close()"
    procs = [subprocess.Popen([sys.executable, "-c", code, pg_database], env=clean_env()) for _ in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    with psycopg.connect(pg_database) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
    assert versions == sorted(set(versions)) and versions[0] == 1


def test_a_store_from_a_newer_guiderag_is_refused(pg_database: str, tmp_path: Path) -> None:
    Store(pg_database).close()
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations (version, description, applied_at) VALUES (999, 'future', 'x')")
    done = cli(["pages", "--db", pg_database], tmp_path)
    assert done.returncode == 1 and "newer guiderag" in done.stderr and "Traceback" not in done.stderr


def test_rows_read_by_name_and_position() -> None:
    from guiderag.store.pg import Row

    row = Row((1, "a", 2), {"id": 0, "url": 1, "page_id": 2})
    assert row["url"] == "a" and row[0] == 1 and dict(row) == {"id": 1, "url": "a", "page_id": 2}


def test_main_in_process_against_postgresql(pg_database: str, tmp_path: Path, monkeypatch, capsys,
                                            no_settings_env) -> None:
    """The CLI in this process too (the same code paths the tests above run in subprocesses)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert main(["scrape", "--sample", "--db", pg_database, "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["ask", THYMIC, "--json", "--db", pg_database]) == 0
    assert json.loads(capsys.readouterr().out)["coverage"] == "governed"
    index = tmp_path / "xdg" / "guiderag" / "postgresql"
    assert any(index.glob("*.db.index"))  # the index lives on this machine, beside the anchor


def test_a_pdf_document_is_stored_and_read_back_with_its_pages_as_in_sqlite(pg_database: str, tmp_path: Path) -> None:
    """The PDF layout (migration 'PDF documents') on both backends: one page, its lines'
    PDF pages, sections and removed lines, the same content hash."""
    from guiderag.store import FetchedPage
    from guiderag.store.layout import PdfLayout

    layout = PdfLayout(line_pages=((1,), (1, 2), (2,)), sections=((1, "第1章"), (2, "Q1 退院はいつですか？")),
                       page_count=2, sha256="sha256:" + "0" * 64, document_title="第1章",
                       removed=((1, "- 7 -", "folio (page number)"),))
    page = FetchedPage(url="http://127.0.0.1:1/guide/a.pdf", title="第1章",
                       lines=("第1章", "Q1 退院はいつですか？", "二週間ほどで退院となります。"), pdf=layout)
    read = []
    for where in (pg_database, str(tmp_path / "s.db")):
        with Store(where) as store:
            run = store.begin_run("http://127.0.0.1:1/guide/index.html")
            store.commit_run(run, [page], content_urls=[page.url])
            read.append(store.get_page(page.url))
    assert read[0] is not None and read[1] is not None
    assert read[0].pdf == read[1].pdf == layout
    assert read[0].content_hash == read[1].content_hash and read[0].lines == page.lines
