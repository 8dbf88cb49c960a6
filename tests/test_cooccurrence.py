"""Proximity in the `ours` pipeline: a question's terms said together on one line outrank
the same terms scattered over unrelated lines of a passage window (retrieval.index.line_spans,
retrieval.scoring.SPAN_WEIGHT)."""
from __future__ import annotations

import pytest

from guiderag import retrieval
from guiderag.retrieval import scoring
from guiderag.retrieval.passages import line_spans, span_range
from retrieval_corpus import BASE, settings_for, write_pages

# Both terms of the question (点滴, 時間) on one line, under its heading.
TOGETHER = (
    "Q5 外来での治療について",
    "外来の治療",
    "外来では、受付の手続きや持ち物を前もって確かめておくと安心です。",
    "抗がん剤の点滴は、外来の治療室で数時間かけて行うことが多いです。",
    "帰りは疲れが出やすいので、付き添いの人がいると心強いです。",
)
# The same terms, more often, but five lines apart inside one short window: no line says
# how long a drip takes.
SCATTERED = (
    "Q6 入院中の生活について",
    "病棟での過ごし方",
    "入院中は点滴の管を腕に入れたまま過ごすことがあり、点滴の台を押して歩けます。",
    "食事は病棟で決まった献立が出ます。",
    "シャワーは決められた曜日に使えます。",
    "洗濯は家族に頼むか、病棟の洗濯機を使います。",
    "面会の時間は病院ごとに決まっていて、時間外は家族も入れません。",
)
QUESTION = "点滴の時間はどのくらいですか"


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "g.db"
    write_pages(path, {"q5.html": TOGETHER, "q6.html": SCATTERED})
    return path


def _page_scores(settings) -> dict[str, float]:
    result = retrieval.load_retriever(settings.retrieval, settings.storage).search(QUESTION)
    return {c.url: c.score for c in result.candidates}


def test_terms_on_one_line_outrank_terms_scattered_over_a_window(db, monkeypatch):
    near = _page_scores(settings_for(db, threshold=0.0))
    monkeypatch.setattr(scoring, "SPAN_WEIGHT", 0.0)  # no proximity factor
    plain = _page_scores(settings_for(db, threshold=0.0))
    # the trap: by window alone the scattered page (more occurrences) wins
    assert plain[BASE + "q6.html"] > plain[BASE + "q5.html"]
    # with spans the page that says it on one line comes first ...
    assert near[BASE + "q5.html"] > near[BASE + "q6.html"]
    # ... because only the scattered page lost: a span never raises a passage
    assert near[BASE + "q5.html"] == pytest.approx(plain[BASE + "q5.html"], rel=1e-5)
    assert near[BASE + "q6.html"] < 0.9 * plain[BASE + "q6.html"]


def test_full_span_weight_keeps_scores_in_range_and_order(db, monkeypatch):
    monkeypatch.setattr(scoring, "SPAN_WEIGHT", 1.0)
    scores = _page_scores(settings_for(db, threshold=0.0))
    assert scores[BASE + "q5.html"] > scores[BASE + "q6.html"] > 0.0
    assert all(0.0 <= s <= 1.0 for s in scores.values())


def test_line_spans_are_body_lines_under_their_heading():
    lines = ("Q1 題名ですか？", "見出し", "一行目です。", "二行目です。", "", "別の見出し", "三行目です。")
    spans = line_spans(lines, heading_max_chars=40)
    # the title line ends like a question: body text; headings are no spans
    assert spans == [(0, 1), (2, 3), (2, 4), (6, 7)]
    assert span_range(spans, 3, 4) == (1, 3)
    assert span_range(spans, 5, 5) == (0, 0)  # no body line there: no span
