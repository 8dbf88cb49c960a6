"""The default (`ours`) pipeline over a real store: ranking, refusal, threshold, reference budget."""
from __future__ import annotations

import dataclasses

import pytest

from guiderag import retrieval
from guiderag.errors import EmptyCorpusError, InputError, StoreError
from guiderag.scopes import RetrievalConfig, StoreConfig
from retrieval_corpus import BASE, HOSPITAL, write_pages, settings_for


@pytest.fixture
def settings(tmp_path):
    write_pages(tmp_path / "g.db")
    return settings_for(tmp_path / "g.db")


@pytest.fixture
def retriever(settings):
    return retrieval.load_retriever(settings.retrieval, settings.storage)


def _reference_lines(result):
    return [(p.page.url, n) for p in result.passages for n in p.lines]


def test_in_scope_question_finds_its_page_and_lines(retriever):
    result = retriever.search("胸腺腫にはどのような治療法がありますか？")
    assert result.governed
    assert result.candidates[0].url == BASE + "q3.html"
    assert "治療の基本は手術で、腫瘍を胸腺ごと切り取ります。" in result.reference_text
    assert result.pipeline == "ours"
    assert 0.0 <= result.top_score <= 1.0
    assert result.corpus_version.startswith("corpus:")


def test_alphanumeric_and_full_width_question(retriever):
    result = retriever.search("ＥＧＦＲ遺伝子変異があるときに使う薬は？")
    assert result.candidates[0].url == BASE + "q2.html"
    assert "オシメルチニブ" in result.reference_text


def test_best_passage_of_a_long_page_not_its_top(settings):
    retriever = retrieval.load_retriever(dataclasses.replace(settings.retrieval, reference_chars=200), settings.storage)
    result = retriever.search("セカンドオピニオンを受けるときに用意するものは？")
    assert result.candidates[0].url == BASE + "q4.html"
    first = result.passages[0]
    assert first.page.url == BASE + "q4.html"
    answer_line = HOSPITAL.index("セカンドオピニオンを受けるときは、紹介状と検査結果の資料を主治医に用意してもらいます。") + 1
    assert answer_line in first.lines
    assert 2 not in first.lines  # not the top of the page


def test_out_of_scope_question_is_refused(settings, retriever):
    result = retriever.search("糖尿病の食事療法について教えてください")
    assert not result.governed and not result.to_json()["threshold_cleared"]
    assert result.top_score < result.threshold
    # the reference is the passages over the floor, for the coverage model to weigh (and refuse)
    assert result.passages and all(p.score < result.threshold for p in result.passages)
    assert all(p.score >= settings.retrieval.reference_floor for p in result.passages)
    assert "糖尿病" in result.unknown_terms
    # no floor: nothing at all, as before the coverage model
    bare = retrieval.load_retriever(dataclasses.replace(settings.retrieval, reference_floor=0.0), settings.storage).search("糖尿病の食事療法について教えてください")
    assert not bare.governed and bare.candidates == [] and bare.passages == []


@pytest.mark.parametrize("question", ["？", "What is the weather like today?", "   "])
def test_question_with_nothing_to_search_is_not_covered(retriever, question):
    result = retriever.search(question)
    assert not result.governed
    assert result.notes  # says why
    assert result.reference_text == ""


def test_threshold_is_applied(settings):
    strict = retrieval.load_retriever(dataclasses.replace(settings.retrieval, threshold=1.0), settings.storage)
    assert not strict.search("胸腺腫の治療").governed
    lenient = retrieval.load_retriever(dataclasses.replace(settings.retrieval, threshold=0.0), settings.storage)
    result = lenient.search("治療")
    assert len(result.candidates) >= 3  # every page mentioning 治療 clears 0
    default = retrieval.load_retriever(settings.retrieval, settings.storage)
    result = default.search("胸腺腫の治療")
    assert all(c.score >= default.config.threshold for c in result.candidates)
    assert all(p.score >= default.config.threshold for p in result.passages)
    scores = [c.score for c in result.candidates]
    assert scores == sorted(scores, reverse=True)


def test_reference_is_cut_at_line_boundaries_without_duplicates(settings):
    retriever = retrieval.load_retriever(dataclasses.replace(settings.retrieval, reference_chars=200, threshold=0.0), settings.storage)
    result = retriever.search("治療を受ける病院の費用と手術")
    assert result.governed
    assert 0 < result.reference_chars <= 200
    lines = _reference_lines(result)
    assert len(lines) == len(set(lines))  # no line twice
    for passage in result.passages:
        assert list(passage.lines) == sorted(passage.lines)
        for n in passage.lines:
            assert passage.page.line(n) in passage.text.split("\n")  # whole stored lines
    # the default budget takes more, still whole lines
    wide = retrieval.load_retriever(dataclasses.replace(settings.retrieval, threshold=0.0), settings.storage).search("治療を受ける病院の費用と手術")
    assert 200 < wide.reference_chars <= settings.retrieval.reference_chars


