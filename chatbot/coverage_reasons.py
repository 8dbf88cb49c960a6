"""Why the coverage model decided as it did, in sentences an evaluator reads.

The model's logit is a sum of one contribution per feature (chatbot.coverage_model); the
features that pushed most towards the decision taken become the reasons, each said with
the words behind it (the question word the guideline never uses, the page it read):
「質問の『白血病』はこのガイドラインに一度も出てこない」.
"""
from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

from .coverage_features import Measured
from .word_kinds import DISEASE, DRUG, word_kind

# At most this many reasons are given.
MAX_REASONS = 3
_FIGURE = {"when": "時期", "how long": "期間", "how often": "頻度", "how much": "費用や金額"}
_UNIT_ASKED = {"分": "何分", "時間": "何時間", "日": "何日", "週": "何週間", "月": "何か月", "年": "何年", "歳": "何歳",
               "回": "何回", "円": "何円"}


# At most this many words are quoted in one reason (then など).
MAX_QUOTED = 4


def quote(words: Sequence[str]) -> str:
    shown = _outer(words)
    more = "など" if len(shown) > MAX_QUOTED else ""
    return "、".join(f"『{w}』" for w in shown[:MAX_QUOTED]) + more


def _outer(words: Sequence[str]) -> list[str]:
    """The words, each once, without those inside another (白血 of 白血病: a part the analyzer also read)."""
    unique = list(dict.fromkeys(w for w in words if w))
    return [w for w in unique if not any(w != o and w in o for o in unique)]


def unknown_words(m: Measured) -> list[str]:
    """The question's words the guideline never uses (specific ones first), each once."""
    return _outer([*m.unknown_specific, *m.unknown_partial, *m.unknown_common])


def _pct(x: float) -> str:
    return f"{round(100 * max(0.0, min(1.0, x)))}%"


def _title(m: Measured) -> str:
    return f"『{m.top_title}』" if m.top_title else "最も近いページ"


def _unknown(words: Sequence[str], partial: bool) -> str:
    words = _outer(words)
    named = [w for w in words if word_kind(w) in (DISEASE, DRUG)]
    kind = "（病名）" if named and all(word_kind(w) == DISEASE for w in named) else "（薬の名前）" if named else ""
    tail = "という言い方はこのガイドラインにない" if partial and not named else "はこのガイドラインに一度も出てこない"
    return f"質問の{quote(words)}{kind if len(words) == 1 else ''}{tail}"


# feature -> (sentence when it argues for answering, sentence when it argues for refusing)
Say = Callable[[Measured], str | None]
_SAY: dict[str, tuple[Say, Say]] = {
    "score": (lambda m: f"質問の語の多くを、ガイドラインの同じ箇所が含む（{_title(m)}）",
              lambda m: "質問の語をまとめて含む箇所が、ガイドラインに見つからない"),
    "page_coverage": (lambda m: f"{_title(m)}が質問の語の{_pct(m.values['page_coverage'])}を含む",
                      lambda m: f"最も近いページ{_title(m)}にも、質問の語は{_pct(m.values['page_coverage'])}しか出てこない"),
    "line_coverage": (lambda m: f"ガイドラインの一つの行が質問の語の{_pct(m.values['line_coverage'])}を含む",
                      lambda m: f"質問の語を多く含む行がない（最も多い行でも{_pct(m.values['line_coverage'])}）"),
    "title_coverage": (lambda m: f"ページの題{_title(m)}が質問の語を含む", lambda m: None),
    "margin": (lambda m: f"{_title(m)}がほかのページより際立って質問に近い",
               lambda m: "質問に近いページが一つに絞れない"),
    "known_mass": (lambda m: "質問の語はほぼすべてガイドラインに出てくる",
                   lambda m: (f"質問の{quote(unknown_words(m))}はこのガイドラインに一度も出てこない"
                              f"（質問の重みの{_pct(1 - m.values['known_mass'])}）") if unknown_words(m) else
                   f"質問の語の{_pct(1 - m.values['known_mass'])}はこのガイドラインに出てこない"),
    "expansion_mass": (lambda m: "患者さんの言葉が、言い換え（患者さんの言葉の表・同義語）を通してガイドラインの語に結びついた",
                       lambda m: "ガイドラインの語とは、言い換えを通してしか結びつかない"),
    "unknown_specific": (lambda m: None, lambda m: _unknown(m.unknown_specific, False) if m.unknown_specific else None),
    "unknown_partial": (lambda m: None, lambda m: _unknown(m.unknown_partial, True) if m.unknown_partial else None),
    "unknown_disease": (lambda m: None, lambda m: _unknown(m.unknown_diseases, False) if m.unknown_diseases else None),
    "unknown_common": (lambda m: None,
                       lambda m: f"質問の{quote(m.unknown_common)}はこのガイドラインで使われない" if m.unknown_common else None),
    "figure_missing": (lambda m: None, lambda m: (f"質問は{'・'.join(_FIGURE[k] for k in m.figure_kinds)}を尋ねているが、"
                                                  f"{_title(m)}にはその数字がない") if m.figure_kinds else None),
    "asks_figure": (lambda m: None, lambda m: None),
    "passing_named": (lambda m: None, lambda m: (f"質問の{quote(m.passing_named)}は、このガイドラインではわずかな"
                                                 "ページで触れられるだけで、どのページの題にもない")
                      if m.passing_named else None),
    "unit_missing": (lambda m: None, lambda m: (f"質問は{'・'.join(f'「{_UNIT_ASKED.get(u, u)}」' for u in m.missing_units)}"
                                                f"を尋ねているが、{_title(m)}にその単位の数字がない")
                     if m.missing_units else None),
    "odds_missing": (lambda m: None, lambda m: f"質問は確率や割合を尋ねているが、{_title(m)}にはその数字がない"),
    "asks_recommendation": (lambda m: None, lambda m: "質問は特定の病院・医師・製品の推薦を求めている"),
    "permission_unknown": (lambda m: None, lambda m: (f"質問は{quote(m.permission_unknown)}について、してよいか・大丈夫かを"
                                                      f"尋ねているが、このガイドラインは{quote(m.permission_unknown)}に一度も触れていない")
                           if m.permission_unknown else None),
}


