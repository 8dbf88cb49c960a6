"""Fitting the coverage model, choosing its operating point, and measuring it on transfer.

Records come from eval.coverage_data (one per labelled question, with its features and
whether its answer would show a gold string). The model is scikit-learn's logistic
regression on standardised features (fit time only; the query path reads the JSON,
chatbot.coverage_model), each site weighing the same and, within a site, in-scope and
out-of-scope questions half each, so that JSQuAD's 4,000 questions do not drown a
200-question guidebook.

The operating point is the lowest P(governed) cut at which the training questions'
out-of-scope refusal reaches the target: pooled over sites (each site weighing the same,
`POOLED`) or reached by every training site (`EACH`).

`loso` is leave-one-site-out: fitted (and cut) without a site, scored on it; `ablation`
repeats it with each feature left out. Scores per category: answered, gold shown
(answered and the answer shows a gold string; sites without gold strings count answered),
refused.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from guiderag.chatbot.coverage_model import CoverageModel

POOLED, EACH, MEDIAN = "pooled", "each", "median"
# How far above the last refused question's P the cut is set.
CUT_MARGIN = 1e-6
# L2 regularisation of the logistic regression (scikit-learn's C: smaller is stronger).
C_DEFAULT = 1.0
# Which answer a record's decision shows: the reference over the threshold, else the floor.
REFERENCE = "threshold"


def _has_gold(records: Sequence[Mapping[str, Any]]) -> bool:
    return any(r["in_scope"] and r[REFERENCE]["gold"] for r in records)


def success(r: Mapping[str, Any], gold_site: bool) -> bool:
    """An in-scope record's answer is right: it shows a gold string (or, on a site without
    gold strings, it is an answer)."""
    return bool(r[REFERENCE]["gold"]) if gold_site else bool(r[REFERENCE]["shown"])


def sample_weights(records: Sequence[Mapping[str, Any]]) -> list[float]:
    """Each site weighs 1; within it in-scope and out-of-scope questions 1/2 each."""
    counts: dict[tuple[str, bool], int] = {}
    for r in records:
        key = (r["site"], bool(r["in_scope"]))
        counts[key] = counts.get(key, 0) + 1
    sites = {s for s, _ in counts}
    out = []
    for r in records:
        key = (r["site"], bool(r["in_scope"]))
        halves = sum(1 for k in counts if k[0] == r["site"])
        out.append(1.0 / (len(sites) * halves * counts[key]))
    return out


def trainable(records: Sequence[Mapping[str, Any]], labels: str) -> list[Mapping[str, Any]]:
    """The records a fit learns from: every one (labels "scope"), or out-of-scope ones and
    the in-scope ones whose answer is right (labels "success": an in-scope question whose
    answer would miss anyway teaches nothing about when to answer)."""
    if labels == "scope":
        return list(records)
    gold = {s: _has_gold([r for r in records if r["site"] == s]) for s in {r["site"] for r in records}}
    return [r for r in records if not r["in_scope"] or success(r, gold[r["site"]])]


def fit(records: Sequence[Mapping[str, Any]], names: Sequence[str], *, C: float = C_DEFAULT,
        labels: str = "success", meta: Mapping[str, Any] | None = None) -> CoverageModel:
    """A logistic regression over `names` (operating point 0.5 until one is chosen)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    records = trainable(records, labels)

    X = np.asarray([[float(r["features"].get(n, 0.0)) for n in names] for r in records], dtype=float)
    y = np.asarray([1 if r["in_scope"] else 0 for r in records])
    w = np.asarray(sample_weights(records))
    w = w * len(records) / w.sum()
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[scale < 1e-9] = 1.0
    Z = (X - mean) / scale
    lr = LogisticRegression(C=C, max_iter=5000)
    lr.fit(Z, y, sample_weight=w)
    return CoverageModel(tuple(names), tuple(float(x) for x in mean), tuple(float(x) for x in scale),
                         tuple(float(x) for x in lr.coef_[0]), float(lr.intercept_[0]), 0.5, 0.95, dict(meta or {}))


def refusal_at(probs: Sequence[float], cut: float) -> float:
    return sum(p < cut for p in probs) / len(probs) if probs else 1.0


def choose_point(model: CoverageModel, records: Sequence[Mapping[str, Any]], target: float,
                 rule: str = POOLED) -> float:
    """The lowest cut at which out-of-scope refusal reaches `target` (see the module docstring)."""
    by_site: dict[str, list[float]] = {}
    for r in records:
        if not r["in_scope"]:
            by_site.setdefault(r["site"], []).append(model.probability(r["features"]))
    if not by_site:
        return model.operating_point
    if rule == EACH:
        return max(_cut_for([by_site[s]], target) for s in by_site)
    if rule == MEDIAN:
        import statistics
        return float(statistics.median(_cut_for([by_site[s]], target) for s in by_site))
    return _cut_for(list(by_site.values()), target)


