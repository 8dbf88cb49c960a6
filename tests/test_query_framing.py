"""Question-side analysis (retrieval.framing, Analyzer.query_analysis): framing words,
synonym phrases on lemmas, 「Nのあと」, stray affixes, and the weights the evidence gate
shares with retrieval. Real MeCab, a real store and index."""
from __future__ import annotations

from pathlib import Path

import pytest

from chatbot_helpers import indexed_settings
from guiderag.chatbot.config import BotConfig
from guiderag.retrieval import query
from guiderag.retrieval.analyzer import Analyzer
from guiderag.retrieval.framing import FRAMING_WORDS, drop_framing
from guiderag.retrieval.analyzer import tokenize
from guiderag.retrieval.synonyms import SynonymTable

HAIR = SynonymTable.from_groups([["脱毛", "髪が抜ける"], ["入浴", "お風呂"]])


def test_framing_words_are_dropped_from_questions_but_kept_in_the_index() -> None:
    a = Analyzer()
    question = "抗がん剤の副作用が心配です。詳しく教えてください"
    assert "心配" in a(question) and "教える" in a(question)  # the index side keeps them
    terms = a.query_terms(question)
    assert "副作用" in terms
    assert not set(terms) & FRAMING_WORDS
    # feelings, requests, question words, who is asking: none of them is a term
    for framing in ("不安です", "気になります", "知りたいです", "いつ頃ですか", "うちの父が", "妻が"):
        assert a.query_terms("副作用が" + framing) == a.query_terms("副作用"), framing
    # discourse markers MeCab reads as nouns: ちなみに, そもそも, 実は
    for marker in ("ちなみに", "そもそも", "実は"):
        assert a.query_terms(marker + "副作用は") == a.query_terms("副作用は"), marker


def test_a_framing_word_inside_a_compound_stays() -> None:
    a = Analyzer()
    # 内 frames 「うちの父」 but is part of 院内 / 体内: only whole words are framing
    assert "院内" in a.query_terms("院内の相談窓口")
    assert "体内" in a.query_terms("体内に残る")


def test_stray_affixes_do_not_become_terms() -> None:
    a = Analyzer()
    assert "方" in a("手術のやり方")  # the index side: unchanged
    assert "方" not in a.query_terms("手術のやり方")
    assert "御" not in a.query_terms("お願いします、手術について")
    assert "治療方針" in a.query_terms("治療方針")  # a suffix after a noun stays


def test_noun_no_ato_is_the_compound_and_a_lone_ato_is_dropped() -> None:
    a = Analyzer()
    assert {"手術後", "手術"} <= set(a.query_terms("手術のあと、仕事はできますか"))
    assert a.query_terms("手術の後") == a.query_terms("手術後")
    assert "後" not in a.query_terms("そのあと抗がん剤を使います")


@pytest.mark.parametrize("question", ["髪が抜けます", "髪が抜けるのはいつ頃", "髪が抜けて困っています", "髪が抜けた"])
def test_a_synonym_phrase_matches_any_conjugation(question: str) -> None:
    a = Analyzer(HAIR)
    assert a.query_terms(question) == ["脱毛"]
    assert a(question)[0] == "脱毛"  # the index side reads pages the same way


def test_a_synonym_gives_the_bigrams_of_its_canonical_word() -> None:
    a = Analyzer(HAIR)
    assert a.query_analysis("お風呂").spans == ["入浴"]
    assert a.analysis("お風呂").spans == ["お風呂"]  # pages keep what they say


def test_drop_framing_accepts_a_custom_list() -> None:
    tokens = tokenize("副作用が心配です")
    kept = [t.form for t in drop_framing(tokens, frozenset()) if t.kind != "X"]
    assert "心配" in kept
    kept = [t.form for t in drop_framing(tokens) if t.kind != "X"]
    assert "心配" not in kept


