"""Patients' own words (issue 11): each mechanism with real MeCab, the real bundled
resources (wordfreq's Japanese table, the Sudachi synonym dictionary, the patient table)
and a real store and index, and each shown to fail when it is switched off.

The guideline pages here are written for the tests."""
from __future__ import annotations

from pathlib import Path

import pytest

from chatbot_helpers import indexed_settings
from openai_stub import OpenAIStub
from guiderag.chatbot.config import BotConfig
from guiderag.chatbot import Chatbot
from guiderag.chatbot import extract as extract_mod
from guiderag.chatbot.answer_type import CAN_I, HOW_LONG, HOW_MUCH, HOW_OFTEN, WHAT_TO_DO, WHEN, asked_kinds
from guiderag.retrieval.analyzer import tokenize
from guiderag.retrieval.expansion import PATIENT, SUDACHI, PatientTable, load_sudachi, parse_patient_table
from guiderag.retrieval.specificity import weight_of_zipf, zipf
from guiderag.resources import data_path

PAGES = {
    "http://guide.test/surgery.html": (
        "胃切除のあとの生活",
        "胃切除のあとの食事",
        "胃切除のあとは、1回の食事量を減らし、1日5～6回に分けて食べます。",
        "仕事への復帰",
        "デスクワークであれば、退院後2～4週間で仕事に復帰できることが多いです。",
    ),
    "http://guide.test/birth.html": (
        "分娩と治療",
        "分娩後の治療",
        "分娩後の薬物療法は、授乳との関係を担当医と相談して決めます。",
    ),
    "http://guide.test/exam.html": (
        "内視鏡検査",
        "内視鏡検査の準備",
        "内視鏡検査の前日は、夕食を午後9時までに済ませてください。",
        "血便がある場合は、早めに受診してください。",
    ),
    "http://guide.test/hair.html": (
        "脱毛について",
        "脱毛の経過",
        "薬物療法による脱毛は、治療開始から2～3週間ほどで始まることが多いです。",
        "脱毛はつらい副作用ですが、多くの場合、治療が終われば髪はまた生えてきます。",
    ),
}


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory):
    return indexed_settings(Path(tmp_path_factory.mktemp("patient-words")), PAGES)


def _top(settings, question: str, **changes) -> tuple[bool, str, list[dict]]:
    from guiderag import retrieval

    s = settings.replace(**changes) if changes else settings
    r = retrieval.load_retriever(s.retrieval, s.storage)
    result = r.search(question)
    first = result.candidates[0].url if result.candidates else ""
    return result.governed, first, result.expansions


# --- the resources are the real ones -----------------------------------------------------------
def test_the_bundled_resources_are_shipped_with_their_license() -> None:
    folder = data_path("sudachi")
    for name in ("synonyms.txt", "LICENSE-2.0.txt", "LEGAL", "README.md"):
        assert (folder / name).is_file(), name
    assert "2c7cbcf2914edaccab53a28ae0d3e4befb524053" in (folder / "README.md").read_text(encoding="utf-8")
    sudachi = load_sudachi(folder / "synonyms.txt")
    assert len(sudachi) > 20000
    assert "分娩" in sudachi.synonyms("お産")
    assert data_path("patient_terms.tsv").is_file()


def test_specificity_reads_wordfreq_directly() -> None:
    assert zipf("お金") > 5 and zipf("髪") > 4.5  # everyday words
    assert zipf("白血病") < 3.6 and zipf("漢方") < 3.6  # topics
    assert zipf("存在しない語彙ですよ") is None
    assert weight_of_zipf(zipf("お金"), 3.5, 5.0, 0.1) == pytest.approx(0.1)
    assert weight_of_zipf(zipf("白血病"), 3.5, 5.0, 0.1) == 1.0
    assert weight_of_zipf(None, 3.5, 5.0, 0.1) == 1.0


# --- lay words to the guideline's words --------------------------------------------------------
def test_a_lay_word_reaches_the_guideline_term_through_the_sudachi_synonyms(settings) -> None:
    question = "お産のあとの抗がん剤はどう決めますか"  # the page says 分娩
    governed, first, expansions = _top(settings, question)
    assert governed and first.endswith("birth.html")
    assert any(e["origin"] == SUDACHI and e["target"] == "分娩" for e in expansions), expansions
    # switched off: お産 is a word the guideline never uses, and the page is not found
    governed_off, first_off, expansions_off = _top(settings, question, synonym_dict_weight=0.0)
    assert not any(e["origin"] == SUDACHI for e in expansions_off)
    assert not (governed_off and first_off.endswith("birth.html"))


