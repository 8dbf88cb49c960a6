"""The published protocol, pinned to its literal behaviour (faults included) on a small fixture."""
from __future__ import annotations

import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics.pairwise import cosine_similarity

from guiderag import retrieval
from retrieval_corpus import BASE, settings_for, write_pages

FIXTURE = {
    "a.html": ("肺がんの治療", "肺がんの治療には手術と薬物療法があります。", "手術では肺の一部を切除します。"),
    "b.html": ("胸腺腫の治療", "胸腺腫の治療は手術が基本です。"),
    "c.html": ("費用について", "病院の費用について説明します。", "高額療養費制度があります。"),
    "d.html": ("費用について", "病院の費用について説明します。", "高額療養費制度があります。"),
}


@pytest.fixture
def protocol(tmp_path):
    write_pages(tmp_path / "g.db", FIXTURE)
    settings = settings_for(tmp_path / "g.db", pipeline="protocol")
    return retrieval.load_retriever(settings.retrieval, settings.storage)


def test_page_texts_are_mecab_nouns_of_the_japanese_characters(protocol):
    assert protocol.docs == [
        "肺がん 治療 肺がん 治療 手術 薬物 療法 手術 肺 一部 切除",  # 肺 kept here, dropped later
        "胸 腺腫 治療 胸腺 治療 手術 基本",  # 胸腺腫 split by UniDic
        "費用 病院 費用 説明 高額 療養 制度",  # the suffix 費 of 療養費 is lost
        "費用 病院 費用 説明 高額 療養 制度",
    ]


def test_cosine_of_a_per_query_tfidf_fit_ranks_and_keeps_scores_over_threshold(protocol):
    result = protocol.search("手術と治療について", keywords=["手術", "治療"])
    assert [c.url for c in result.candidates] == [BASE + "b.html", BASE + "a.html"]
    assert [round(c.score, 4) for c in result.candidates] == [0.6205, 0.5565]
    # the same numbers from scikit-learn directly: default TfidfVectorizer over pages + keywords
    matrix = TfidfVectorizer().fit_transform(protocol.docs + ["手術 治療"])
    expected = cosine_similarity(matrix[-1], matrix[:-1]).ravel()
    assert [round(c.score, 6) for c in result.candidates] == [
        round(float(expected[1]), 6), round(float(expected[0]), 6)
    ]
    assert result.literal_reference == (
        "胸腺腫の治療 胸腺腫の治療は手術が基本です。 肺がんの治療 肺がんの治療には手術と薬物療法があります。 "
        "手術では肺の一部を切除します。"
    )
    assert result.pipeline == "protocol" and result.governed


def test_literal_faults_are_reproduced(protocol):
    # one-character keywords vanish under the default token_pattern
    assert not protocol.search("肺の薬", keywords=["肺", "薬"]).governed
    # the non-Japanese filter removed EGFR from every page
    assert not protocol.search("EGFR", keywords=["EGFR"]).governed
    # 高額療養費制度 never matches the split 高額 / 療養 / 制度
    assert not protocol.search("高額療養費制度", keywords=["高額療養費制度"]).governed
    # duplicate pages are both kept and repeated in the reference
    result = protocol.search("病院の費用", keywords=["病院", "費用"])
    assert [c.url for c in result.candidates] == [BASE + "c.html", BASE + "d.html"]
    assert result.literal_reference.count("高額療養費制度があります。") == 2


def test_reference_is_char_truncated_but_passages_hold_whole_lines(tmp_path):
    long_line = "手術のあとは、傷の痛みや息苦しさが少しずつ和らいでいきますので、無理をせずに体を動かしましょう。"
    pages = {"x.html": ("手術のあと", *(long_line.replace("手術", f"手術{i}回目") for i in range(6)))}
    write_pages(tmp_path / "g.db", pages)
    settings = settings_for(tmp_path / "g.db", pipeline="protocol", reference_chars=200)
    result = retrieval.load_retriever(settings.retrieval, settings.storage).search("手術", keywords=["手術"])
    assert len(result.literal_reference) == 200  # cut mid-line, as published
    assert result.governed
    passage = result.passages[0]
    assert result.reference_chars <= 200
    assert all(passage.page.line(n) in result.literal_reference for n in passage.lines)
    assert len(passage.lines) < len(pages["x.html"])
    assert any("cut at 200 characters" in note for note in result.notes)


def test_question_without_nouns_is_not_covered(protocol):
    result = protocol.search("？")
    assert not result.governed and result.notes
    result = protocol.search("What is this?")
    assert not result.governed


def test_offline_keywords_are_its_own_rarest_nouns(protocol):
    assert protocol.offline_keywords("胸腺腫の手術は？") == ["胸", "腺腫"]
