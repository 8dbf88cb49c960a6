"""The Japanese analyzer: the traps the published protocol falls into, one by one."""
from __future__ import annotations

import multiprocessing
import pickle

import pytest

from guiderag.errors import InputError
from guiderag.retrieval.analyzer import Analyzer, analyze, tokenize
from guiderag.retrieval.bigrams import char_bigrams
from guiderag.retrieval.protocol_text import protocol_clean, protocol_nouns
from guiderag.retrieval.keywords import parse_keywords
from guiderag.retrieval.synonyms import load_synonyms, parse_synonyms


def test_one_character_nouns_are_terms():
    terms = analyze("肺に影があり、癌と言われました。薬を飲むと胸が痛みます。")
    for noun in ("肺", "癌", "薬", "胸"):
        assert noun in terms


def test_alphanumeric_terms_stay_whole_and_lower_cased():
    terms = analyze("EGFR遺伝子変異、PD-L1の発現、5-FU を 80mg 投与")
    for term in ("egfr", "pd-l1", "5-fu", "80mg"):
        assert term in terms
    assert "pd" not in terms and "fu" not in terms


def test_full_width_text_is_normalised():
    assert analyze("ＥＧＦＲとＰＤ－Ｌ１、０．５ｍｇ") == analyze("EGFRとPD-L1、0.5mg")
    assert "egfr" in analyze("ＥＧＦＲ")


def test_compounds_are_rejoined_with_their_affixes():
    terms = analyze("副作用が出た。遺伝子を調べた。胸腺腫の手術。")
    for compound in ("副作用", "遺伝子", "胸腺腫"):
        assert compound in terms
    # and the parts come along, so a question using only a part still matches
    assert "作用" in terms and "腺腫" in terms


def test_compounds_without_parts_when_asked():
    terms = Analyzer(parts=False)("胸腺腫の手術")
    assert "胸腺腫" in terms and "腺腫" not in terms


def test_spelling_variants_share_a_term():
    assert "肺癌" in analyze("肺がん") and "肺癌" in analyze("肺癌")
    assert set(analyze("がんの治療")) & set(analyze("癌の治療")) >= {"癌", "治療"}


def test_proper_nouns_keep_their_surface():
    assert "東京" in analyze("東京の病院")  # the UniDic lemma would be トウキョウ


def test_question_words_are_not_terms():
    terms = analyze("何年に何が起きましたか？")
    assert not any("何" in t for t in terms)
    assert analyze("？") == []
    assert analyze("") == []


def test_verb_and_adjective_lemmas():
    terms = analyze("薬を飲んだら眠くなった")
    assert "飲む" in terms and "眠い" in terms
    assert "飲む" not in Analyzer(verbs=False)("薬を飲んだら眠くなった")


def test_character_bigrams_of_content_spans():
    analysis = Analyzer().analysis("胸腺腫の治療")
    grams = char_bigrams(analysis.spans)
    assert {"胸腺", "腺腫", "治療"} <= set(grams)
    assert char_bigrams(["肺"]) == ["肺"]


def test_analyze_is_picklable_and_works_in_worker_processes():
    assert pickle.loads(pickle.dumps(analyze)) is analyze
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        assert pool.map(analyze, ["副作用の薬"]) == [analyze("副作用の薬")]


def test_synonyms_map_every_member_to_the_canonical_term(tmp_path):
    path = tmp_path / "synonyms.tsv"
    path.write_text(
        "# patient word <-> guideline word\n薬物療法\t抗がん剤\t抗癌剤\nオシメルチニブ\tタグリッソ\n",
        encoding="utf-8",
    )
    analyzer = Analyzer(synonyms=load_synonyms(path))
    assert "薬物療法" in analyzer("抗がん剤はつらいですか")
    assert "薬物療法" in analyzer("薬物療法の副作用")
    assert "薬物療法" in analyzer("抗がん剤治療を受ける")  # inside a longer compound
    assert "オシメルチニブ" in analyzer("タグリッソを飲んでいます")
    assert "薬物療法" not in analyze("抗がん剤はつらいですか")  # the default analyzer has none
    restored = pickle.loads(pickle.dumps(analyzer))
    assert restored("タグリッソ") == analyzer("タグリッソ")
    assert analyzer.fingerprint() != Analyzer().fingerprint()