PAGES = {
    "http://guide.test/a.html": (
        "薬物療法の副作用",
        "副作用について",
        "抗がん剤の副作用には、吐き気、脱毛、白血球の減少などがあります。",
    ),
    "http://guide.test/b.html": (
        "手術後の生活",
        "仕事への復帰",
        "デスクワークであれば、退院後数週間で仕事に復帰できることが多いです。",
    ),
    "http://guide.test/c.html": ("検査", "胸部CT検査で腫瘍の大きさを調べます。"),
}


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory):
    from guiderag import retrieval

    settings = indexed_settings(Path(tmp_path_factory.mktemp("framing")), PAGES)
    return retrieval.load_retriever(settings.retrieval, settings.storage)


def test_framing_words_do_not_lower_the_score(retriever) -> None:
    plain = retriever.search("抗がん剤の副作用")
    framed = retriever.search("抗がん剤の副作用が心配です。教えてください")
    assert plain.governed and framed.governed
    assert framed.top_score == pytest.approx(plain.top_score)
    assert "心配" not in framed.keywords


def test_an_unknown_verb_weighs_less_than_an_unknown_noun(retriever) -> None:
    weights = retriever.query_weights("副作用で泳げない")  # 泳ぐ: a verb the corpus never uses
    unseen = retriever.query_weights("副作用のグリオーマ")["グリオーマ"]
    # ... and an everyday one: its specificity in general Japanese weighs it too (issue 11)
    [swim] = [t for t in retriever.analyzer.query_analysis("副作用で泳げない").terms if t.text == "泳ぐ"]
    assert weights["泳ぐ"] == pytest.approx(
        unseen * query.VERB_WEIGHT * query.UNKNOWN_VERB_WEIGHT * retriever.builder.specificity(swim))
    assert weights["泳ぐ"] < unseen


def test_an_unknown_affixed_word_of_a_known_noun_weighs_like_an_unknown_compound(retriever) -> None:
    """吐き気的 and 脱毛中 are found nowhere, but 吐き気 and 脱毛 carry their meaning: with a
    light affix (的, 中: retrieval.query.LIGHT_SUFFIXES) the word IS its noun (issue 11,
    round 2), with another affix (脱毛症) it weighs like an unknown compound; an affixed word
    whose noun is unknown too (グリオーマ的) keeps the full unseen weight."""
    unseen = retriever.query_weights("副作用のグリオーマ")["グリオーマ"]
    for word, noun in (("吐き気的", "吐き気"), ("脱毛中", "脱毛")):
        weights = retriever.query_weights(f"{word}な副作用")
        assert word not in weights, word
        assert weights[noun] == pytest.approx(retriever.idf(noun))
    weights = retriever.query_weights("脱毛症な副作用")
    assert weights["脱毛症"] == pytest.approx(unseen * query.UNKNOWN_COMPOUND_WEIGHT)
    assert weights["脱毛"] == pytest.approx(retriever.idf("脱毛"))
    assert retriever.query_weights("グリオーマ的な副作用")["グリオーマ的"] == pytest.approx(unseen)


def test_a_compound_cut_short_by_mecab_is_completed_from_the_corpus(tmp_path: Path) -> None:
    """「高額療養費って」: MeCab reads 費って as a verb and leaves the unseen compound 高額療養;
    the corpus term it begins (高額療養費制度) stands in for it. A compound that begins no
    corpus term keeps its unknown-compound weight."""
    from guiderag import retrieval

    pages = {
        "http://guide.test/cost.html": (
            "治療費の制度", "高額療養費制度",
            "医療費の自己負担が高額になったときは、高額療養費制度を利用できます。",
            "長い療養が必要なときも、自己負担には上限があります。",
        ),
        "http://guide.test/work.html": ("仕事と治療", "治療と仕事の両立について、職場と相談しましょう。"),
    }
    settings = indexed_settings(tmp_path, pages)
    r = retrieval.load_retriever(settings.retrieval, settings.storage)
    question = "高額療養費ってなんですか"
    assert "高額療養" in r.analyze(question)  # what MeCab makes of it
    weights = r.query_weights(question)
    assert "高額療養" not in weights and weights["高額療養費制度"] == pytest.approx(r.idf("高額療養費制度"))
    result = r.search(question)
    assert result.governed and result.candidates[0].url.endswith("cost.html")
    unseen = r.query_weights("グリオーマ")["グリオーマ"]
    weights = r.query_weights("仕事両立支援")  # begins no corpus term
    assert weights["仕事両立支援"] == pytest.approx(unseen * query.UNKNOWN_COMPOUND_WEIGHT)


