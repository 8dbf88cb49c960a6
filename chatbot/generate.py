"""GENERATE mode: the published protocol's prompt, the insufficiency check, and support flags.

The system message is fixed (the protocol, in Japanese); the question only ever goes into
the user message, after the reference: `参考情報: <reference>` then `質問: <question>`.
The model's text is shown labelled as a summary, always with the verbatim passages; a
reply that is the insufficiency sentence (or a close variant) means "not covered"; each
generated sentence with a content word that the reference does not contain is flagged.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Callable, Iterable, Sequence

# The protocol's sentence for "the reference does not answer this".
INSUFFICIENT_SENTENCE = "文章中に十分な情報がありません"

GENERATE_SYSTEM_PROMPT = (
    "あなたは、がん患者さんに情報を提供する医療情報アシスタントです。"
    "以下の参考情報のみに基づいて回答を生成し、あなた自身の一般的な知識や推論は使わないでください。"
    "回答は詳しく、わかりやすく、{chars}文字程度にしてください。"
    "参考情報に質問に答えるための十分な情報が含まれていない場合は、推測や一般的な知識を使わずに、"
    "「" + INSUFFICIENT_SENTENCE + "」と回答してください。"
)

# Protocol sampling parameters (the reply budget, 1024 tokens as published, is the
# answer_max_tokens setting).
TEMPERATURE = 0.1
N = 1

# Close variants of the insufficiency sentence (matched on NFKC text without spaces or
# punctuation). A reply counts as declined when it opens with one of these, or is short
# and contains one: a long answer that says one detail is missing still answers.
_DECLINE = re.compile(
    r"(?:十分な情報が(?:ありません|ない|含まれていません|見つかりません|記載されていません)"
    r"|情報が(?:不十分|不足|十分ではありません|十分でない)"
    r"|(?:記載|情報|言及)が(?:ありません|ない|見当たりません|含まれていません)"
    r"|(?:書かれて|記載されて|含まれて|触れられて)いません"
    r"|(?:回答|お答え|答え)(?:することが)?(?:でき|られ)ません"
    r"|わかりません|分かりません"
    # English, as squashed (spaces removed)
    r"|insufficientinformation|notenoughinformation|doesnotcontain(?:enough|sufficient)"
    r"|cannotanswer|cannotbeanswered|noinformation)",
    re.I,
)
DECLINE_SHORT_CHARS = 80
# A reply this short that contains a decline anywhere is a decline.
DECLINE_TINY_CHARS = 40

_SENTENCE_SPLIT = re.compile(r"(?<=[。！？!?])|\n+")
_STRIP = re.compile(r"[\s、。，．,.・「」『』（）()【】\[\]!?！？:：;；\"'“”‘’…-]+")

# Words any answer may use without the reference having them (the analyzer's lemmas).
GENERIC_WORDS = frozenset(
    "する ある いる なる できる れる られる ない こと もの よう ため 場合 方 ほう 等 など "
    "思う 言う いう 考える 行う 必要 可能 ください 下さる くださる 参考 情報 質問 回答 以下 "
    "上記 次 これ それ あれ この その 私 あなた 患者 さん 方法 について 関する".split()
)


def system_prompt(answer_chars: int) -> str:
    """The protocol's system message (its length hint follows AnswerConfig.answer_chars)."""
    return GENERATE_SYSTEM_PROMPT.format(chars=answer_chars)


def user_message(reference: str, question: str) -> str:
    """The one user message of the protocol."""
    return f"参考情報: {reference}\n質問: {question}"


def squash(text: str) -> str:
    """NFKC text without spaces and punctuation: what replies are compared on."""
    return _STRIP.sub("", unicodedata.normalize("NFKC", text or ""))


_squash = squash


def is_insufficient(reply: str) -> bool:
    """True when the reply is the protocol's insufficiency sentence or a close variant.

    Declined: an empty reply; a reply opening with the protocol's sentence; a reply whose
    first sentence is a short decline and which is short overall (an apology or a pointer
    may follow); a very short reply containing a decline anywhere. A long answer that says
    one detail is missing ("費用については記載されていません") still answers.
    """
    squashed = _squash(reply)
    if not squashed:
        return True
    if opens_with_insufficiency(reply):
        return True
    first = next((s for s in split_sentences(reply) if _squash(s)), "")
    if _DECLINE.search(_squash(first)) and len(_squash(first)) <= DECLINE_SHORT_CHARS:
        # The first sentence declines; the rest may only apologise or point elsewhere.
        if len(squashed) <= DECLINE_SHORT_CHARS * 2:
            return True
    return len(squashed) <= DECLINE_TINY_CHARS and bool(_DECLINE.search(squashed))


def opens_with_insufficiency(reply: str) -> bool:
    """True when the reply begins with the protocol's insufficiency sentence."""
    return _squash(reply).startswith(_squash(INSUFFICIENT_SENTENCE))


def split_sentences(text: str) -> list[str]:
    """Sentences of a generated text (split after 。！？ and at line breaks)."""
    return [s.strip() for s in _SENTENCE_SPLIT.split(text or "") if s and s.strip()]


def unsupported_sentences(
    summary: str,
    reference: str,
    analyze: Callable[[str], Sequence[str]],
) -> list[str]:
    """Generated sentences with a content word that occurs nowhere in the reference.

    A word counts as present when the analyzer finds it among the reference's terms or
    its surface occurs in the NFKC reference text (lemmas and inflected forms differ).
    """
    ref_norm = unicodedata.normalize("NFKC", reference)
    ref_terms = set(analyze(ref_norm))
    ref_flat = "".join(ref_norm.split()).lower()
    flagged = []
    for sentence in split_sentences(summary):
        missing = [
            t for t in _content_terms(sentence, analyze)
            if t not in ref_terms and t.lower() not in ref_flat
        ]
        if missing:
            flagged.append(sentence)
    return flagged


def _content_terms(sentence: str, analyze: Callable[[str], Sequence[str]]) -> Iterable[str]:
    for term in analyze(unicodedata.normalize("NFKC", sentence)):
        if term in GENERIC_WORDS or not term.strip() or _STRIP.fullmatch(term):
            continue
        yield term