def test_bad_synonym_line_is_a_clear_input_error(tmp_path):
    with pytest.raises(InputError, match="line 2"):
        parse_synonyms("薬物療法\t抗がん剤\n一語だけ\n", "x.tsv")
    with pytest.raises(InputError, match="does not exist"):
        load_synonyms(tmp_path / "missing.tsv")


def test_protocol_text_processing_is_literal():
    # the protocol's filter deletes EGFR and 80mg, and keeps UniDic's short units
    assert protocol_clean("<p>EGFR遺伝子の検査</p> 80mg") == "遺伝子の検査 "
    assert protocol_nouns("<p>EGFR遺伝子の検査</p> 肺癌の薬") == "遺伝 検査 肺癌 薬"


def test_parse_keywords_from_model_replies():
    assert parse_keywords("1. 胸腺腫\n2. 治療法") == ["胸腺腫", "治療法"]
    assert parse_keywords("キーワード：胸腺腫、治療法") == ["胸腺腫", "治療法"]
    assert parse_keywords("「肺がん」, 「手術」, 「費用」", 3) == ["肺がん", "手術", "費用"]
    assert parse_keywords("- 副作用\n- 副作用\n- 吐き気") == ["副作用", "吐き気"]
    assert parse_keywords("") == []


def test_adjectival_nouns_head_compounds_and_counters_stay_with_question_words():
    terms = analyze("地球温暖化の必要性")
    assert {"地球温暖化", "温暖化", "必要性"} <= set(terms)
    assert "化" not in terms  # not a lone suffix
    assert analyze("何人兄弟ですか") == ["兄弟"]  # 人 belongs to 何


def test_threads_share_the_tagger_safely():
    # The app serves sessions from threads; a node list lives in the tagger's lattice
    # until its next parse. Switching threads very often makes an unguarded
    # traversal read another thread's nodes (this fails without the analyzer's lock).
    import sys
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"胸腺腫の手術{i}回目とEGFR遺伝子変異、肺がんの薬物療法の副作用について" for i in range(300)]
    expected = [analyze(t) for t in texts]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(2):
            with ThreadPoolExecutor(4) as pool:
                assert list(pool.map(analyze, texts)) == expected
    finally:
        sys.setswitchinterval(interval)


def _tokenize_by_walking_nodes(text: str) -> list:
    """Reference: the same tokens read node by node from parseToNode."""
    from guiderag.retrieval import analyzer

    text = analyzer.normalize(text)
    tokens = []
    node = analyzer.tagger().parseToNode(text)
    while node is not None:
        if node.surface:
            token = analyzer._classify(node.surface, node.feature)
            if node.rlength > node.length:
                token = token._replace(space_before=True)
            tokens.append(token)
        node = node.next
    return analyzer._glue_ascii(tokens)