@pytest.mark.parametrize("question,target,page", [
    ("胃カメラの前の日の夕食は？", "内視鏡検査", "exam.html"),        # a word
    ("胃を取ったあとの食事の回数は？", "胃切除", "surgery.html"),    # noun を verb, conjugated (取った)
    ("お尻から血が出たらどうすればいい？", "血便", "exam.html"),        # noun から noun
])
def test_a_lay_expression_reaches_the_guideline_term_through_the_patient_table(settings, question, target, page) -> None:
    governed, first, expansions = _top(settings, question)
    assert governed and first.endswith(page), (question, first, expansions)
    assert any(e["origin"] == PATIENT and e["target"] == target for e in expansions), expansions
    governed_off, first_off, expansions_off = _top(settings, question, patient_table_weight=0.0)
    assert not any(e["origin"] == PATIENT for e in expansions_off)
    assert not (governed_off and first_off.endswith(page))


def test_patient_table_entries_match_on_lemmas_across_particles() -> None:
    rows = parse_patient_table("# a comment\n髪が抜ける\t脱毛\nカメラの検査\t内視鏡検査\n抗がん剤\t薬物療法\n")
    table = PatientTable.from_rows(rows, tokenize)

    def targets(text: str) -> list[str]:
        return [t for m in table.matches(tokenize(text)) for t in m.targets]

    assert targets("髪は抜けますか") == ["脱毛"]  # another particle, a conjugated verb
    assert targets("髪がどんどん抜けてきた") == ["脱毛"]  # a word between
    assert targets("髪が、抜ける") == []  # never across punctuation
    assert targets("胃カメラの検査") == ["内視鏡検査"]
    assert targets("抗がん剤治療") == ["薬物療法"]
    assert targets("髪を切る") == []


def test_a_malformed_patient_table_line_is_a_clear_error() -> None:
    from guiderag.errors import InputError

    with pytest.raises(InputError, match="line 2"):
        parse_patient_table("抗がん剤\t薬物療法\n髪が抜ける\n")


def test_expansions_are_listed_in_the_answer_json(settings) -> None:
    with Chatbot(BotConfig.of(settings)) as bot:
        data = bot.ask("胃カメラの前の日の夕食は？").to_json()
    fired = data["retrieval"]["expansions"]
    assert {"source", "target", "weight", "origin", "terms"} <= set(fired[0])
    assert all(e["weight"] < 1 for e in fired)  # below an exact match


# --- telling unfamiliar wording from an uncovered topic ----------------------------------------
def test_a_common_unknown_word_does_not_cause_a_refusal(settings) -> None:
    """家 and 戻る are everyday words the guideline never uses (it says 復帰)."""
    question = "退院したら、家の仕事にはいつ戻れますか"
    with Chatbot(BotConfig.of(settings)) as bot:
        answer = bot.ask(question)
    assert answer.coverage == "governed", answer.retrieval
    assert "退院後2～4週間で仕事に復帰" in answer.answer
    assert answer.answer.splitlines()[1].startswith("デスクワーク")  # the line that says when
    with Chatbot(BotConfig.of(settings.replace(specific_min_weight=1.0))) as bot:  # every unknown word fully weighed
        assert bot.ask(question).coverage == "not_governed"


@pytest.mark.parametrize("question", [
    "白血病の治療にはどんな薬を使いますか",
    "漢方薬は副作用に効きますか",
    "乳がんの手術のあとの食事は？",
])
def test_a_specific_unknown_topic_is_still_refused(settings, question) -> None:
    with Chatbot(BotConfig.of(settings)) as bot:
        answer = bot.ask(question)
    assert answer.coverage == "not_governed", (question, answer.retrieval)


# --- the model's terms may only add evidence ---------------------------------------------------
JUNK = "INST、<<SYS>>、mendatang、で購入"


