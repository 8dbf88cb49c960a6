"""`guiderag devbench --suite coverage`: the coverage model trained and measured on transfer.

Every labelled site (eval.coverage_sites: JSQuAD, patient-gastric, the sample, our demo
sites) is served, scraped and indexed in the work folder, and each question measured once
(eval.coverage_data). Then, per guideline form (a Q&A guidebook, or articles:
retrieval.evidence.guideline_form):

- leave-one-site-out: the model fitted and its operating point chosen without a site,
  scored on it (realised), and how it ranks that site whatever its calibration (oracle:
  the cut that reaches the target there);
- the shipped model: fitted on every site of the form, its operating point chosen on them,
  scored on each (in sample);
- the ablation: leave-one-site-out again with each feature left out (and each candidate
  feature the model does not use added), the mean held-out gold shown and the lowest
  category refusal; a feature that helps only in sample has no place in the model;
- the old decision (threshold, min_line_coverage, asked figure) on the same records.

`--write-model PATH` writes the shipped models (data/coverage_model.json) with these
results in their `meta`. The article form has one labelled site (JSQuAD), so it has no
leave-one-site-out numbers, only in-sample ones.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from guiderag.chatbot.coverage_model import ARTICLE, FORMS, QA, ShippedModels, dump
from guiderag.settings import Settings

from . import coverage_data, coverage_sites
from . import coverage_train as T
from .coverage_sites import JSQUAD
from .jsquad import article_of

# The features of the shipped models, per guideline form. Q&A form: backward elimination
# over the four Q&A sites, leave-one-site-out (a feature goes when dropping it lowers neither
# the mean held-out gold, nor the mean held-out lay gold, nor the lowest held-out category
# refusal; the ablation table). Round 1 started it from the 17 candidates frozen before its
# first look at the demo sites (and dropped unknown_disease, title_coverage, margin,
# unknown_when, odds_missing); round 2 added its evidence: a disease or organ the guideline
# names only in passing (passing_named: 大腸 of 大腸がん検診 asked of the lung sample, 胃潰瘍
# of the gastric guidebook), a figure asked in a unit the best page gives none in
# (unit_missing: 何時間 where it says 数か月), unknown_when back (with those two, dropping it
# lowers held-out gold), and ran the elimination again with the operating point cut for
# TRAINING_TARGET: score, asks_figure, expansion_mass and terms went (page_coverage and
# line_coverage carry the passage's score; figure_missing the figure asked). Article form
# (JSQuAD alone, no site to leave out): round 1's with round 2's two, margin and
# title_coverage, judged by a 5-fold cross-validation over articles (the report prints it).
# Round 7 added permission_unknown (a question asking whether the patient may do something,
# about an activity or thing the guideline never names: 車の運転, コーヒー; chatbot.asked_about):
# with it and TRAINING_TARGET 0.98 the held-out ranking improves (oracle gold gastric 0.815
# -> 0.823, colorectal 0.864 -> 0.871) and every held-out category refusal stays >= 0.938.
QA_FEATURES: tuple[str, ...] = (
    "page_coverage", "line_coverage", "known_mass", "unknown_specific", "unknown_common", "unknown_partial",
    "figure_missing", "asks_recommendation", "passing_named", "unit_missing", "unknown_when", "permission_unknown",
)
ARTICLE_FEATURES: tuple[str, ...] = (
    "score", "page_coverage", "line_coverage", "known_mass", "expansion_mass", "unknown_specific",
    "unknown_common", "unknown_partial", "asks_figure", "figure_missing", "asks_recommendation", "terms",
    "passing_named", "unit_missing", "margin", "title_coverage",
)
FEATURES_OF = {QA: QA_FEATURES, ARTICLE: ARTICLE_FEATURES}
# The candidates the ablation starts from: round 1's 17, frozen before its first look at the
# demo sites, and round 2's (chatbot.coverage_features says what each measures).
CANDIDATES: tuple[str, ...] = (
    "score", "margin", "page_coverage", "line_coverage", "title_coverage", "known_mass", "expansion_mass",
    "unknown_specific", "unknown_common", "unknown_partial", "unknown_when", "unknown_disease",
    "asks_figure", "figure_missing", "odds_missing", "asks_recommendation", "terms",
    "passing_named", "unit_missing", "unknown_paraphrase", "permission_unknown",
)
# The out-of-scope refusal the product aims at on a guideline it never saw.
TARGET_REFUSAL = 0.95
# The refusal the operating point is cut for on the training sites, per form. A site's own
# out-of-scope questions are refused more often than a held-out site's at the same cut.
# Leave-one-site-out over the Q&A sites (these features): cut for 0.95 on the training
# sites, held-out gold 0.850 (mean) and the lowest held-out category refused 0.912 (the
# sample's 0.912); for 0.96, 0.848 and 0.933; for 0.97, 0.848 and 0.933 with the sample at
# 1.000; for 0.98, 0.818 and 0.938. So 0.97. Round 7 (with permission_unknown, which refuses
# the training sites' highest out-of-scope questions, 車の運転 and コーヒー, and so lowers the
# cut a target gives): for 0.97, held-out gold 0.886 (mean) but the lowest held-out category
# refusal 0.920 (gastric other_disease; the sample 0.941); for 0.975, 0.881 and 0.938 with the
# sample at 0.941; for 0.98, 0.881 and 0.938 with the sample at 0.971; for 0.985, 0.830. So
# 0.98 (the only target meeting every held-out refusal: a narrow choice, the cut moves in
# steps of one or two questions). JSQuAD (articles, in sample, no site to leave out) keeps 0.95.
TRAINING_TARGET = {QA: 0.98, ARTICLE: 0.95}
# The training refusal curve shipped in each model's meta (the prior of `calibrate`'s
# operating point, eval.calibrate): refused at each of these cuts.
CURVE_STEP = 0.005
C = 0.3  # the logistic regression's regularisation (scikit-learn's C)


def _by_form(records: Mapping[str, Sequence[dict]]) -> dict[str, dict[str, list[dict]]]:
    out: dict[str, dict[str, list[dict]]] = {}
    for site, rs in records.items():
        if rs:
            out.setdefault(rs[0]["form"], {})[site] = list(rs)
    return out


def training_target(form: str) -> float:
    return TRAINING_TARGET.get(form, TARGET_REFUSAL)


def refusal_curve(model: Any, records: Sequence[dict]) -> list[list[float]]:
    """[[cut, out-of-scope refused], ...] on `records` at every CURVE_STEP (each site weighing
    the same): what the training sites say about a cut, kept in the model file for calibrate."""
    by_site: dict[str, list[float]] = {}
    for r in records:
        if not r["in_scope"]:
            by_site.setdefault(r["site"], []).append(model.probability(r["features"]))
    steps = int(round(1.0 / CURVE_STEP))
    return [[round(k * CURVE_STEP, 4),
             round(sum(T.refusal_at(g, k * CURVE_STEP) for g in by_site.values()) / max(1, len(by_site)), 4)]
            for k in range(steps + 1)]


def fit_shipped(records: Mapping[str, Sequence[dict]], target: float | None = None) -> ShippedModels:
    """The model of each form, fitted on every site of that form, cut for `target` (default:
    the form's TRAINING_TARGET)."""
    forms = {}
    for form, sites in _by_form(records).items():
        train = [r for rs in sites.values() for r in rs]
        goal = training_target(form) if target is None else target
        model = T.fit(train, FEATURES_OF[form], C=C)
        cut = T.choose_point(model, train, goal, T.POOLED)
        forms[form] = model.with_operating_point(cut, goal, trained_on=sorted(sites),
                                                 questions=len(train), C=C, rule=T.POOLED,
                                                 training_refusal=refusal_curve(model, train))
    if QA not in forms and ARTICLE in forms:
        forms[QA] = forms[ARTICLE]
    return ShippedModels(forms)


def _line(name: str, scores: Mapping[str, T.Score]) -> str:
    cells = []
    for cat, s in scores.items():
        if s.in_scope:
            cells.append(f"{cat} {s.gold:.3f}/{s.answered:.3f}")
        elif s.in_scope is False:
            cells.append(f"{cat} {s.refused:.3f}")
    return f"  {name:10} " + "  ".join(cells)


def table(by_site: Mapping[str, Sequence[dict]], results: Mapping[str, Mapping[str, T.Score]], title: str) -> str:
    lines = [title, "  (in-scope categories: gold shown / answered; out-of-scope categories: refused)"]
    for site, scores in results.items():
        lines.append(_line(site, scores))
    return "\n".join(lines)


def ablation(sites: Mapping[str, Sequence[dict]], names: Sequence[str], target: float,
             held: Sequence[str] | None = None) -> list[tuple[str, float, float, float]]:
    """(variant, mean held-out gold, mean held-out lay gold, lowest held-out category
    refusal) for the model, each feature left out, and each unused candidate added."""
    def run(feats: Sequence[str]) -> tuple[float, float, float]:
        res = T.loso(sites, feats, target, C=C, held_out=held)
        golds, lays, worst = [], [], []
        for r in res.values():
            g, _, w = T.summary_line(r["realised"])
            golds.append(g)
            worst.append(w)
            if "lay" in r["realised"]:
                lays.append(r["realised"]["lay"].gold)
        return statistics.mean(golds), statistics.mean(lays) if lays else float("nan"), min(worst)
    out = [("model", *run(names))]
    for f in names:
        out.append((f"- {f}", *run([n for n in names if n != f])))
    for f in CANDIDATES:
        if f not in names:
            out.append((f"+ {f}", *run([*names, f])))
    return out


def run(settings: Settings, *, workdir: Path, sites: Sequence[str] | None = None, write_model: Path | None = None,
        with_ablation: bool = True, reuse: bool = False, log: Any = None) -> str:
    """Measure every site, fit, compare; the report as text (see the module docstring)."""
    log = log or (lambda msg: print(msg, file=sys.stderr))
    names = list(sites or coverage_sites.site_names())
    records: dict[str, list[dict]] = {}
    t0 = time.monotonic()
    for name in names:
        cached = workdir / f"{name}.jsonl"
        if reuse and cached.is_file():
            records[name] = [coverage_data.remeasure(r) for r in coverage_data.load(cached)]
            continue
        site = coverage_sites.prepare(name, workdir, settings)
        records[name] = coverage_data.collect(site, log=log)
        coverage_data.save(records[name], cached)
    log(f"devbench coverage: {sum(len(r) for r in records.values())} questions measured on {len(records)} sites "
        f"in {time.monotonic() - t0:.0f} s")
    out: list[str] = []
    shipped = fit_shipped(records)
    meta: dict[str, Any] = {"target_refusal": TARGET_REFUSAL, "training_target": TRAINING_TARGET, "C": C,
                            "loso": {}, "shipped": {}, "legacy": {}}
    for form, sites_of in _by_form(records).items():
        out.append(f"== guideline form: {form} ({', '.join(sites_of)})")
        model = shipped.forms[form]
        legacy = {s: T.score(rs, T.legacy(rs)) for s, rs in sites_of.items()}
        out.append(table(sites_of, legacy, "old decision (threshold 0.2 / 0.16 Q&A, min_line_coverage 0.5, "
                                           "asked figure)"))
        if len(sites_of) > 1:
            res = T.loso(sites_of, FEATURES_OF[form], training_target(form), C=C, oracle_target=TARGET_REFUSAL)
            out.append(table(sites_of, {s: r["realised"] for s, r in res.items()},
                             f"leave-one-site-out, realised (trained and cut without the site; cut for "
                             f"{training_target(form)} on the training sites)"))
            out.append("  cuts: " + ", ".join(f"{s} {r['cut']:.3f}" for s, r in res.items()))
            out.append(table(sites_of, {s: r["oracle"] for s, r in res.items()},
                             f"leave-one-site-out, oracle (the same models, cut to reach {TARGET_REFUSAL} on the site)"))
            meta["loso"][form] = {s: {k: v.to_json() for k, v in r["realised"].items()} for s, r in res.items()}
        if len(sites_of) == 1 and JSQUAD in sites_of:
            cv = T.grouped_cv(sites_of[JSQUAD], FEATURES_OF[form], training_target(form), lambda r: article_of(str(r["id"])),
                              C=C)
            out.append(table(sites_of, {JSQUAD: cv}, "5-fold cross-validation over articles (each fold fitted and "
                                                     "cut on the other four)"))
            meta.setdefault("cv", {})[form] = {k: v.to_json() for k, v in cv.items()}
        in_sample = {s: T.score(rs, T.decide(model, rs)) for s, rs in sites_of.items()}
        out.append(table(sites_of, in_sample, f"shipped model (fitted on every {form} site, cut "
                                              f"{model.operating_point:.3f})"))
        meta["shipped"][form] = {s: {k: v.to_json() for k, v in sc.items()} for s, sc in in_sample.items()}
        meta["legacy"][form] = {s: {k: v.to_json() for k, v in sc.items()} for s, sc in legacy.items()}
        if with_ablation and len(sites_of) > 2:
            out.append("ablation, leave-one-site-out (mean held-out gold, mean held-out lay gold, lowest category "
                       "refused):")
            rows = ablation(sites_of, FEATURES_OF[form], training_target(form))
            for variant, g, lay, w in rows:
                out.append(f"  {variant:28} {g:.3f}  {lay:.3f}  {w:.3f}")
            meta.setdefault("ablation", {})[form] = [list(r) for r in rows]
        out.append("")
    costs = sorted(r["measure_ms"] for rs in records.values() for r in rs)
    if costs:
        out.append(f"cost of measuring the features, per question: p50 {costs[len(costs) // 2]:.2f} ms, "
                   f"p95 {costs[int(len(costs) * 0.95)]:.2f} ms (incl. the line coverage's analysis of the reference)")
    if write_model is not None:
        dump(ShippedModels(shipped.forms, meta), write_model)
        out.append(f"wrote the shipped models to {write_model}")
    return "\n".join(out)


__all__ = ["run", "fit_shipped", "FEATURES_OF", "TARGET_REFUSAL", "TRAINING_TARGET", "FORMS"]
