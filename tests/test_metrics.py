"""Evaluation metrics on hand-computed cases."""
from __future__ import annotations

import pytest

from guiderag.eval import metrics


def test_normalize_nfkc_lowercase_letters_and_digits_only():
    assert metrics.normalize("ＥＧＦＲ－ＴＫＩ、８０ｍｇ。") == "egfrtki80mg"
    assert metrics.normalize("「肺がん」の治療（ステージⅣ）") == "肺がんの治療ステージiv"
    assert metrics.normalize("ｶﾞｲﾄﾞライン 々 ー") == "ガイドライン々ー"


def test_tokens_latin_runs_are_words_japanese_is_characters():
    assert metrics.tokens("PD-L1 と 80mg の肺がん") == ["pd", "l1", "と", "80mg", "の", "肺", "が", "ん"]
    assert metrics.tokens("ＥＧＦＲ陽性") == ["egfr", "陽", "性"]
    assert metrics.tokens("、。！？ ") == []


def test_lcs_length_classic_and_edge_cases():
    assert metrics.lcs_length(list("ABCBDAB"), list("BDCABA")) == 4
    assert metrics.lcs_length([], list("abc")) == 0
    assert metrics.lcs_length(list("abc"), list("abc")) == 3
    assert metrics.lcs_length(list("abc"), list("xyz")) == 0


def test_rouge_l_hand_computed():
    # candidate 肺 が ん の 治 療 (6), reference 肺 が ん 治 療 法 (6): LCS 肺がん治療 = 5
    r = metrics.rouge_l("肺がんの治療", "肺がん治療法")
    assert r.precision == pytest.approx(5 / 6)
    assert r.recall == pytest.approx(5 / 6)
    assert r.f1 == pytest.approx(5 / 6)
    # candidate 手 術 (2) against reference 手 術 と 放 射 線 (6): P 1, R 1/3, F1 0.5
    r = metrics.rouge_l("手術", "手術と放射線")
    assert (r.precision, r.recall, r.f1) == pytest.approx((1.0, 1 / 3, 0.5))
    # order matters for LCS: 線射放 vs 放射線 has LCS 1
    assert metrics.rouge_l("線射放", "放射線").f1 == pytest.approx(1 / 3)
    assert metrics.rouge_l("", "放射線") == metrics.PRF(0.0, 0.0, 0.0)


def test_token_prf_counts_a_multiset_overlap():
    # candidate が ん が ん (4), reference が ん (2): overlap 2 -> P 0.5, R 1, F1 2/3
    r = metrics.token_prf("がんがん", "がん")
    assert (r.precision, r.recall, r.f1) == pytest.approx((0.5, 1.0, 2 / 3))
    # order does not matter for the bag of tokens, unlike ROUGE-L
    assert metrics.token_prf("線射放", "放射線").f1 == pytest.approx(1.0)
    r = metrics.token_prf("EGFR 検査", "egfr遺伝子検査")
    # candidate egfr 検 査 (3), reference egfr 遺 伝 子 検 査 (6): overlap 3
    assert (r.precision, r.recall) == pytest.approx((1.0, 0.5))


def test_contains_any_is_normalised_containment():
    assert metrics.contains_any("梅雨は、小笠原 諸島を除く日本で見られる。", ["小笠原諸島"])
    assert metrics.contains_any("ＥＧＦＲ遺伝子", ["egfr"])
    assert not metrics.contains_any("北海道", ["小笠原諸島"])
    assert not metrics.contains_any("何でも", ["", "、"])  # empty gold strings never match


def test_same_page_relative_gold_matches_any_host():
    assert metrics.same_page("http://127.0.0.1:5000/guide/articles/a1.html", "guide/articles/a1.html")
    assert metrics.same_page("http://127.0.0.1:5000/guide/articles/a1.html?utm_source=x#top", "guide/articles/a1.html")
    assert not metrics.same_page("http://127.0.0.1:5000/guide/articles/a10.html", "guide/articles/a1.html")
    assert metrics.same_page("https://ex.org/q1.html", "https://EX.org/q1.html")
    assert not metrics.same_page("https://other.org/q1.html", "https://ex.org/q1.html")
    assert not metrics.same_page(None, "guide/a.html")


def test_verbatim_lines_whitespace_aside():
    stored = ["胸腺腫の治療は手術が基本です。", "放射線治療を行うこともあります。"]
    assert metrics.verbatim_lines("胸腺腫の治療は 手術が基本です。\n\n放射線治療を行うこともあります。", stored)
    assert not metrics.verbatim_lines("胸腺腫の治療は手術が基本です", stored)  # cut line
    assert not metrics.verbatim_lines("", stored)


def test_percentile_and_summary():
    assert metrics.percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert metrics.percentile([10, 20], 95) == pytest.approx(19.5)
    rows = [
        {"kind": "in_scope", "governed": True, "refused": False, "gold_hit": True, "reference_answer": "a", "gold_answers": ["a"],
         "answer_chars": 100, "verbatim": True, "latency_ms": 10, "rouge_l_f1": 0.5},
        {"kind": "in_scope", "governed": False, "refused": True, "gold_hit": False, "reference_answer": "b", "gold_answers": ["b"],
         "answer_chars": None, "verbatim": None, "latency_ms": 30, "rouge_l_f1": 0.0},
        {"kind": "out_of_scope", "governed": False, "refused": True, "latency_ms": 20},
        {"kind": "out_of_scope", "governed": True, "refused": False, "answer_chars": 300, "verbatim": False,
         "latency_ms": 40},
    ]
    s = metrics.summarize(rows)
    assert s["refusal_rate_out_of_scope"]["value"] == pytest.approx(0.5)
    assert s["coverage_in_scope"]["value"] == pytest.approx(0.5)
    assert s["gold_in_answer"]["value"] == pytest.approx(0.5)
    assert s["verbatim_rate"]["value"] == pytest.approx(0.5)
    assert s["answer_chars_mean"]["value"] == pytest.approx(200)
    assert s["rouge_l_f1"]["value"] == pytest.approx(0.25)
    assert s["latency_p50_ms"]["value"] == pytest.approx(25)
    assert s["right_page_first"]["value"] is None and s["right_page_first"]["n"] == 0