def test_tokenize_reads_the_same_tokens_as_walking_the_nodes():
    """tokenize() reads one parse() string per text; pinned against the node walk, on
    guideline text and on random text with tabs, newlines, controls and full-width forms."""
    import random

    texts = [
        "ＥＧＦＲ遺伝子変異とPD-L1 80mg 5-FU", "肺がん\tの\n手術\x0b後", "  先頭の空白  と末尾  ",
        "副作用\r\n吐き気\u2028脱毛\x85口内炎\x0cしびれ", "", "？", "a  b\tc 肺 がん", "ｸﾞﾘｵｰﾏ xyzzy Ⅱ期 ①",
    ]
    rng = random.Random(20261129)
    alphabet = list("肺がん癌の手術副作用遺伝子EGFRPD-L1 80mg5-FU。、！？「」（）()abc 012.+/-　\t\n\r\x0b\x0cｶﾅＥ①Ⅱ㎎%&~")
    alphabet += ["\u2028", "\x85", "\xa0", "\u200b", "\ufeff", "\u3000", "\u2003", "\x1c"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    for text in texts:
        assert tokenize(text) == _tokenize_by_walking_nodes(text), repr(text)


def _apply_token_by_token(table, tokens):
    """Reference: the synonym replacement as a plain left-to-right scan, longest first."""
    from guiderag.retrieval.analyzer import SYNONYM, Token

    out, i = [], 0
    while i < len(tokens):
        for forms, canonical in table.starts.get(tokens[i].form, ()):
            k = len(forms)
            if tuple(t.form for t in tokens[i : i + k]) == forms:
                surface = "".join(t.surface for t in tokens[i : i + k])
                out.append(Token(surface, canonical, SYNONYM, tokens[i].space_before))
                i += k
                break
        else:
            out.append(tokens[i])
            i += 1
    return out


def test_synonym_replacement_matches_a_token_by_token_scan():
    """Longest member first, adjacent and overlapping members, members inside compounds."""
    import random

    from guiderag.retrieval.synonyms import SynonymTable

    groups = [["放射線治療", "放射線療法", "放射線をあてる治療"], ["放射線", "放射"], ["薬物療法", "抗がん剤", "抗がん剤治療"],
              ["脱毛", "髪が抜ける", "毛が抜ける"], ["肺がん", "肺癌", "肺のがん"]]
    table = SynonymTable.from_groups(groups)
    words = [w for g in groups for w in g] + ["の", "、", "が", "副作用", " ", "治療", "がん"]
    rng = random.Random(11)
    for _ in range(2000):
        tokens = tokenize("".join(rng.choice(words) for _ in range(rng.randint(1, 10))))
        assert table.apply(tokens) == _apply_token_by_token(table, tokens)
    assert [t.form for t in table.apply(tokenize("放射線治療と抗がん剤治療"))][::2] == ["放射線治療", "薬物療法"]


@pytest.mark.parametrize("written, typed", [
    ("ステージⅣ", "ステージ4"), ("ステージIV", "ステージ４"), ("Ⅲ期", "3期"), ("第Ⅱ相試験", "第2相試験"),
    ("ステージⅢA", "ステージ3A"), ("Stage IV", "Stage 4"), ("ステージⅡ・Ⅲ", "ステージ2・3"),
    ("ステージ0からⅠ", "ステージ0から1"),
])
def test_stage_numerals_read_as_the_digits_patients_type(written, typed):
    from guiderag.retrieval.normalize import normalize

    assert normalize(written) == normalize(typed)
    assert analyze(written) == analyze(typed)


def test_roman_letters_elsewhere_are_left_alone():
    from guiderag.retrieval.normalize import normalize

    # IV is also intravenous; a vitamin B is no stage
    for text in ("IV投与", "ビタミンB", "CTCAE v5", "VI", "PD-L1"):
        assert normalize(text) == text


@pytest.mark.parametrize("kanji, digits", [
    ("1日一回", "1日1回"), ("二週間後", "2週間後"), ("三十分ほど", "30分ほど"), ("二十五歳", "25歳"),
    ("五十代", "50代"), ("十二日", "12日"),
])
def test_counts_in_kanji_before_a_counter_read_as_digits(kanji, digits):
    from guiderag.retrieval.normalize import normalize

    assert normalize(kanji) == digits
    assert analyze(kanji) == analyze(digits)


def test_kanji_numerals_that_are_words_stay_words():
    from guiderag.retrieval.normalize import normalize

    # 十分 (enough), 一部, 一般, 統一, 一時的: no counts
    for text in ("十分に休む", "一部の患者", "一般的な", "統一", "一時的に", "百回"):
        assert normalize(text) == text


def test_a_verb_unidic_marks_auxiliary_is_a_word_after_a_particle():
    """UniDic marks 続ける, 治す, 抜ける, 出す 非自立可能 (they can follow a verb: 飲み続ける);
    after a particle they are the sentence's own verb and terms, after a verb or て they
    are auxiliaries, and 気をつける (a framing word's set phrase) is no topic."""
    forms = {t.form: t.kind for t in tokenize("治療を続けることが大切です")}
    assert forms["続ける"] == "V"
    assert "続ける" in analyze("治療を続けることが大切です")
    assert "直す" in analyze("がんを完全に治すことが難しい場合もあります")
    assert "抜ける" in analyze("髪が抜けることがあります")
    assert "続ける" not in analyze("薬を飲み続けることが大切です")
    assert "見る" not in analyze("一度受けてみるとよいでしょう")
    assert "来る" not in analyze("髪が抜けてくることがあります")
    assert "付ける" not in analyze("食事に気をつけることは？")
