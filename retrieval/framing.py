"""Question-framing words: the words that frame ANY question, never its topic.

Patients wrap a question in feelings (心配です, 不安です, 気になる, 怖い), requests
(教えてください, 知りたい, お願いします), question words (いつ頃) and who is asking
(うちの父が, 妻が). None of them says what the question is about, yet each one counted
in the question's idf mass (the refusal signal's denominator, retrieval.scoring)
and in the evidence gate's (chatbot.extract.line_coverage): a framing word the guideline
rarely uses weighed more than the topic itself, and 「抗がん剤の副作用が心配です」 was
refused.

They are dropped from QUERIES only (the question and its keywords), never from the
index: a page that is about anxiety still has the term 不安, and a question about it still
has its topic words (相談, 気持ち). Keep this list to words that frame every kind of
question in every guideline; a word that can be the subject of a question (痛み, つらさ,
家族, 相談, 費用) does not belong here. Entries are the analyzer's forms: UniDic lemmas
(気がかり -> 気掛かり, わかる -> 分かる, いつ頃 -> 何時頃).
"""
from __future__ import annotations

import functools
import operator
from typing import Iterable, cast

from .tokens import ADVERBIAL, ASCII, NOUN, OTHER, PREFIX, PROPER, STOP_NOUNS, SUFFIX, SYNONYM, VERB, Token

# Feelings about the question (not symptoms: つらい, 痛い, だるい stay topic words).
FEELINGS = frozenset({"心配", "不安", "気掛かり", "気", "怖い", "恐い", "困る", "悩む", "大丈夫"})
# Asking, wanting to know, politeness.
REQUESTS = frozenset({
    "教える", "知る", "分かる", "聞く", "尋ねる", "伺う", "存ずる", "下さる", "頂く", "願う",
    "欲しい", "本当", "具体", "詳しい", "質問",
})
# Question words MeCab reads as nouns (何, 事, 方... are already stop nouns of the analyzer),
# and the nouns of hearsay and blame that frame a question (〜するそうです, 〜のせいでしょうか).
QUESTION_WORDS = frozenset({"何時", "何時頃", "何処", "何方", "そう", "所為"})
# Who is asking: 「うちの父が」「妻が」 say whose question it is, not what it is about.
ASKERS = frozenset({
    "内", "父", "母", "妻", "夫", "主人", "家内", "息子", "娘", "両親", "祖父", "祖母", "親父", "お袋",
})

# Discourse markers MeCab reads as nouns: ちなみに (因み), そもそも (抑), 実は (実).
DISCOURSE = frozenset({"因み", "抑", "実"})

FRAMING_WORDS: frozenset[str] = FEELINGS | REQUESTS | QUESTION_WORDS | ASKERS | DISCOURSE

# Words that name the KIND of answer asked for, not its topic: 「AとBの違いは」「方法は」
# 「どうやって決まるの」「時期は」. Unlike the framing words above they stay terms (an answer
# may well say 違いは, 方法として), weighed settings.frame_word_weight in a query.
ANSWER_FRAMES = frozenset({
    "違い", "違う", "方法", "仕方", "特徴", "仕組み", "理由", "意味", "種類", "場合", "関係", "内容",
    "時期", "期間", "頻度", "間隔", "目安", "程度", "タイミング", "対処", "対処法", "注意点", "工夫",
    "こつ", "ポイント", "決まる",
})

# 「何日」「何年おき」「何回」: the counter after a question word asks for a number (the
# question's type: how long, how often), it is not what the question is about; 日 or 年
# would weigh like a topic word the answer must contain.
QUESTION_NUMBER = frozenset({"何", "幾"})
COUNTERS = frozenset({
    "日", "年", "歳", "才", "回", "度", "時間", "分", "秒", "週", "週間", "月", "箇月", "ヶ月", "か月",
    "人", "本", "錠", "種類", "番", "割", "円", "キロ", "時", "日間", "年間", "カ月",
})

# Only whole words are framing: 内 as the suffix of 体内 or 院内 is part of a compound.
_WORD_KINDS = frozenset({NOUN, PROPER, ADVERBIAL, VERB})
_NOUNISH = frozenset({NOUN, PROPER, SUFFIX, PREFIX, SYNONYM, ASCII})


# 「手術のあと」 is the guideline's 「手術後」: after a noun and の, 後 becomes the noun's
# suffix (the compound 手術後, with 手術 as its part); a 後 with no noun before it
# (そのあと) only orders events and is no topic.
_AFTER = "後"


def join_after(tokens: list[Token]) -> list[Token]:
    """Rewrite 「N の 後」 as 「N後」 and drop a free-standing 後 (see _AFTER)."""
    if not any(t.form == _AFTER and t.kind == ADVERBIAL for t in tokens):
        return tokens
    out: list[Token] = []
    for tok in tokens:
        if tok.form == _AFTER and tok.kind == ADVERBIAL:
            if len(out) >= 2 and out[-1].surface == "の" and out[-2].kind in _NOUNISH:
                out.pop()
                out.append(tok._replace(kind=SUFFIX))
            else:
                out.append(tok._replace(kind=OTHER))
            continue
        out.append(tok)
    return out


_FORM = operator.attrgetter("form")
_KIND = operator.attrgetter("kind")