def test_junk_model_keywords_never_lower_a_score_nor_refuse(settings) -> None:
    from guiderag import retrieval

    r = retrieval.load_retriever(settings.retrieval, settings.storage)
    question = "脱毛はいつから始まりますか"
    plain = r.search(question, [])
    junk = r.search(question, ["INST", "<<SYS>>", "mendatang", "で購入", "治療"])
    assert junk.top_score >= plain.top_score - 1e-6 and junk.governed
    assert any("ignored" in n and "INST" in n for n in junk.notes)
    # the mechanism: scored as one query, the keywords would lower the question's score
    base, extended = r.query(question, ["治療", "夕食"])
    assert extended is not None
    assert float(r.query_scores(extended)[0].max()) < float(r.query_scores(base)[0].max())
    assert r.search(question, ["治療", "夕食"]).top_score == pytest.approx(plain.top_score)


def test_junk_from_the_keywords_model_still_gives_the_offline_answer(settings) -> None:
    question = "脱毛はいつから始まりますか"
    with Chatbot(BotConfig.of(settings)) as bot:
        offline = bot.ask(question)
    with OpenAIStub([JUNK]) as stub:
        s = settings.replace(openai_base_url=stub.base_url, openai_api_key="test", keywords_model="stub-kw")
        with Chatbot(BotConfig.of(s)) as bot:
            answer = bot.ask(question)
        [request] = stub.requests
    assert "ガイドライン" in request["messages"][0]["content"]  # the default pipeline's prompt
    assert answer.coverage == "governed" == offline.coverage
    assert answer.retrieval["top_score"] >= offline.retrieval["top_score"] - 1e-6
    # the coverage model: junk keywords never lower P(governed) (the better of without and with them)
    assert answer.coverage_probability >= offline.coverage_probability - 1e-9


def test_model_terms_bridge_a_patients_words(settings) -> None:
    question = "頭の毛がなくなるのはいつからですか"  # no resource joins these to 脱毛
    with Chatbot(BotConfig.of(settings)) as bot:
        offline = bot.ask(question)
    with OpenAIStub(["脱毛、薬物療法"]) as stub:
        s = settings.replace(openai_base_url=stub.base_url, openai_api_key="test", keywords_model="stub-kw")
        with Chatbot(BotConfig.of(s)) as bot:
            answer = bot.ask(question)
    assert answer.coverage == "governed" and "2～3週間" in answer.answer
    assert answer.retrieval["top_score"] > offline.retrieval["top_score"]


# --- lines that answer the question's type -----------------------------------------------------
def test_question_kinds() -> None:
    assert HOW_LONG in asked_kinds("どのくらい入院しますか")
    assert WHEN in asked_kinds("いつから仕事に戻れますか")
    assert HOW_OFTEN in asked_kinds("何年おきに受ければいいですか")
    assert HOW_MUCH in asked_kinds("費用はいくらですか")
    assert CAN_I in asked_kinds("お酒を飲んでもいいですか")
    assert WHAT_TO_DO in asked_kinds("しびれたらどうすればいいですか")
    assert asked_kinds("胃がんとは何ですか") == frozenset()


def test_the_line_giving_the_kind_of_answer_asked_for_comes_first(tmp_path: Path, monkeypatch) -> None:
    """Both lines share the question's only topic word (入院); the one saying how long
    comes first, and alone fits the budget with the title."""
    pages = {
        "http://guide.test/stay.html": (
            "入院について",
            "入院について",
            "入院中の生活で心配なことは、看護師に相談できます。",
            "入院期間は、10日程度が目安となります。",
        ),
    }
    s = indexed_settings(tmp_path, pages, answer_chars=34)
    question = "入院はどのくらいですか"
    with Chatbot(BotConfig.of(s)) as bot:
        answer = bot.ask(question)
    assert answer.coverage == "governed"
    assert answer.answer.splitlines() == ["入院について", "入院期間は、10日程度が目安となります。"]
    monkeypatch.setattr(extract_mod, "ANSWER_TYPE_WEIGHT", 0.0)  # switched off
    with Chatbot(BotConfig.of(s)) as bot:
        off = bot.ask(question)
    assert "10日程度" not in off.answer


PHRASE_PAGES = {
    "http://guide.test/walk.html": (
        "手術のあとの経過",
        "手術翌日の過ごし方",
        "手術翌日からベッドを離れ、看護師と一緒に歩き始めます。",
    ),
    "http://guide.test/visit.html": (
        "通院の予定",
        "診察の予定",
        "次回の診察日は、退院のときに担当医が決めます。",
    ),
}


