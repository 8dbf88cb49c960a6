"""Keywords of a question: one interface, two sources.

- offline (default): the question's nouns with the highest IDF in the indexed corpus;
- a language model: for the protocol pipeline its published prompt ("extract two keywords
  from the following text", in Japanese, `keyword_prompt`); for the default pipeline the
  terms a patient guideline would use for the question (`guide_terms_prompt`), which can
  bridge a patient's words and the guideline's. The chatbot calls the model and hands the
  reply to `parse_keywords(...)`; retrieval itself never calls a model.
"""
from __future__ import annotations

import re
from typing import Callable, Iterable, Sequence

from .analyzer import Term

# The protocol's instruction, kept as published in spirit: "extract N keywords from the
# following text". `{count}` is KEYWORD_COUNT.
KEYWORD_PROMPT = "次の文章からキーワードを{count}つ抽出してください。"
KEYWORD_FORMAT = "キーワードだけを読点（、）で区切って一行で答えてください。"
# Keywords the protocol asks for, and that offline keywords give: the published protocol's
# two. A constant, not a setting: the protocol pipeline is kept literal (never set, not by a test).
KEYWORD_COUNT = 2
# The default pipeline's request: at most this many guideline terms from a keywords model
# (they may only add evidence; never set, not by a test).
MODEL_TERMS = 5

# The default pipeline's request: the words a patient guideline would use for the question,
# not words copied from it (those the retrieval has already). The model's terms may only
# add evidence (retrieval.pipeline_ours: a passage keeps the better of its scores without
# and with them; terms the corpus never uses are left out).
GUIDE_TERMS_PROMPT = (
    "あなたは患者向けの診療ガイドラインの索引係です。次の質問に答えている箇所を"
    "ガイドラインの中で探すために、ガイドラインの本文が使う医学用語・正式な用語を{count}つまで挙げてください。"
    "質問の言葉の言い換え（例：抗がん剤→薬物療法、髪が抜ける→脱毛、胃を取る→胃切除）を優先してください。"
)


def guide_terms_prompt(question: str, count: int = 5) -> tuple[str, str]:
    """(system, user) messages asking a model for the guideline's words for `question`."""
    system = GUIDE_TERMS_PROMPT.format(count=count) + KEYWORD_FORMAT
    return system, question


_SPLIT = re.compile(r"[\n,，、;；/・]+|\s{1,}")
_ENUM = re.compile(r"^(?:\d+[.)．、:：]|[-*•●○◆■]|キーワード\d*[:：])\s*")
_QUOTES = "「」『』\"'“”‘’【】()（）[]"


def keyword_prompt(question: str, count: int = 2) -> tuple[str, str]:
    """(system, user) messages asking a model for `count` keywords of `question`."""
    system = KEYWORD_PROMPT.format(count=count) + KEYWORD_FORMAT
    return system, question


def parse_keywords(reply: str, count: int = 2) -> list[str]:
    """Keywords from a model's reply: one per line, or separated by 、 , / ・ or spaces;
    numbering, bullets, quotes and a leading "キーワード:" are removed; duplicates dropped.
    Returns at most `count` keywords (an empty list when nothing usable came back)."""
    out: list[str] = []
    for line in (reply or "").splitlines():
        line = _ENUM.sub("", line.strip())
        if "：" in line or ":" in line:
            line = re.split(r"[:：]", line, maxsplit=1)[1]
        for piece in _SPLIT.split(line):
            word = _ENUM.sub("", piece.strip()).strip(_QUOTES + "。．.　 ")
            if word and word not in out:
                out.append(word)
    return out[:count]


def highest_idf_nouns(
    terms: Iterable[Term], idf: Callable[[str], float], count: int = 2,
    known: Callable[[str], bool] | None = None,
) -> list[str]:
    """The surfaces of the `count` distinct nouns with the highest idf, skipping a noun
    already contained in a chosen one (胸腺腫 makes 腺腫 redundant). With `known`, nouns
    found in the corpus come first: a keyword the corpus never uses finds nothing."""
    seen: dict[str, tuple[bool, float, int, str]] = {}
    for order, term in enumerate(terms):
        if not term.is_noun or term.text in seen:
            continue
        is_known = known(term.text) if known is not None else True
        seen[term.text] = (is_known, idf(term.text), order, term.surface)
    ranked = sorted(seen.values(), key=lambda v: (not v[0], -v[1], -len(v[3]), v[2]))
    chosen: list[str] = []
    for _, _, _, surface in ranked:
        if any(surface in c or c in surface for c in chosen):
            continue
        chosen.append(surface)
        if len(chosen) >= count:
            break
    return chosen


def clean_keywords(keywords: Sequence[str] | None) -> list[str]:
    """Keywords as given, stripped, empties and duplicates dropped."""
    out: list[str] = []
    for k in keywords or ():
        k = (k or "").strip()
        if k and k not in out:
            out.append(k)
    return out
