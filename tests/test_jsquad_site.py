"""The JSQuAD dev site: loading, deterministic split, the guidebook-like site, and devbench end to end.

The fixture below is a tiny JSQuAD-format file whose articles were written for this test
(made-up places and things); the real benchmark is too big for a unit test.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import requests
from bs4 import BeautifulSoup

from guiderag.eval import jsquad
from guiderag.scraper.sample import serve_directory
from guiderag.cli import main

ARTICLES = {
    "みどり町": [
        ("みどり町は、山あいの盆地にある小さな町で、人口はおよそ八千人である。町の中央を青葉川が流れている。",
         [("みどり町の中央を流れる川は何か。", "青葉川"), ("みどり町の人口はどれくらいか。", "およそ八千人")]),
        ("みどり町の特産品は白桃で、毎年八月に桃まつりが開かれる。まつりでは桃の重さを競う大会もある。",
         [("みどり町の特産品は何か。", "白桃"), ("桃まつりは毎年何月に開かれるか。", "八月")]),
    ],
    "星見台天文館": [
        ("星見台天文館は、標高九百メートルの丘に建つ公開天文台で、口径六十センチの反射望遠鏡を備える。",
         [("星見台天文館の望遠鏡の口径はいくつか。", "六十センチ"), ("星見台天文館はどこに建っているか。", "標高九百メートルの丘")]),
        ("毎週土曜日の夜には観望会が開かれ、季節の星座や惑星を案内員が解説する。",
         [("観望会はいつ開かれるか。", "毎週土曜日の夜")]),
    ],
    "こはく羊羹": [
        ("こはく羊羹は、寒天と砂糖を煮詰めて固めた半透明の和菓子で、表面が乾いてしゃりっとした食感になる。",
         [("こはく羊羹の材料は何か。", "寒天と砂糖"), ("こはく羊羹の表面はどのような食感か。", "しゃりっとした食感")]),
        ("色付けにはくちなしの実や抹茶が使われ、夏の茶席で好まれる。",
         [("こはく羊羹の色付けに使われるものは何か。", "くちなしの実や抹茶")]),
    ],
    "潮見岬灯台": [
        ("潮見岬灯台は、明治時代に建てられた白い石造りの灯台で、光は約三十キロメートル先まで届く。",
         [("潮見岬灯台の光はどこまで届くか。", "約三十キロメートル先"), ("潮見岬灯台は何で造られているか。", "石造り")]),
        ("灯台の近くには資料館があり、古いレンズや灯台守の暮らしを紹介している。",
         [("灯台の近くにある施設は何か。", "資料館")]),
    ],
    "かもめ線": [
        ("かもめ線は、港町と温泉地を結ぶ全長二十四キロメートルの単線の鉄道路線である。",
         [("かもめ線の全長はどれくらいか。", "二十四キロメートル"), ("かもめ線は何と何を結ぶか。", "港町と温泉地")]),
        ("冬には車窓から流氷が見えることがあり、観光客に人気がある。",
         [("冬にかもめ線の車窓から見えることがあるものは何か。", "流氷")]),
    ],
}


def write_fixture(folder: Path) -> Path:
    """A JSQuAD v1.3-format file of the articles above; returns its folder."""
    data = []
    for a_i, (title, paragraphs) in enumerate(ARTICLES.items(), start=1):
        paras = []
        for p_i, (text, qas) in enumerate(paragraphs):
            context = f"{title} [SEP] {text}"
            paras.append({
                "context": context,
                "qas": [{"question": q, "id": f"a{900 + a_i}p{p_i}q{q_i}", "is_impossible": False,
                         "answers": [{"text": ans, "answer_start": context.index(ans)}]}
                        for q_i, (q, ans) in enumerate(qas)],
            })
        data.append({"title": title, "paragraphs": paras})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "valid-v1.3.json").write_text(json.dumps({"data": data}, ensure_ascii=False), encoding="utf-8")
    return folder


@pytest.fixture()
def bench(tmp_path: Path) -> Path:
    return write_fixture(tmp_path / "jsquad")


def test_load_articles_strips_the_title_prefix(bench: Path):
    articles = jsquad.load_articles(bench)
    assert [a.title for a in articles] == list(ARTICLES)
    first = articles[0]
    assert first.paragraphs[0].startswith("みどり町は、")
    assert first.article_id == "a901" and first.path == "guide/articles/a901.html"
    assert first.qas[2] == jsquad.QA("a901p1q0", "みどり町の特産品は何か。", ["白桃"], 1)


def test_load_articles_bad_input(tmp_path: Path):
    from guiderag.errors import InputError

    with pytest.raises(InputError, match="not found"):
        jsquad.load_articles(tmp_path / "nowhere")
    (tmp_path / "valid-v1.3.json").write_text('{"data": [{"paragraphs": []}]}', encoding="utf-8")
    with pytest.raises(InputError, match="SQuAD"):
        jsquad.load_articles(tmp_path)


def test_split_is_deterministic_and_disjoint(bench: Path):
    articles = jsquad.load_articles(bench)
    inside, outside = jsquad.split_articles(articles, 0.2, "s1")
    assert len(outside) == 1 and len(inside) == 4
    assert {a.title for a in inside}.isdisjoint(a.title for a in outside)
    again = jsquad.split_articles(list(reversed(articles)), 0.2, "s1")
    assert {a.title for a in again[1]} == {a.title for a in outside}  # input order does not matter
    titles = {jsquad.split_articles(articles, 0.4, f"seed{i}")[1][0].title for i in range(12)}
    assert len(titles) > 1  # the seed changes the split


def test_questions_kinds_and_gold(bench: Path):
    articles = jsquad.load_articles(bench)
    inside, outside = jsquad.split_articles(articles, 0.2, "s1")
    qs = jsquad.questions(inside, outside)
    assert len(qs) == sum(len(a.qas) for a in articles)
    held = {qa.id for qa in outside[0].qas}
    for q in qs:
        if q.id in held:
            assert q.kind == "out_of_scope" and q.gold_url is None
        else:
            assert q.kind == "in_scope" and q.gold_url.startswith("guide/articles/")
            assert q.reference_answer == q.gold_answers[0]
    with_base = jsquad.questions(inside, outside, "http://127.0.0.1:8000/")
    assert with_base[0].gold_url.startswith("http://127.0.0.1:8000/guide/articles/")
    sample = jsquad.sample(qs, 5, "s1")
    assert len(sample) == 5 and {q.kind for q in sample} == {"in_scope", "out_of_scope"}
    assert sample == jsquad.sample(qs, 5, "s1")


def test_site_has_the_in_scope_pages_and_realistic_noise(bench: Path, tmp_path: Path):
    articles = jsquad.load_articles(bench)
    inside, outside = jsquad.split_articles(articles, 0.2, "s1")
    site = tmp_path / "site"
    toc = jsquad.build_site(inside, site)
    with serve_directory(site) as root:
        r = requests.get(root + toc, timeout=5)
        assert r.status_code == 200
        soup = BeautifulSoup(r.content, "html.parser")  # bytes: the page declares utf-8
        hrefs = [a["href"] for a in soup.find_all("a")]
        toc_links = [a["href"] for a in soup.select("main ul.toc a")]
        assert sorted(h for h in toc_links if "?" not in h) == sorted(f"articles/{Path(a.path).name}" for a in inside)
        assert any("utm_source=" in h for h in toc_links)  # a tracking duplicate of a content link
        assert any(h.startswith("mailto:") for h in hrefs)
        assert any(h.startswith("https://www.example.org") for h in hrefs)
        assert "about.html" in hrefs and "privacy.html" in hrefs
        assert soup.find("header") and soup.find("nav") and soup.find("footer") and soup.find("script") and soup.find("style")
        for a in inside:
            page = BeautifulSoup(requests.get(root + a.path, timeout=5).content, "html.parser")
            assert page.select_one("main h1").get_text() == a.display_title
            assert [p.get_text() for p in page.select("main p")] == a.paragraphs
            assert page.select("aside a") and page.select(".breadcrumb a")
        for path in ("guide/about.html", "guide/privacy.html", "assets/site.css"):
            assert requests.get(root + path, timeout=5).status_code == 200
        assert requests.get(root + outside[0].path, timeout=5).status_code == 404  # held back: not on the site
    held_text = outside[0].paragraphs[0]
    assert not any(held_text in p.read_text(encoding="utf-8") for p in site.rglob("*.html"))


MODEL_ENV = ("GUIDERAG_MODEL", "GUIDERAG_ANSWER_MODEL", "GUIDERAG_KEYWORDS_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY")


@pytest.mark.slow  # devbench end to end: serve, scrape, index, both pipelines
def test_devbench_end_to_end_on_a_small_set(bench: Path, tmp_path: Path, capsys, monkeypatch):
    for key in MODEL_ENV:
        monkeypatch.delenv(key, raising=False)
    work = tmp_path / "work"
    rc = main(["devbench", "--bench-dir", str(bench), "--workdir", str(work), "--limit", "8",
               "--modes", "extract,generate", "--json", "--no-progress"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["questions"] == 8 and report["out_of_scope"] >= 1
    assert report["site_pages"] == 4 and report["stored_pages"] == 4
    runs = {(r["pipeline"], r["mode"]): r for r in report["runs"]}
    assert set(runs) == {(p, m) for p in ("protocol", "ours") for m in ("extract", "generate")}
    for pipeline in ("protocol", "ours"):
        assert runs[(pipeline, "generate")]["status"] == "skipped"
        ok = runs[(pipeline, "extract")]
        assert ok["status"] == "ok"
        for key in ("right_page_first", "answer_in_reference", "gold_in_answer", "refusal_rate_out_of_scope", "verbatim_rate"):
            v = ok["metrics"][key]
            assert v is None or 0.0 <= v <= 1.0
        assert Path(ok["workbook"]).exists()
    # Our pipeline finds the right page for questions that name their article.
    assert runs[("ours", "extract")]["metrics"]["right_page_first"] >= 0.5


@pytest.mark.slow  # devbench with a model server
def test_devbench_runs_lines_mode_when_a_model_is_configured(bench: Path, tmp_path: Path, capsys, monkeypatch):
    """With a model (a loopback OpenAI-format server) the lines mode runs instead of being skipped."""
    from openai_stub import OpenAIStub

    for key in MODEL_ENV:
        monkeypatch.delenv(key, raising=False)
    with OpenAIStub(default="行: 1") as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("GUIDERAG_ANSWER_MODEL", "stub-model")
        rc = main(["devbench", "--bench-dir", str(bench), "--workdir", str(tmp_path / "w"), "--limit", "4",
                   "--pipelines", "ours", "--modes", "lines", "--json", "--no-progress"])
        calls = stub.calls
    assert rc == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert (run["pipeline"], run["mode"], run["status"]) == ("ours", "lines", "ok")
    answered = run["metrics"]["verbatim_rate"]
    assert calls >= 1  # the model was asked for each answered question
    assert answered is None or answered == 1.0  # lines mode shows stored lines only


@pytest.mark.early  # two devbench runs, one with two spawned worker processes
@pytest.mark.slow
def test_worker_processes_give_the_same_results_as_in_process(bench: Path, tmp_path: Path, capsys, monkeypatch):
    from guiderag.eval.workbook import read_results

    for key in MODEL_ENV:
        monkeypatch.delenv(key, raising=False)
    results = {}
    for workers in ("1", "2"):
        monkeypatch.setenv("GUIDERAG_EVAL_WORKERS", workers)
        work = tmp_path / f"w{workers}"
        assert main(["devbench", "--bench-dir", str(bench), "--workdir", str(work), "--pipelines", "ours",
                     "--json", "--no-progress"]) == 0
        capsys.readouterr()
        rows, _, meta = read_results(work / "results-ours-extract.xlsx")
        assert meta["worker_processes"] == int(workers) and meta["status"] == "complete"
        port = re.compile(r"http://127\.0\.0\.1:\d+/")  # each run serves the site on its own port
        results[workers] = [{k: port.sub("/", v) if isinstance(v, str) else v for k, v in r.items()
                             if k not in ("latency_ms", "json")} for r in rows]
    assert [r["id"] for r in results["2"]] == [r["id"] for r in results["1"]]  # question order kept
    assert results["2"] == results["1"]


@pytest.mark.slow  # devbench's model modes against a model server
def test_devbench_model_modes_report_fallbacks_declines_and_seconds(bench: Path, tmp_path: Path, capsys, monkeypatch):
    """The model columns: a model whose summaries loop falls back on every answered question
    (and no repeated summary is shown), one that declines is counted as declining."""
    from openai_stub import OpenAIStub

    for key in MODEL_ENV:
        monkeypatch.delenv(key, raising=False)
    loop = "みどり町の中央を流れる川は青葉川です。\n" * 20
    with OpenAIStub(default=loop) as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("GUIDERAG_ANSWER_MODEL", "stub-model")
        assert main(["devbench", "--bench-dir", str(bench), "--workdir", str(tmp_path / "w"), "--limit", "6",
                     "--pipelines", "ours", "--modes", "extract,generate", "--no-progress"]) == 0
        table = capsys.readouterr().out
        assert main(["devbench", "--bench-dir", str(bench), "--workdir", str(tmp_path / "w2"), "--limit", "6",
                     "--pipelines", "ours", "--modes", "generate", "--json", "--no-progress"]) == 0
    for header in ("answered", "s per answer", "model fell back", "model declined", "summary repeats"):
        assert header in table
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    m = run["metrics"]
    asked = m["coverage_in_scope"]  # answered in scope; out-of-scope ones never reach the model
    assert m["model_fallback_rate"] is not None and m["model_fallback_rate"] > 0
    assert m["model_decline_rate"] == 0.0 and m["summary_repeat_rate"] is None  # no summary was shown
    assert m["verbatim_rate"] == 1.0 and asked is not None and m["latency_mean_ms"] > 0
    extract_line = [line for line in table.splitlines() if line.startswith("ours") and " extract " in f" {line} "]
    assert extract_line and extract_line[0].split()[-4:-1] == ["-", "-", "-"]  # no model: no model columns
