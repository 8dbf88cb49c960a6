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

# The features of the shipped models, per guideline form. Q&A form: the 17 candidates
# frozen before the first look at the demo sites, less those whose removal did not lower
# leave-one-site-out gold or refusal over the four Q&A sites (backward elimination:
# unknown_disease, title_coverage, margin, unknown_when, odds_missing; the ablation table).
# Article form (JSQuAD alone, no site to leave out): the same, with margin and title_coverage,
# which raise gold in a 5-fold cross-validation over held-out articles (0.939 -> 0.947).
QA_FEATURES: tuple[str, ...] = (
    "score", "page_coverage", "line_coverage", "known_mass", "expansion_mass", "unknown_specific",
    "unknown_common", "unknown_partial", "asks_figure", "figure_missing", "asks_recommendation", "terms",
)
ARTICLE_FEATURES: tuple[str, ...] = (*QA_FEATURES, "margin", "title_coverage")
FEATURES_OF = {QA: QA_FEATURES, ARTICLE: ARTICLE_FEATURES}
# The candidates frozen before the first look (the ablation starts from them).
CANDIDATES: tuple[str, ...] = (
    "score", "margin", "page_coverage", "line_coverage", "title_coverage", "known_mass", "expansion_mass",
    "unknown_specific", "unknown_common", "unknown_partial", "unknown_when", "unknown_disease",
    "asks_figure", "figure_missing", "odds_missing", "asks_recommendation", "terms",
)
# The target out-of-scope refusal the shipped operating points are chosen for.
TARGET_REFUSAL = 0.95
C = 0.3  # the logistic regression's regularisation (scikit-learn's C)


def _by_form(records: Mapping[str, Sequence[dict]]) -> dict[str, dict[str, list[dict]]]:
    out: dict[str, dict[str, list[dict]]] = {}
    for site, rs in records.items():
        if rs:
            out.setdefault(rs[0]["form"], {})[site] = list(rs)
    return out


def fit_shipped(records: Mapping[str, Sequence[dict]], target: float = TARGET_REFUSAL) -> ShippedModels:
    """The model of each form, fitted on every site of that form, cut for `target`."""
    forms = {}
    for form, sites in _by_form(records).items():
        train = [r for rs in sites.values() for r in rs]
        model = T.fit(train, FEATURES_OF[form], C=C)
        cut = T.choose_point(model, train, target, T.POOLED)
        forms[form] = model.with_operating_point(cut, target, trained_on=sorted(sites),
                                                 questions=len(train), C=C, rule=T.POOLED)
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
    meta: dict[str, Any] = {"target_refusal": TARGET_REFUSAL, "C": C,
                            "loso": {}, "shipped": {}, "legacy": {}}
    for form, sites_of in _by_form(records).items():
        out.append(f"== guideline form: {form} ({', '.join(sites_of)})")
        model = shipped.forms[form]
        legacy = {s: T.score(rs, T.legacy(rs)) for s, rs in sites_of.items()}
        out.append(table(sites_of, legacy, "old decision (threshold 0.2 / 0.16 Q&A, min_line_coverage 0.5, "
                                           "asked figure)"))
        if len(sites_of) > 1:
            res = T.loso(sites_of, FEATURES_OF[form], TARGET_REFUSAL, C=C)
            out.append(table(sites_of, {s: r["realised"] for s, r in res.items()},
                             f"leave-one-site-out, realised (trained and cut without the site; target "
                             f"{TARGET_REFUSAL})"))
            out.append("  cuts: " + ", ".join(f"{s} {r['cut']:.3f}" for s, r in res.items()))
            out.append(table(sites_of, {s: r["oracle"] for s, r in res.items()},
                             "leave-one-site-out, oracle (the same models, cut to reach the target on the site)"))
            meta["loso"][form] = {s: {k: v.to_json() for k, v in r["realised"].items()} for s, r in res.items()}
        in_sample = {s: T.score(rs, T.decide(model, rs)) for s, rs in sites_of.items()}
        out.append(table(sites_of, in_sample, f"shipped model (fitted on every {form} site, cut "
                                              f"{model.operating_point:.3f})"))
        meta["shipped"][form] = {s: {k: v.to_json() for k, v in sc.items()} for s, sc in in_sample.items()}
        meta["legacy"][form] = {s: {k: v.to_json() for k, v in sc.items()} for s, sc in legacy.items()}
        if with_ablation and len(sites_of) > 2:
            out.append("ablation, leave-one-site-out (mean held-out gold, mean held-out lay gold, lowest category "
                       "refused):")
            rows = ablation(sites_of, FEATURES_OF[form], TARGET_REFUSAL)
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


__all__ = ["run", "fit_shipped", "FEATURES_OF", "TARGET_REFUSAL", "FORMS"]