def test_keywords_are_added_to_the_query(retriever):
    assert retriever.offline_keywords("胸腺腫の手術は痛いですか") [0] == "胸腺腫"
    plain = retriever.search("どうすればいいですか")
    helped = retriever.search("どうすればいいですか", keywords=["高額療養費制度"])
    assert not plain.governed
    assert helped.governed and helped.candidates[0].url == BASE + "q4.html"
    assert helped.keywords == ["高額療養費制度"]


def test_offline_keywords_are_the_rarest_nouns(retriever):
    keywords = retriever.offline_keywords("PD-L1の検査と治療について", k=2)
    assert keywords[0] == "PD-L1"  # one page uses it; 治療 is everywhere
    assert len(keywords) == 2


def test_synonyms_apply_at_index_and_query_time(tmp_path):
    db = tmp_path / "g.db"
    write_pages(db)
    syn = tmp_path / "syn.tsv"
    syn.write_text("薬物療法\t抗がん剤\n", encoding="utf-8")
    plain, synonymous = settings_for(db), settings_for(db, synonyms=syn)
    without = retrieval.load_retriever(plain.retrieval, plain.storage)
    with_syn = retrieval.load_retriever(synonymous.retrieval, synonymous.storage)
    question = "抗がん剤の副作用がつらい"
    assert with_syn.search(question).candidates[0].url == BASE + "q2.html"
    assert with_syn.search(question).top_score > without.search(question).top_score


def test_retriever_helpers(retriever):
    assert retriever.idf("胸腺腫") > retriever.idf("治療")
    assert retriever.idf("存在しない語") >= retriever.idf("胸腺腫")
    assert "胸腺腫" in retriever.analyze("胸腺腫")
    assert len(retriever.pages) == 4


def test_empty_corpus_asks_to_scrape_first(tmp_path):
    db = tmp_path / "empty.db"
    write_pages(db, {})
    settings = settings_for(db)
    with pytest.raises(EmptyCorpusError, match="scrape") as info:
        retrieval.load_retriever(settings.retrieval, settings.storage)
    assert isinstance(info.value, InputError)
    with pytest.raises(EmptyCorpusError):
        retrieval.build_index(settings.retrieval, settings.storage)
    assert not settings.guideline_scope("default").index_dir.exists() or not (settings.guideline_scope("default").index_dir / "CURRENT").exists()


def test_missing_store_is_a_store_error(tmp_path):
    with pytest.raises(StoreError, match="scrape"):
        retrieval.load_retriever(RetrievalConfig(), StoreConfig(db=tmp_path / "nothing.db"))
    assert not (tmp_path / "nothing.db").exists()


def test_result_json_has_the_contract_fields(retriever):
    data = retriever.search("肺がんの原因は何ですか").to_json()
    for key in ("threshold", "candidates", "top_score", "reference_chars"):
        assert key in data
    assert data["candidates"] >= 1


def test_candidate_list_is_capped_but_the_total_kept(settings):
    retriever = retrieval.load_retriever(dataclasses.replace(settings.retrieval, threshold=0.0, max_candidates=2), settings.storage)
    result = retriever.search("治療")
    assert len(result.candidates) == 2
    assert result.candidates_total >= 3
    assert result.to_json()["candidates_total"] == result.candidates_total
    scores = [c.score for c in result.candidates]
    assert scores == sorted(scores, reverse=True)


def test_reference_chars_is_the_length_of_the_reference_text() -> None:
    """Counted without joining the reference: lines, newlines between lines and between
    passages, blank lines and passages without lines included."""
    from guiderag.retrieval.result import Passage, RetrievalResult
    from guiderag.store import PageVersion

    page = PageVersion(1, "https://x.invalid/a", "t", 1, "2026-01-01T00:00:00Z", "sha256:0",
                       ("肺がん", "", "EGFR遺伝子", "８０ｍｇ"))
    cases = [[], [Passage(page, (1,), 0.5)], [Passage(page, (1, 2, 3), 0.5), Passage(page, (4,), 0.4)],
             [Passage(page, (), 0.5)], [Passage(page, (), 0.5), Passage(page, (2,), 0.4)],
             [Passage(page, (), 0.5), Passage(page, (), 0.4)]]
    for passages in cases:
        result = RetrievalResult(question="q", keywords=[], query_terms=[], candidates=[], passages=passages,
                                 threshold=0.2, top_score=0.0, pipeline="ours", corpus_version="v")
        assert result.reference_chars == len(result.reference_text), passages
