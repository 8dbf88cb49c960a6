"""Scoring: per-answer metrics and the summary of a run.

Text normalisation (`normalize`), used by every string metric:
  1. Unicode NFKC (full-width ＥＧＦＲ -> EGFR, half-width ｶﾅ -> カナ, ① -> 1);
  2. lower case;
  3. keep only characters whose Unicode general category is a letter (L*) or a number
     (N*): Latin letters, digits, hiragana, katakana (with the prolonged sound mark ー),
     kanji and the iteration mark 々 are kept; spaces, punctuation (、。「」・-) and
     symbols (%, +, ~) are dropped.

Tokens (`tokens`), used by ROUGE-L and word precision/recall/F1: after NFKC and lower
case, a maximal run of Latin letters and ASCII digits is ONE token (egfr, 80mg, pd, l1);
every other kept character (kanji, hiragana, katakana, ー, 々, other scripts) is a token
of its own. So Japanese is scored on characters, not on analyzer (MeCab) words:
character scores need no dictionary and do not depend on how UniDic splits compounds.
"""
from __future__ import annotations

import re
import statistics
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence
from urllib.parse import urlsplit

import numpy as np

TOKENS_DESCRIPTION = (
    "Text is normalised with NFKC and lower-cased; only letters and digits (Unicode L*/N*) "
    "are kept. Tokens: a run of Latin letters/ASCII digits is one token; every other kept "
    "character (kanji, kana, ー, 々) is one token, i.e. Japanese is scored on characters, "
    "not MeCab words. ROUGE-L = LCS of token sequences (P = LCS/answer tokens, "
    "R = LCS/reference tokens, F1 harmonic mean); word P/R/F1 = multiset token overlap. "
    "Refused or failed answers count as empty answers (all zero)."
)

_LATIN_RUN = re.compile(r"[a-z0-9]+")