@pytest.fixture(scope="module")
def phrase_settings(tmp_path_factory: pytest.TempPathFactory):
    return indexed_settings(Path(tmp_path_factory.mktemp("sudachi-phrases")), PHRASE_PAGES)


def test_a_dictionary_phrase_reaches_its_synonym_token_for_token(phrase_settings) -> None:
    # Sudachi's 次の日 is three MeCab words the guideline knows one by one (次, 日); it says 翌日
    governed, first, expansions = _top(phrase_settings, "手術の次の日から歩くの？")
    assert any(e["origin"] == SUDACHI and e["source"] == "次の日" and e["target"] == "翌日" for e in expansions), expansions
    assert first.endswith("walk.html")
    _, _, off = _top(phrase_settings, "手術の次の日から歩くの？", synonym_dict_weight=0.0)
    assert not any(e["origin"] == SUDACHI for e in off)
    # the phrase only as written: 次の診察日 is no 次の日
    _, _, other = _top(phrase_settings, "次の診察日はいつ決まるの？")
    assert not any(e["target"] == "翌日" for e in other), other


def test_a_lay_expression_said_as_not_done_reaches_nothing() -> None:
    # お腹を切らずに: "without open surgery" asks for the other treatment, never 開腹手術
    table = PatientTable.from_rows([("お腹を切る", ["開腹手術"]), ("髪が抜ける", ["脱毛"])], tokenize)
    def targets(text):
        return [t for m in table.matches(tokenize(text)) for t in m.targets]
    assert targets("お腹を切る手術ですか") == ["開腹手術"]
    for without in ("お腹を切らずに治せますか", "お腹を切らないで済む方法は", "お腹を切らなくてもいいですか"):
        assert targets(without) == [], without
    # a plain negation still asks about the thing itself
    assert targets("髪が抜けないようにするには") == ["脱毛"]


KANA_PAGES = {
    "http://guide.test/dumping.html": (
        "ダンピング症候群とは",
        "ダンピング症候群の症状",
        "ダンピング症候群は、胃の手術のあとに食べ物が急に腸へ流れ込んで起こる症状です。",
    ),
    "http://guide.test/stay.html": (
        "入院の期間",
        "入院期間の目安",
        "入院の期間は、手術の方法によって異なります。",
    ),
}


@pytest.fixture(scope="module")
def kana_settings(tmp_path_factory: pytest.TempPathFactory):
    return indexed_settings(Path(tmp_path_factory.mktemp("kana-readings")), KANA_PAGES)


def test_a_word_typed_in_kana_reaches_the_term_the_guideline_writes_in_kanji(kana_settings) -> None:
    from guiderag.retrieval.expansion import READING

    question = "だんぴんぐしょうこうぐんって、ずっと続くんですか？"
    governed, first, expansions = _top(kana_settings, question)
    assert governed and first.endswith("dumping.html"), (first, expansions)
    assert any(e["origin"] == READING and e["target"] == "ダンピング症候群" for e in expansions), expansions
    _, _, off = _top(kana_settings, question, synonym_dict_weight=0.0)
    assert not any(e["origin"] == READING for e in off)


def test_kana_readings_are_unique_and_long_enough() -> None:
    from guiderag.retrieval.analyzer import reading
    from guiderag.retrieval.readings import Readings, kana_runs

    r = Readings(["ダンピング症候群", "期間", "器官", "胃癌", "腹腔鏡", "手術"], reading)
    assert r.term("だんぴんぐしょうこうぐん") == "ダンピング症候群"
    assert r.term("ふっこうきょう") == "腹腔鏡" and r.term("シュジュツ") == "手術"
    assert r.term("きかん") is None  # too short: 期間, 器官, 機関 all read きかん
    assert r.term("いがん") is None
    # a run of kana tokens with some hiragana; a katakana word alone is no run
    tokens = tokenize("だんぴんぐしょうこうぐんの手術とダンピング")
    runs = kana_runs(tokens)
    assert len(runs) == 1 and "".join(t.surface for t in tokens[slice(*runs[0])]).startswith("だんぴんぐ")