# What each rule of drop_framing reads of one token, as bits (`_token_flags`): a change on
# its own (後 as an adverb, a framing word as a word), a prefix, an empty-noun suffix, a
# question word (何, 幾), a counter, a noun-like token.
_CHANGE, _PREFIX_BIT, _STOP_SUFFIX, _QUESTION, _COUNTER, _NOUN_LIKE = 1, 2, 4, 8, 16, 32
_FLAGS: dict[Token, int] = {}  # per distinct token: a page's words repeat (Zipf)
_FLAGS_MAX = 200_000


def _token_flags(tok: Token) -> int:
    form, kind = tok.form, tok.kind
    flags = ((_CHANGE if (form == _AFTER and kind == ADVERBIAL) or (kind in _WORD_KINDS and form in FRAMING_WORDS)
              else 0)
             | (_PREFIX_BIT if kind == PREFIX else 0)
             | (_STOP_SUFFIX if kind == SUFFIX and form in STOP_NOUNS else 0)
             | (_QUESTION if form in QUESTION_NUMBER else 0)
             | (_COUNTER if form in COUNTERS and kind in (NOUN, SUFFIX) else 0)
             | (_NOUN_LIKE if kind in _NOUNISH else 0))
    if len(_FLAGS) >= _FLAGS_MAX:
        _FLAGS.clear()
    _FLAGS[tok] = flags
    return flags


def _changes(tokens: list[Token], words: frozenset[str]) -> bool:
    """Whether drop_framing changes anything in `tokens`: each of its rules checked on the
    tokens as they are (a first change always happens on them). With the standard words,
    from each token's flags (made once per distinct token), so that the lines of a page
    (most hold none of it) cost little; tests/test_query_framing.py pins it to
    `_changes_plain`, which other word lists use."""
    if words is not FRAMING_WORDS:
        return _changes_plain(tokens, words)
    known = list(map(_FLAGS.get, tokens))
    flags: list[int] = ([_token_flags(t) if f is None else f for t, f in zip(tokens, known)] if None in known
                        else cast("list[int]", known))
    seen = functools.reduce(operator.or_, flags, 0)
    if seen & _CHANGE:
        return True
    n = len(flags)
    if seen & _PREFIX_BIT and any(f & _PREFIX_BIT and (i + 1 == n or not flags[i + 1] & _NOUN_LIKE)
                                  for i, f in enumerate(flags)):
        return True
    if seen & _STOP_SUFFIX and any(f & _STOP_SUFFIX and (i == 0 or not flags[i - 1] & _NOUN_LIKE)
                                   for i, f in enumerate(flags)):
        return True
    return bool(seen & _QUESTION and seen & _COUNTER
                and any(flags[i - 1] & _QUESTION and flags[i] & _COUNTER for i in range(1, n)))


def _changes_plain(tokens: list[Token], words: frozenset[str]) -> bool:
    """`_changes` rule by rule: set operations first, then every rule at every token."""
    found = set(map(_FORM, tokens))
    kinds = set(map(_KIND, tokens))
    stops = SUFFIX in kinds and not STOP_NOUNS.isdisjoint(found)
    if (PREFIX not in kinds and not stops and _AFTER not in found and words.isdisjoint(found)
            and QUESTION_NUMBER.isdisjoint(found)):
        return False
    n = len(tokens)
    for i, tok in enumerate(tokens):
        form, kind = tok.form, tok.kind
        if form == _AFTER and kind == ADVERBIAL:  # join_after
            return True
        if kind in _WORD_KINDS and form in words:
            return True
        if i and tokens[i - 1].form in QUESTION_NUMBER and form in COUNTERS and kind in (NOUN, SUFFIX):
            return True
        if kind == PREFIX and (i + 1 == n or tokens[i + 1].kind not in _NOUNISH):
            return True
        if kind == SUFFIX and form in STOP_NOUNS and (i == 0 or tokens[i - 1].kind not in _NOUNISH):
            return True
    return False


def drop_framing(tokens: Iterable[Token], words: frozenset[str] = FRAMING_WORDS) -> list[Token]:
    """The tokens with framing words turned into non-terms (kind OTHER), so they neither
    count as terms nor glue compounds. Two kinds of stray affix go too, since a lone affix
    would become a term of its own: a prefix left with no word after it (お of お願いします
    once 願い is gone), and an empty-noun suffix after a verb (方 of やり方, 飲み方).
    Tokens none of that applies to (most lines of a page) are returned as they are, the
    same list."""
    tokens = tokens if isinstance(tokens, list) else list(tokens)
    if not _changes(tokens, words):
        return tokens
    out = [
        tok._replace(kind=OTHER) if tok.kind in _WORD_KINDS and tok.form in words else tok
        for tok in join_after(list(tokens))
    ]
    for i in range(1, len(out)):
        if out[i - 1].form in QUESTION_NUMBER and out[i].form in COUNTERS and out[i].kind in (NOUN, SUFFIX):
            out[i] = out[i]._replace(kind=OTHER)
            if i + 1 < len(out) and out[i + 1].kind == SUFFIX:  # 何年おき: the おき goes with it
                out[i + 1] = out[i + 1]._replace(kind=OTHER)
    for i, tok in enumerate(out):
        if tok.kind == PREFIX and (i + 1 == len(out) or out[i + 1].kind not in _NOUNISH):
            out[i] = tok._replace(kind=OTHER)
        elif tok.kind == SUFFIX and tok.form in STOP_NOUNS and (i == 0 or out[i - 1].kind not in _NOUNISH):
            out[i] = tok._replace(kind=OTHER)
    return out
