"""Several guidelines in one store, through the CLI: scraped apart, listed, asked with the
question routed to the one that governs it, re-scraped without touching the other, removed.

Real components: two loopback guideline sites (tests/library_sites.py), SQLite, MeCab and
the real index."""
from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from guiderag.cli import main
from guiderag.settings import Settings
from guiderag.store import Store
from library_sites import gastric_site, thymus_site

GASTRIC_Q = "胃を切除した後の食事はどうすればよいですか？"
THYMUS_Q = "胸腺腫の治療にはどのような方法がありますか？"
NEITHER_Q = "小児の神経膠腫の治療法を教えてください。"


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _rows(db: Path, gid: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        pages = conn.execute("SELECT * FROM pages WHERE guideline_id = ? ORDER BY id", (gid,)).fetchall()
        versions = conn.execute(
            "SELECT v.* FROM page_versions v JOIN pages p ON p.id = v.page_id WHERE p.guideline_id = ? "
            "ORDER BY v.id", (gid,)).fetchall()
    conn.close()
    return pages + versions


@pytest.fixture
def two(fast_env: Path, capsys: pytest.CaptureFixture[str]):
    """A store holding the thymus guide (as `thymus`) and the gastric guide (as `gastric`);
    yields (db, thymus site, gastric site, their base URLs) with both sites serving."""
    thymus, gastric = thymus_site(), gastric_site()
    with thymus.serve() as t_base, gastric.serve() as g_base:
        assert main(["scrape", t_base + "/thymus/index.html", "--guideline", "thymus"]) == 0
        assert main(["scrape", g_base + "/gastric/index.html", "--guideline", "gastric",
                     "--title", "胃がんの本"]) == 0
        capsys.readouterr()
        yield fast_env, thymus, gastric, t_base, g_base


def test_guidelines_lists_each_with_its_pages_and_last_scrape(two, capsys) -> None:
    db, _, _, t_base, g_base = two
    rows = {r["id"]: r for r in _json(capsys, ["guidelines", "--json"])["guidelines"]}
    assert set(rows) == {"gastric", "thymus"}
    assert rows["gastric"]["title"] == "胃がんの本"  # --title
    assert rows["thymus"]["title"] == "胸腺腫瘍ガイドブック（デモ）"  # the TOC page's own title
    assert rows["thymus"]["toc_url"] == t_base + "/thymus/index.html"
    assert rows["gastric"]["toc_url"] == g_base + "/gastric/index.html"
    for r in rows.values():
        assert r["pages"] == 3 and r["status"] == "ok" and r["last_scrape"] and r["check"] is None
    assert main(["guidelines"]) == 0
    assert "胃がんの本" in capsys.readouterr().out
    # each guideline has its own index and workbook
    settings = Settings.load(env={}, db=db)
    for gid in ("thymus", "gastric"):
        assert (settings.guideline_scope(gid).index_dir / "CURRENT").exists()
        assert settings.guideline_scope(gid).workbook_path.exists()
    pages = _json(capsys, ["pages", "--json", "--guideline", "gastric"])["pages"]
    assert {p["guideline"] for p in pages} == {"gastric"} and len(pages) == 3


def test_questions_are_routed_to_the_guideline_that_governs_them(two, capsys) -> None:
    db = two[0]
    gastric = _json(capsys, ["ask", GASTRIC_Q, "--json"])
    assert gastric["coverage"] == "governed"
    assert gastric["guideline"] == {"id": "gastric", "title": "胃がんの本"}
    assert {p["url"].split("/")[-2] for p in gastric["passages"]} == {"gastric"}
    assert gastric["routing"]["method"] == "offline" and gastric["routing"]["chosen"] == "gastric"
    thymus = _json(capsys, ["ask", THYMUS_Q, "--json"])
    assert thymus["coverage"] == "governed" and thymus["guideline"]["id"] == "thymus"
    assert {p["url"].split("/")[-2] for p in thymus["passages"]} == {"thymus"}
    neither = _json(capsys, ["ask", NEITHER_Q, "--json"])
    assert neither["coverage"] == "not_governed" and neither["guideline"] is None
    assert neither["routing"]["governed"] is False
    # restricted to one guideline: answered from it only, or refused by it
    fixed = _json(capsys, ["ask", GASTRIC_Q, "--json", "--guideline", "thymus"])
    assert fixed["coverage"] == "not_governed" and fixed["guideline"]["id"] == "thymus"
    assert fixed["routing"] == {"requested": "thymus", "chosen": "thymus", "method": "fixed"}
    # the audit rows record the guideline of each answer
    with sqlite3.connect(db) as conn:
        audited = [r[0] for r in conn.execute("SELECT guideline FROM audit ORDER BY id")]
    conn.close()
    assert audited == ["gastric", "thymus", None, "thymus"]
    assert main(["ask", GASTRIC_Q]) == 0
    assert "回答したガイドライン: 胃がんの本" in capsys.readouterr().out


def test_an_unknown_guideline_is_bad_input(two, capsys) -> None:
    assert main(["ask", GASTRIC_Q, "--guideline", "colon"]) == 2
    assert "no guideline 'colon'" in capsys.readouterr().err
    assert main(["ask", GASTRIC_Q, "--guideline", "Bad Name"]) == 2
    assert main(["scrape", "--sample", "--guideline", "auto"]) == 2


def test_rescraping_one_guideline_leaves_the_other_byte_identical(two, capsys) -> None:
    db, thymus, gastric, t_base, g_base = two
    settings = Settings.load(env={}, db=db)
    thymus_index = settings.guideline_scope("thymus").index_dir
    before_rows, before_index = _rows(db, "thymus"), _tree_digest(thymus_index)
    before_book = settings.guideline_scope("thymus").workbook_path.read_bytes()
    gastric.page("/gastric/q3.html", "<html><body><main><h1>Q3 ダンピング症候群とは何ですか？</h1>"
                 "<p>ダンピング症候群は、食後に起こる不快な症状です。</p></main></body></html>")
    gastric.remove("/gastric/q2.html")
    assert main(["scrape", g_base + "/gastric/index.html", "--guideline", "gastric"]) == 0
    out = capsys.readouterr().out
    assert "changed 1" in out and "removed 1" in out
    assert _rows(db, "thymus") == before_rows
    assert _tree_digest(thymus_index) == before_index
    assert settings.guideline_scope("thymus").workbook_path.read_bytes() == before_book
    with Store(db) as store:
        assert len(store.current_pages(guideline="gastric")) == 2
        assert len(store.current_pages(guideline="thymus")) == 3
    # and the other way round: the thymus site re-scraped, gastric untouched
    gastric_index = settings.guideline_scope("gastric").index_dir
    before_rows, before_index = _rows(db, "gastric"), _tree_digest(gastric_index)
    thymus.remove("/thymus/q3.html")
    assert main(["scrape", t_base + "/thymus/index.html", "--guideline", "thymus"]) == 0
    assert _rows(db, "gastric") == before_rows and _tree_digest(gastric_index) == before_index


def test_pages_of_another_guideline_are_refused_before_anything_is_fetched(two, capsys) -> None:
    db, thymus, _, t_base, _ = two
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    hits = sum(thymus.hits.values())
    assert main(["scrape", t_base + "/thymus/index.html", "--guideline", "other"]) == 2
    err = capsys.readouterr().err
    assert "pages of guideline 'thymus'" in err and err.count("\n") == 1
    assert sum(thymus.hits.values()) - hits <= 2  # robots.txt and the TOC, no page
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_removing_a_guideline_keeps_its_audit_rows_and_stops_routing_to_it(two, capsys) -> None:
    db, _, _, _, g_base = two
    assert main(["ask", GASTRIC_Q]) == 0
    settings = Settings.load(env={}, db=db)
    assert main(["guidelines", "--remove", "gastric"]) == 0
    assert "removed guideline gastric" in capsys.readouterr().err
    assert [r["id"] for r in _json(capsys, ["guidelines", "--json"])["guidelines"]] == ["thymus"]
    listed = {r["id"]: r for r in _json(capsys, ["guidelines", "--json", "--all"])["guidelines"]}
    assert listed["gastric"]["status"] == "removed" and listed["gastric"]["pages"] == 0
    assert not (settings.guideline_scope("gastric").index_dir / "CURRENT").exists()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM audit WHERE guideline = 'gastric'").fetchone()[0] == 1
        assert conn.execute("SELECT COUNT(*) FROM page_versions").fetchone()[0] == 6  # versions kept
    conn.close()
    answer = _json(capsys, ["ask", GASTRIC_Q, "--json"])
    assert answer["coverage"] == "not_governed" and answer["routing"]["method"] == "only"
    assert main(["guidelines", "--remove", "gastric"]) == 2  # not there any more
    # scraping it again brings it back, with its pages' versions continued
    assert main(["scrape", g_base + "/gastric/index.html", "--guideline", "gastric"]) == 0
    assert _json(capsys, ["ask", GASTRIC_Q, "--json"])["guideline"]["id"] == "gastric"


def test_index_rebuilds_every_guideline_or_one(two, capsys) -> None:
    capsys.readouterr()
    assert main(["index"]) == 0
    err = capsys.readouterr().err
    assert "of guideline gastric" in err and "of guideline thymus" in err
    assert main(["index", "--guideline", "thymus"]) == 0
    err = capsys.readouterr().err
    assert "thymus" in err and "gastric" not in err


def test_one_guideline_answers_exactly_as_before(fast_env: Path, capsys) -> None:
    """The single-guideline case: no routing work, the default guideline, the same answer."""
    site = thymus_site()
    with site.serve() as base:
        assert main(["scrape", base + "/thymus/index.html"]) == 0
    answer = _json(capsys, ["ask", THYMUS_Q, "--json"])
    assert answer["guideline"]["id"] == "default"
    assert answer["routing"] == {"requested": "auto", "chosen": "default", "method": "only"}
    assert (fast_env.with_name(fast_env.name + ".index") / "CURRENT").exists()  # where it always was
    refused = _json(capsys, ["ask", NEITHER_Q, "--json"])
    assert refused["coverage"] == "not_governed" and refused["guideline"]["id"] == "default"
    assert main(["ask", THYMUS_Q]) == 0
    assert "回答したガイドライン" not in capsys.readouterr().out


# --- the topic-selection call, with a model configured -------------------------------------
def _use_model(monkeypatch: pytest.MonkeyPatch, stub) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("GUIDERAG_KEYWORDS_MODEL", "stub-keywords")
    monkeypatch.setenv("GUIDERAG_MODEL_RETRIES", "0")
    monkeypatch.setenv("GUIDERAG_MODEL_TIMEOUT_S", "2")


def test_a_model_chooses_among_the_stored_guidelines_only(two, capsys, monkeypatch) -> None:
    """Each ask below makes two calls: the topic selection, then the keywords."""
    from openai_stub import OpenAIStub, Reply

    with OpenAIStub(["gastric", "食事、切除",  # a stored id: taken
                     "colon", "胸腺腫、治療",  # not a stored id: the offline choice stands
                     Reply(status=500), "胸腺腫、治療",  # a failing call: offline too
                     "none", "神経膠腫"]) as stub:
        _use_model(monkeypatch, stub)
        chosen = _json(capsys, ["ask", GASTRIC_Q, "--json"])
        topic = stub.requests[0]
        assert topic["model"] == "stub-keywords"
        listing = topic["messages"][1]["content"]
        assert "- gastric: 胃がんの本" in listing and "- thymus: 胸腺腫瘍ガイドブック（デモ）" in listing
        assert GASTRIC_Q in listing
        assert chosen["routing"]["method"] == "model" and chosen["guideline"]["id"] == "gastric"
        assert chosen["routing"]["model_reply"] == "gastric" and chosen["routing"]["fell_back"] is None

        other = _json(capsys, ["ask", THYMUS_Q, "--json"])
        assert other["routing"]["method"] == "offline" and other["guideline"]["id"] == "thymus"
        assert "named no stored guideline" in other["routing"]["fell_back"]

        failed = _json(capsys, ["ask", THYMUS_Q, "--json"])
        assert failed["routing"]["method"] == "offline" and failed["guideline"]["id"] == "thymus"
        assert "failed" in failed["routing"]["fell_back"]

        none = _json(capsys, ["ask", NEITHER_Q, "--json"])
        assert none["coverage"] == "not_governed" and none["guideline"] is None
        assert stub.calls == 8


def test_one_guideline_never_asks_the_model_for_a_topic(fast_env: Path, capsys, monkeypatch) -> None:
    from openai_stub import OpenAIStub

    site = thymus_site()
    with site.serve() as base:
        assert main(["scrape", base + "/thymus/index.html"]) == 0
    with OpenAIStub(["胸腺腫、治療"]) as stub:
        _use_model(monkeypatch, stub)
        answer = _json(capsys, ["ask", THYMUS_Q, "--json"])
        assert stub.calls == 1 and "キーワード" in stub.requests[0]["messages"][0]["content"]
    assert answer["routing"]["method"] == "only" and answer["coverage"] == "governed"


def test_parse_topic_takes_one_stored_id_and_nothing_else() -> None:
    from guiderag.chatbot.routing import parse_topic

    ids = ["gastric", "thymus"]
    for reply in ("gastric", " Gastric ", "「gastric」", "id: gastric", "ｇａｓｔｒｉｃ。", "`gastric`"):
        assert parse_topic(reply, ids) == "gastric", reply
    for reply in ("none", "", "gastric, thymus", "胃がんのガイドライン", "gastric です", "colon"):
        assert parse_topic(reply, ids) is None, reply


# --- evaluation: routing accuracy ------------------------------------------------------------
def test_eval_reports_routing_accuracy(two, capsys, tmp_path) -> None:
    from guiderag.eval.workbook import Question, read_results, write_questions

    db, _, _, t_base, g_base = two
    questions = [
        Question("G1", GASTRIC_Q, "in_scope", None, g_base + "/gastric/q2.html", []),
        Question("G2", "ダンピング症候群とは何ですか？", "in_scope", None, "/gastric/q3.html", []),
        Question("T1", THYMUS_Q, "in_scope", None, t_base + "/thymus/q2.html", []),
        Question("N1", NEITHER_Q, "out_of_scope", None, None, []),
    ]
    book = tmp_path / "q.xlsx"
    write_questions(questions, book)
    out = tmp_path / "r.xlsx"
    summary = _json(capsys, ["eval", str(book), "--out", str(out), "--json"])["summary"]
    assert summary["routing_accuracy"] == 1.0
    rows = {r["id"]: r for r in read_results(out)[0]}
    assert [rows[i]["guideline"] for i in ("G1", "G2", "T1")] == ["gastric", "gastric", "thymus"]
    # every question made to read the thymus guide: the gastric ones are routed wrong
    fixed = _json(capsys, ["eval", str(book), "--out", str(tmp_path / "f.xlsx"), "--json", "--guideline", "thymus"])
    assert fixed["summary"]["routing_accuracy"] == pytest.approx(1 / 3)


def test_the_bundled_lung_sample_and_the_gastric_development_site_in_one_store(fast_env: Path, capsys) -> None:
    """The issue's acceptance: `scrape --sample --guideline lung` beside the gastric
    development site of ../shared; each question answered from its own guideline."""
    from guiderag.resources import shared_bench_dir
    from guiderag.scraper.sample import serve_directory

    root = shared_bench_dir() / "patient-gastric"
    if not (root / "site" / "gb" / "index.html").is_file():
        pytest.skip(f"the shared development set is not here ({root})")
    assert main(["scrape", "--sample", "--guideline", "lung"]) == 0
    with serve_directory(root / "site") as base:
        assert main(["scrape", base + "gb/index.html", "--guideline", "gastric"]) == 0
    rows = {r["id"]: r for r in _json(capsys, ["guidelines", "--json"])["guidelines"]}
    assert set(rows) == {"gastric", "lung"}
    assert rows["gastric"]["pages"] == 32 and rows["lung"]["pages"] == 32
    assert rows["lung"]["toc_url"] == "http://sample-guide.guiderag.invalid/guide/index.html"
    gastric = _json(capsys, ["ask", "胃を切除したあとの食事で気をつけることは？", "--json"])
    assert gastric["coverage"] == "governed" and gastric["guideline"]["id"] == "gastric"
    assert all("/gb/" in p["url"] for p in gastric["passages"])
    thymic = _json(capsys, ["ask", "胸腺腫瘍にはどのような治療法がありますか？", "--json"])
    assert thymic["coverage"] == "governed" and thymic["guideline"]["id"] == "lung"
    assert all("sample-guide.guiderag.invalid" in p["url"] for p in thymic["passages"])