def test_the_evidence_gate_weighs_like_retrieval(tmp_path: Path) -> None:
    from guiderag.chatbot import Chatbot

    # the rules' evidence gate (the coverage model weighs the same slots: tests/test_coverage_model.py)
    settings = indexed_settings(tmp_path, PAGES, coverage_decision="rules")
    with Chatbot(BotConfig.of(settings)) as bot:
        answer = bot.ask("手術のあと、いつから仕事に戻れますか")
        assert answer.coverage == "governed", answer.retrieval
        assert "仕事に復帰" in answer.answer
        assert answer.retrieval["line_coverage"] >= settings.answer.min_line_coverage
        refused = bot.ask("グリオーマの手術のあと仕事に戻れますか")
        assert refused.coverage == "not_governed"


def _token_pool():
    """Tokens of every kind with the forms each rule of drop_framing reads."""
    from guiderag.retrieval.tokens import ADVERBIAL, ASCII, NOUN, OTHER, PREFIX, PROPER, SUFFIX, SYNONYM, VERB, Token

    forms = ["後", "心配", "教える", "父", "何", "幾", "日", "年", "回", "方", "事", "お", "治療", "副作用", "の", "が"]
    kinds = [NOUN, PROPER, ADVERBIAL, VERB, SUFFIX, PREFIX, SYNONYM, ASCII, OTHER]
    return [Token(f, f, k, space) for f in forms for k in kinds for space in (False, True)]


def test_the_flagged_framing_check_equals_the_plain_one_on_random_and_real_tokens() -> None:
    """drop_framing's gate reads per-token flags (retrieval.framing._changes): on random
    sequences of every kind of token and on real MeCab lines (figures, units, EGFR/PD-L1,
    full-width text, framing questions) it says what checking every rule at every token
    says, and drop_framing returns the same tokens."""
    import random

    from guiderag.retrieval import framing
    from guiderag.retrieval.bench import generate_corpus

    rng = random.Random(5)
    pool = _token_pool()
    sequences = [[rng.choice(pool) for _ in range(rng.randint(0, 7))] for _ in range(4000)]
    texts = ["手術のあとの生活について教えてください", "うちの父が何日入院しますか", "そのあと、何年おきに検査しますか",
             "ＥＧＦＲ遺伝子変異陽性、ＰＤ－Ｌ１　５０％以上の場合", "オシメルチニブ80mgを1日1回服用します",
             "やり方と飲み方を教えてください", "お願いします", "2週間ごとに点滴します（約30分）", "費用は3割負担です。",
             "何でも相談してください", "治療後の生活", "| 薬剤 | 用量 |", ""]
    texts += [line for page in generate_corpus(6, 1).pages for line in page.lines]
    sequences += [tokenize(t) for t in texts]
    changed = 0
    for tokens in sequences:
        want = framing._changes_plain(tokens, FRAMING_WORDS)
        assert framing._changes(tokens, FRAMING_WORDS) == want, tokens
        changed += want
    assert 100 < changed < len(sequences) - 100  # both answers are tested
    # another word list takes the plain check; the flags of the standard list do not leak into it
    assert drop_framing(tokenize("心配です"), frozenset()) == tokenize("心配です")