def _cut_for(groups: Sequence[Sequence[float]], target: float) -> float:
    """The lowest cut whose refusal, averaged over the groups (each weighing the same),
    reaches target: just above the P of the out-of-scope questions let through."""
    candidates = sorted({p for g in groups for p in g})
    def refused(cut: float) -> float:
        return sum(refusal_at(g, cut) for g in groups) / len(groups)
    for k, p in enumerate(candidates):
        # just above p (by CUT_MARGIN, never past the next P): every question with P <= p is
        # refused, also when P is computed again with a different rounding
        nxt = candidates[k + 1] if k + 1 < len(candidates) else 1.0
        cut = min(p + CUT_MARGIN, (p + nxt) / 2.0) if nxt > p else math.nextafter(p, 1.0)
        if refused(cut) >= target - 1e-12:
            return cut
    return 1.0


@dataclass
class Score:
    n: int = 0
    in_scope: bool | None = None  # the category's kind (None: mixed)
    answered: float = 0.0
    gold: float = 0.0
    refused: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "in_scope": self.in_scope, "answered": round(self.answered, 4), "gold": round(self.gold, 4),
                "refused": round(self.refused, 4)}


def score(records: Sequence[Mapping[str, Any]], answered: Sequence[bool]) -> dict[str, Score]:
    """Per category, and "in scope" / "out of scope": the shares when `answered` is the decision."""
    gold_site = _has_gold(records)
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault(r["category"], []).append(i)
        groups.setdefault("in scope" if r["in_scope"] else "out of scope", []).append(i)
    out: dict[str, Score] = {}
    for name, idx in groups.items():
        kinds = {bool(records[i]["in_scope"]) for i in idx}
        s = Score(n=len(idx), in_scope=kinds.pop() if len(kinds) == 1 else None)
        s.answered = sum(answered[i] for i in idx) / len(idx)
        s.refused = 1.0 - s.answered
        s.gold = sum(answered[i] and records[i]["in_scope"] and success(records[i], gold_site) for i in idx) / len(idx)
        out[name] = s
    return out


def decide(model: CoverageModel, records: Sequence[Mapping[str, Any]], cut: float | None = None) -> list[bool]:
    cut = model.operating_point if cut is None else cut
    return [model.probability(r["features"]) >= cut for r in records]


def legacy(records: Sequence[Mapping[str, Any]]) -> list[bool]:
    return [bool(r["legacy_answered"]) for r in records]


def loso(by_site: Mapping[str, Sequence[Mapping[str, Any]]], names: Sequence[str], target: float, *,
         C: float = C_DEFAULT, rule: str = POOLED, labels: str = "success", train_sites: Iterable[str] | None = None,
         held_out: Iterable[str] | None = None, oracle_target: float | None = None) -> dict[str, dict[str, Any]]:
    """Leave-one-site-out: for each site, the model fitted and cut on the others, scored on it.
    Also the oracle view: on the held-out site, the cut that reaches `target` there (how well
    the model ranks a site it never saw, whatever its calibration)."""
    pool = list(train_sites) if train_sites is not None else list(by_site)
    out: dict[str, dict[str, Any]] = {}
    for held in (list(held_out) if held_out is not None else list(by_site)):
        train = [r for s in pool if s != held for r in by_site[s]]
        model = fit(train, names, C=C, labels=labels)
        cut = choose_point(model, train, target, rule)
        model = model.with_operating_point(cut, target)
        test = list(by_site[held])
        realised = score(test, decide(model, test))
        oracle_cut = choose_point(model, test, target if oracle_target is None else oracle_target, POOLED)
        oracle = score(test, decide(model, test, oracle_cut))
        out[held] = {"model": model, "cut": cut, "realised": realised, "oracle": oracle, "oracle_cut": oracle_cut}
    return out


def summary_line(scores: Mapping[str, Score]) -> tuple[float, float, float]:
    """(in-scope gold, out-of-scope refused, the lowest refused of the out-of-scope categories)."""
    ins = scores.get("in scope", Score())
    outs = scores.get("out of scope", Score())
    worst = min((s.refused for k, s in scores.items() if s.in_scope is False and k != "out of scope"),
                default=outs.refused)
    return ins.gold, outs.refused, worst


def grouped_cv(records: Sequence[Mapping[str, Any]], names: Sequence[str], target: float,
               group_of: Callable[[Mapping[str, Any]], str], *, folds: int = 5, C: float = C_DEFAULT,
               rule: str = POOLED) -> dict[str, Score]:
    """For a form with one labelled site (articles: JSQuAD alone): k-fold cross-validation
    over groups of questions (an article's questions stay together, in scope and held out
    alike); each fold decided by the model fitted and cut on the others, the folds' decisions
    scored together."""
    import hashlib

    def fold(r: Mapping[str, Any]) -> int:
        return int(hashlib.sha256(group_of(r).encode("utf-8")).hexdigest(), 16) % folds

    of = [fold(r) for r in records]
    answered = [False] * len(records)
    for k in range(folds):
        train = [r for r, f in zip(records, of) if f != k]
        model = fit(train, names, C=C)
        model = model.with_operating_point(choose_point(model, train, target, rule), target)
        for i, (r, f) in enumerate(zip(records, of)):
            if f == k:
                answered[i] = model.governed(r["features"])
    return score(records, answered)