def _kept(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LN"


def normalize(text: str) -> str:
    """NFKC, lower case, letters and digits only (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text or "").lower()
    return "".join(ch for ch in text if _kept(ch))


def tokens(text: str) -> list[str]:
    """Latin/digit runs as words, every other letter as a character (see module docstring)."""
    text = unicodedata.normalize("NFKC", text or "").lower()
    out: list[str] = []
    i = 0
    while i < len(text):
        m = _LATIN_RUN.match(text, i)
        if m:
            out.append(m.group())
            i = m.end()
            continue
        if _kept(text[i]):
            out.append(text[i])
        i += 1
    return out


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (two-row dynamic programme)."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


@dataclass(frozen=True)
class PRF:
    precision: float
    recall: float
    f1: float


def _prf(overlap: int, n_candidate: int, n_reference: int) -> PRF:
    p = overlap / n_candidate if n_candidate else 0.0
    r = overlap / n_reference if n_reference else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return PRF(p, r, f)


def rouge_l(candidate: str, reference: str) -> PRF:
    """ROUGE-L on `tokens`: P = LCS/|candidate|, R = LCS/|reference|, F1 (beta = 1)."""
    c, r = tokens(candidate), tokens(reference)
    return _prf(lcs_length(c, r), len(c), len(r))


def token_prf(candidate: str, reference: str) -> PRF:
    """Word precision/recall/F1 on `tokens`, as multisets (SQuAD-style overlap)."""
    c, r = tokens(candidate), tokens(reference)
    overlap = sum((Counter(c) & Counter(r)).values())
    return _prf(overlap, len(c), len(r))


def contains_any(text: str, needles: Iterable[str]) -> bool:
    """True when a normalised needle occurs in the normalised text (empty needles ignored)."""
    hay = normalize(text)
    return any(n and n in hay for n in (normalize(x) for x in needles))


def same_page(candidate_url: str | None, gold_url: str | None) -> bool:
    """Whether a retrieved URL is the gold page.

    Fragments and query strings are ignored. A gold URL without a scheme is a path
    relative to the site root and matches any host serving that path (the dev benchmark
    serves its site on a random port).
    """
    if not candidate_url or not gold_url:
        return False
    c = urlsplit(candidate_url.strip())
    g = urlsplit(gold_url.strip())
    if g.scheme:
        return (c.scheme, c.netloc.lower(), c.path) == (g.scheme, g.netloc.lower(), g.path)
    return c.path == "/" + g.path.lstrip("/")


def verbatim_lines(answer: str, stored_lines: Iterable[str]) -> bool:
    """True when every non-empty answer line equals a stored line, whitespace aside."""
    pool = {_squash(s) for s in stored_lines}
    lines = [_squash(line) for line in (answer or "").splitlines()]
    lines = [line for line in lines if line]
    return bool(lines) and all(line in pool for line in lines)


def _squash(text: str) -> str:
    return "".join(text.split())


def repeats_itself(text: str, min_chars: int = 6) -> bool:
    """True when a line or sentence of at least `min_chars` (whitespace aside) occurs twice:
    the mark of a degenerate generation, checked here apart from the chatbot's own checks."""
    units = [_squash(u) for u in re.split(r"(?<=[。！？!?])|\n", text or "")]
    units = [u for u in units if len(u) >= min_chars]
    return len(units) != len(set(units))


# --- summary ---------------------------------------------------------------

def mean(values: Iterable[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def median(values: Iterable[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return statistics.median(vals) if vals else None


def percentile(values: Iterable[float | None], q: float) -> float | None:
    """Nearest-rank-free linear percentile (numpy's default), q in [0, 100]."""
    vals = [float(v) for v in values if v is not None]
    return float(np.percentile(vals, q)) if vals else None


# Per-question metric columns of the results workbook, and how each summary metric
# aggregates them: (summary name, column, statistic, subset, description).
# subset: "in_scope" | "out_of_scope" | "governed" (answered) | "all" | "reference"
# (in-scope with a reference answer) | "gold" (in-scope with gold answers) |
# "gold_url" (in-scope with a gold URL).
SUMMARY_METRICS: list[tuple[str, str, str, str, str]] = [
    ("refusal_rate_out_of_scope", "refused", "mean", "out_of_scope", "out-of-scope questions refused (not_governed)"),
    ("no_candidate_out_of_scope", "no_candidate", "mean", "out_of_scope", "out-of-scope questions left with no candidate page"),
    ("coverage_in_scope", "governed", "mean", "in_scope", "in-scope questions answered (governed)"),
    ("right_page_first", "page_first", "mean", "gold_url", "in-scope: the gold page is the top candidate"),
    ("routing_accuracy", "routed_right", "mean", "gold_url", "in-scope: the gold page belongs to the guideline the question was routed to"),
    ("answer_in_reference", "answer_in_reference", "mean", "gold", "in-scope: a gold answer string is inside the retrieval reference"),
    ("gold_in_answer", "gold_hit", "mean", "gold", "in-scope: a gold answer string is inside the shown answer (refusal = miss)"),
    ("verbatim_rate", "verbatim", "mean", "governed", "answered: every answer line is a stored line of a cited page"),
    ("answer_chars_mean", "answer_chars", "mean", "governed", "answered: answer length in characters, mean"),
    ("answer_chars_median", "answer_chars", "median", "governed", "answered: answer length in characters, median"),
    ("rouge_l_precision", "rouge_l_p", "mean", "reference", "ROUGE-L precision against the reference answer"),
    ("rouge_l_recall", "rouge_l_r", "mean", "reference", "ROUGE-L recall against the reference answer"),
    ("rouge_l_f1", "rouge_l_f1", "mean", "reference", "ROUGE-L F1 against the reference answer"),
    ("word_precision", "token_p", "mean", "reference", "word (token) precision against the reference answer"),
    ("word_recall", "token_r", "mean", "reference", "word (token) recall against the reference answer"),
    ("word_f1", "token_f1", "mean", "reference", "word (token) F1 against the reference answer"),
    ("summary_repeat_rate", "summary_repeats", "mean", "all",
     "generate: shown summaries with a line or sentence said twice (should be 0)"),
    ("model_fallback_rate", "model_fell_back", "mean", "all",
     "model modes: questions whose model answer could not be used (extract or the refusal shown instead)"),
    ("model_decline_rate", "model_declined", "mean", "all",
     "model modes: questions the answer model declined (the refusal shown)"),
    ("latency_mean_ms", "latency_ms", "mean", "all", "latency per question, mean (ms)"),
    ("latency_p50_ms", "latency_ms", "median", "all", "latency per question, median (ms)"),
    ("latency_p95_ms", "latency_ms", "p95", "all", "latency per question, 95th percentile (ms)"),
    ("error_rate", "failed", "mean", "all", "questions that failed with an error"),
]


def in_subset(row: dict, subset: str) -> bool:
    """Whether a results row counts towards a summary metric of the given subset."""
    kind = row.get("kind")
    if subset == "all":
        return True
    if subset == "governed":
        return bool(row.get("governed"))
    if subset == "out_of_scope":
        return kind == "out_of_scope"
    if kind != "in_scope":
        return False
    if subset == "in_scope":
        return True
    if subset == "reference":
        return bool(row.get("reference_answer"))
    if subset == "gold":
        return bool(row.get("gold_answers"))
    if subset == "gold_url":
        return bool(row.get("gold_url"))
    raise ValueError(f"unknown subset {subset!r}")


def aggregate(values: Sequence[float | None], stat: str) -> float | None:
    if stat == "mean":
        return mean(values)
    if stat == "median":
        return median(values)
    if stat == "p95":
        return percentile(values, 95)
    raise ValueError(f"unknown statistic {stat!r}")


def summarize(rows: Sequence[dict]) -> dict[str, dict]:
    """Summary metrics over results rows: name -> {value, n, description}."""
    out: dict[str, dict] = {}
    for name, column, stat, subset, desc in SUMMARY_METRICS:
        vals = [_num(r.get(column)) for r in rows if in_subset(r, subset)]
        vals = [v for v in vals if v is not None]
        out[name] = {"value": aggregate(vals, stat), "n": len(vals), "description": desc}
    return out


def _num(value: object) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
