"""GENERATE mode pieces: the protocol prompt, the insufficiency check, unsupported sentences."""
from __future__ import annotations

import pytest

from guiderag.chatbot.generate import (
    GENERATE_SYSTEM_PROMPT,
    INSUFFICIENT_SENTENCE,
    is_insufficient,
    split_sentences,
    system_prompt,
    unsupported_sentences,
    user_message,
)
from guiderag.retrieval.analyzer import analyze


def test_system_prompt_says_what_the_protocol_says():
    prompt = system_prompt(500)
    for phrase in ("がん患者", "医療情報アシスタント", "参考情報のみに基づいて", "一般的な知識",
                   "500文字程度", INSUFFICIENT_SENTENCE):
        assert phrase in prompt
    assert "{" not in prompt and "{chars}" in GENERATE_SYSTEM_PROMPT


def test_user_message_has_reference_then_question():
    assert user_message("胸腺腫は…", "治療は？") == "参考情報: 胸腺腫は…\n質問: 治療は？"


@pytest.mark.parametrize(
    "reply",
    [
        INSUFFICIENT_SENTENCE,
        "文章中に十分な情報がありません。",
        "「文章中に十分な情報がありません」",
        "  文章中に十分な情報が ありません 。",
        "参考情報には十分な情報が含まれていません。",
        "申し訳ありませんが、参考情報にはその記載がありません。",
        "参考情報からはお答えできません。担当医にご相談ください。",
        "There is insufficient information in the text.",
        "",
    ],
)
def test_insufficiency_and_close_variants_mean_not_covered(reply):
    assert is_insufficient(reply)


@pytest.mark.parametrize(
    "reply",
    [
        "胸腺腫の治療の中心は手術です。取りきれない場合は放射線治療を行います。",
        "胸腺腫の治療は手術が中心で、腫瘍と胸腺をまとめて切除します。進行している場合は薬物療法を"
        "検討します。なお、費用については参考情報に記載されていません。",
    ],
)
def test_real_answers_are_not_taken_for_refusals(reply):
    assert not is_insufficient(reply)


def test_split_sentences():
    assert split_sentences("一つ目。二つ目！\n三つ目") == ["一つ目。", "二つ目！", "三つ目"]


REFERENCE = (
    "胸腺腫の治療\n治療の中心は手術で、腫瘍と胸腺をまとめて切除します。\n"
    "手術で取りきれない場合は、放射線治療を行うことがあります。"
)


def test_sentences_with_words_from_outside_the_reference_are_flagged():
    summary = (
        "胸腺腫の治療の中心は手術です。"
        "取りきれない場合は放射線治療を行うことがあります。"
        "免疫チェックポイント阻害薬がよく効きます。"
    )
    assert unsupported_sentences(summary, REFERENCE, analyze) == ["免疫チェックポイント阻害薬がよく効きます。"]


def test_inflected_and_full_width_words_still_count_as_supported():
    summary = "手術で腫瘍を切除しました。ＣＴで調べます。"
    reference = REFERENCE + "\nCTで調べる。"
    assert unsupported_sentences(summary, reference, analyze) == []


def test_opening_with_the_insufficiency_sentence():
    from guiderag.chatbot.generate import opens_with_insufficiency

    assert opens_with_insufficiency("「文章中に十分な情報がありません」。行: 3")
    assert not opens_with_insufficiency("行: 3, 5（その他の行には記載がありません）")
