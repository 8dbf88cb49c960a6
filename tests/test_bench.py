"""`guiderag bench`: a tiny run, checking the JSON shape of the contract (not timed)."""
from __future__ import annotations

import json

from guiderag.cli import main
from guiderag.retrieval.bench import generate_corpus

CONTRACT_KEYS = {
    "pages", "query_p50_ms", "query_p95_ms", "protocol_query_p50_ms",
    "index_chars_per_s", "mecab_chars_per_s", "peak_rss_mb",
}


def test_bench_json_shape(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--pages", "12,6", "--queries", "4", "--json", "--no-progress"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [run["pages"] for run in report["runs"]] == [6, 12]
    for run in report["runs"]:
        assert CONTRACT_KEYS <= set(run)
        for key in CONTRACT_KEYS - {"pages"}:
            assert isinstance(run[key], (int, float)) and run[key] > 0, key
        assert run["queries"] == 4 and run["protocol_queries"] >= 3
    assert not list(tmp_path.iterdir())  # nothing left behind


def test_generated_corpus_is_deterministic_and_page_sized():
    a = generate_corpus(5, 3)
    b = generate_corpus(5, 3)
    assert [p.lines for p in a.pages] == [p.lines for p in b.pages]
    assert a.queries == b.queries
    for page in a.pages:
        assert 1800 <= sum(len(line) for line in page.lines) <= 2600


def test_bad_sizes_exit_2(capsys):
    assert main(["bench", "--pages", "ten", "--no-progress"]) == 2
    assert "--pages" in capsys.readouterr().err