# A decision this close to the operating point (in logit) is near: its reasons also name the
# weakest evidence, the strongest push the other way (an answer given on thin evidence says why
# it nearly was refused).
NEAR_LOGIT = 1.0
NEAR_PREFIX = "最も弱い根拠: "


def near(probability: float, operating_point: float) -> bool:
    """P(governed) within NEAR_LOGIT of the operating point, in logit."""
    def logit(p: float) -> float:
        p = min(max(p, 1e-6), 1.0 - 1e-6)
        return math.log(p / (1.0 - p))
    return abs(logit(probability) - logit(operating_point)) <= NEAR_LOGIT


def _sentences(contributions: Sequence[tuple[str, float]], measured: Measured, governed: bool,
               limit: int) -> list[str]:
    out: list[str] = []
    for name, push in contributions:
        if len(out) >= limit:
            break
        if (push > 0) != governed or name not in _SAY or abs(push) < 1e-6:
            continue
        sentence = _SAY[name][0 if governed else 1](measured)
        if sentence and sentence not in out:
            out.append(sentence)
    return out


def explain(contributions: Sequence[tuple[str, float]], measured: Measured, governed: bool,
            close: bool = False) -> list[str]:
    """The sentences of the features that pushed most towards the decision (`governed`:
    answered), strongest first, at most MAX_REASONS. `close` (the decision is `near` its
    operating point), or no feature for the decision that can be said: the last of them is
    the weakest evidence, the feature that pushed most the other way, marked NEAR_PREFIX
    (a decision is never given without a reason an evaluator can read, when there is one)."""
    out = _sentences(contributions, measured, governed, MAX_REASONS)
    if not (close or not out):
        return out
    weakest = [w for w in _sentences(contributions, measured, not governed, 1) if w not in out]
    if weakest and len(out) >= MAX_REASONS:
        out = out[:MAX_REASONS - 1]
    return out + [NEAR_PREFIX + w for w in weakest]


def rule_reason(retrieval: Mapping[str, object]) -> str:
    """Why the rules before the coverage model (settings.coverage_decision = rules) refused."""
    if retrieval.get("asked_figure_missing"):
        return "質問が尋ねている数字（時期・期間・頻度・金額）が、ガイドラインの該当箇所にない"
    if "line_coverage" in retrieval:
        return "質問の語を十分に含む行が、ガイドラインにない"
    return "質問の語を十分に含む箇所が、ガイドラインにない（検索のしきい値に届かない）"


def known_features() -> Mapping[str, object]:
    """The features that have a sentence (tests check every model feature is explained or silent on purpose)."""
    return dict(_SAY)
