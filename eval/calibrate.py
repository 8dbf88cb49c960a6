"""`guiderag calibrate`: a guideline's coverage decision fitted to the deployment's own questions.

The workbook is the one `eval` reads (columns `question`, `kind` = in_scope / out_of_scope;
optional `category`, `id`, `gold_answers`; other columns ignored). Every question is asked
of the guideline's retrieval, offline, and measured as an answer would be
(eval.coverage_data); then:

- the operating point is always refitted: the lowest P(governed) cut at which the set's
  out-of-scope questions are refused at `--target-refusal` (0.95), the set's refusal read
  with the shipped model's training sites as a prior worth PRIOR_OUT questions (the
  refusal curve in the model file's meta): (refused in the set + PRIOR_OUT x the training
  sites' refusal at the cut) / (the set's out-of-scope questions + PRIOR_OUT). A set of 35
  out-of-scope questions moves its refusal by 0.03 a question, so alone it would set the
  cut on one or two questions; a set of a few hundred decides by itself. A cut below the
  shipped one is then lowered only as far as it answers more of the set's in-scope
  questions right (a lower cut that answers none more only lets more out-of-scope
  questions through on the next set);
- the weights too, when the set is large enough (at least REFIT_IN in-scope and
  REFIT_OUT out-of-scope questions) AND refitting pays on it: a logistic regression on
  the set, pulled towards the shipped weights (an L2 penalty around them, not around 0),
  is scored by 5-fold cross-validation (each fold's questions decided by a model fitted on
  the other four, the cut chosen on those held-out decisions); it is kept only when, at
  the target refusal, it answers more in-scope questions right than the shipped weights
  do on the same set. Otherwise the shipped weights stay and only the cut moves;
- a set with fewer than MIN_PER_KIND questions of either kind is refused (exit 2),
  and nothing is stored.

The result is stored in the store (store.calibration, per guideline, with the corpus
version it was fitted on) and used from then on by `ask`, `eval`, `serve` and `chat`;
`--reset` deletes it. The curve (in-scope answered, and gold shown when the workbook gives
gold answers, and out-of-scope refused, per category when there is a category column, at
each operating point) is printed, and written with `--out CURVE.xlsx` beside a PNG plot
(CURVE.png, matplotlib, imported here only).
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from guiderag.chatbot.coverage_model import CoverageModel
from guiderag.errors import InputError

from . import coverage_train as T

# A set smaller than this on either side says too little to move the decision.
MIN_PER_KIND = 10
# Weights are refitted only from sets at least this large (and only when it pays, above).
REFIT_IN, REFIT_OUT = 50, 30
FOLDS = 5
# The penalty pulling refitted weights towards the shipped ones (scikit-learn's C
# convention: the same C the shipped model was fitted with).
REFIT_C = 0.3
CURVE_CUTS = tuple(round(0.05 * k, 2) for k in range(1, 20))
# The shipped model's training sites weigh as much as this many out-of-scope questions of
# the set when the operating point is refitted (see the module docstring).
PRIOR_OUT = 60
SHIPPED_WEIGHTS, REFITTED_WEIGHTS = "operating point", "weights and operating point"


@dataclass
class Fit:
    """What calibrate fitted: the model to store, how, and the curve it was chosen on."""

    model: CoverageModel
    refit: str  # SHIPPED_WEIGHTS or REFITTED_WEIGHTS
    why: str
    probabilities: list[float]  # per record, as the curve reads them (cross-validated when refitted)
    counts: dict[str, int] = field(default_factory=dict)


def check_set(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The set's counts; InputError for a set too small or one-sided to calibrate on."""
    n_in = sum(1 for r in records if r["in_scope"])
    n_out = len(records) - n_in
    if n_in < MIN_PER_KIND or n_out < MIN_PER_KIND:
        raise InputError(
            f"a calibration needs at least {MIN_PER_KIND} in-scope and {MIN_PER_KIND} out-of-scope questions; "
            f"this workbook has {n_in} in scope and {n_out} out of scope, so nothing was fitted or stored. "
            "Add labelled questions of the missing kind (the column kind: in_scope / out_of_scope)")
    return {"questions": len(records), "in_scope": n_in, "out_of_scope": n_out}


def _right(r: Mapping[str, Any], gold_set: bool) -> bool:
    return bool(r["in_scope"]) and T.success(r, gold_set)


def prior_refusal(model: CoverageModel) -> Callable[[float], float] | None:
    """The shipped model's training refusal at a cut (its meta's training_refusal curve,
    read as a step function), or None when the model file has no curve."""
    curve = model.meta.get("training_refusal")
    if not curve:
        return None
    points = sorted((float(c), float(r)) for c, r in curve)
    cuts = [c for c, _ in points]

    def at(cut: float) -> float:
        i = bisect.bisect_right(cuts, cut) - 1
        return points[max(0, i)][1]
    return at


def _at_target(records: Sequence[Mapping[str, Any]], probs: Sequence[float], target: float,
               gold_set: bool, prior: Callable[[float], float] | None = None,
               weight: float = PRIOR_OUT) -> tuple[float, int]:
    """(the cut reaching `target` refusal on the set, read with the prior when given (see the
    module docstring), in-scope questions answered right at it)."""
    oos = sorted(p for r, p in zip(records, probs) if not r["in_scope"])
    if prior is None or weight <= 0:
        cut = T._cut_for([oos], target)
    else:
        cut = 1.0
        grid = sorted({*oos, *(k / 1000.0 for k in range(1001))})
        for p in grid:
            c = min(1.0, p + T.CUT_MARGIN)
            refused = bisect.bisect_left(oos, c)
            if (refused + weight * prior(c)) / (len(oos) + weight) >= target - 1e-12:
                cut = c
                break
    return cut, sum(1 for r, p in zip(records, probs) if p >= cut and _right(r, gold_set))


def _no_further(cut: float, records: Sequence[Mapping[str, Any]], probs: Sequence[float], gold_set: bool,
                shipped_cut: float) -> float:
    """The cut moved from the shipped one towards `cut` only as far as it pays on the set:
    the shipped cut when no in-scope question the set answers right lies between the two,
    else the cut nearest the shipped one that answers the same ones right as `cut` does."""
    if shipped_cut <= cut:
        return cut
    right = sorted(p for r, p in zip(records, probs) if _right(r, gold_set) and p >= cut)
    # answered right at `cut`; a cut up to the lowest of their P answers every one of them
    return min(shipped_cut, right[0]) if right else shipped_cut


def refit_weights(records: Sequence[Mapping[str, Any]], base: CoverageModel, C: float = REFIT_C) -> CoverageModel:
    """A logistic regression on the set in the shipped model's standardised features, its
    weights pulled towards the shipped ones: minimises the set's (site-balanced) log loss
    + |w - w_shipped|^2 / (2 C n)."""
    import numpy as np
    from scipy.optimize import minimize

    train = T.trainable(records, "success")
    Z = np.asarray([[(float(r["features"].get(n, 0.0)) - m) / s for n, m, s in zip(base.features, base.mean, base.scale)]
                    for r in train])
    y = np.asarray([1.0 if r["in_scope"] else -1.0 for r in train])
    w = np.asarray(T.sample_weights(train))
    w = w / w.sum()
    w0 = np.asarray(base.coef + (base.intercept,))
    X = np.hstack([Z, np.ones((len(train), 1))])
    lam = 1.0 / (2.0 * C * len(train))
    mask = np.ones(len(w0))
    mask[-1] = 0.0  # the intercept is free

    def loss(beta: np.ndarray) -> tuple[float, np.ndarray]:
        margin = y * (X @ beta)
        value = float(np.sum(w * np.logaddexp(0.0, -margin))) + lam * float(np.sum(mask * (beta - w0) ** 2))
        grad = X.T @ (w * -y / (1.0 + np.exp(margin))) + 2.0 * lam * mask * (beta - w0)
        return value, grad

    beta = minimize(loss, w0, jac=True, method="L-BFGS-B").x
    return CoverageModel(base.features, base.mean, base.scale, tuple(float(b) for b in beta[:-1]), float(beta[-1]),
                         base.operating_point, base.target_refusal, dict(base.meta))


def _folds(records: Sequence[Mapping[str, Any]]) -> list[int]:
    """A deterministic fold per record, in-scope and out-of-scope questions spread evenly."""
    out, seen = [], {True: 0, False: 0}
    for r in records:
        k = bool(r["in_scope"])
        out.append(seen[k] % FOLDS)
        seen[k] += 1
    return out


def fit(records: Sequence[Mapping[str, Any]], shipped: CoverageModel, target: float) -> Fit:
    """The calibration of one guideline from its labelled records (see the module docstring)."""
    if not 0.5 <= target < 1.0:
        raise InputError(f"--target-refusal must be at least 0.5 and below 1, not {target}")
    counts = check_set(records)
    gold_set = T._has_gold(records)
    probs = [shipped.probability(r["features"]) for r in records]
    prior = prior_refusal(shipped)
    cut, right = _at_target(records, probs, target, gold_set, prior)
    cut = _no_further(cut, records, probs, gold_set, shipped.operating_point)
    result = Fit(shipped.with_operating_point(cut, target), SHIPPED_WEIGHTS,
                 f"the set ({counts['in_scope']} in scope, {counts['out_of_scope']} out of scope) is below "
                 f"{REFIT_IN} / {REFIT_OUT}: only the operating point is refitted", probs, counts)
    if counts["in_scope"] < REFIT_IN or counts["out_of_scope"] < REFIT_OUT:
        return result
    folds = _folds(records)
    cv = [0.0] * len(records)
    for k in range(FOLDS):
        train = [r for r, f in zip(records, folds) if f != k]
        model = refit_weights(train, shipped)
        for i, (r, f) in enumerate(zip(records, folds)):
            if f == k:
                cv[i] = model.probability(r["features"])
    # both weights judged at the set's own cut (the prior curve is the shipped weights')
    cv_cut, cv_right = _at_target(records, cv, target, gold_set)
    _, right = _at_target(records, probs, target, gold_set)
    if cv_right <= right:
        result.why = (f"refitted weights answered {cv_right} in-scope questions right at the target in 5-fold "
                      f"cross-validation, the shipped weights {right}: the shipped weights are kept, "
                      "the operating point refitted")
        return result
    model = refit_weights(records, shipped)
    return Fit(model.with_operating_point(cv_cut, target), REFITTED_WEIGHTS,
               f"refitted weights answered {cv_right} in-scope questions right at the target in 5-fold "
               f"cross-validation, the shipped weights {right}: both refitted (the cut chosen on the "
               "cross-validated decisions)", cv, counts)


def curve(records: Sequence[Mapping[str, Any]], probs: Sequence[float], cuts: Sequence[float]) -> list[dict[str, Any]]:
    """At each cut: the shares per category ("in scope", "out of scope" and each category)."""
    out = []
    for cut in cuts:
        scores = T.score(records, [p >= cut for p in probs])
        out.append({"operating_point": cut, **{k: v.to_json() for k, v in scores.items()}})
    return out


def cuts_with(point: float) -> list[float]:
    return sorted({*CURVE_CUTS, point})


def text(curve_rows: Sequence[Mapping[str, Any]], point: float, gold_set: bool) -> str:
    """The curve as a table (in scope answered / gold shown; out-of-scope refused)."""
    if not curve_rows:
        return ""
    cats = [k for k in curve_rows[0] if k != "operating_point"]
    ins = [k for k in cats if curve_rows[0][k].get("in_scope", k == "in scope")]
    head = "  cut " + "".join(f"{c[:13]:>15}" for c in cats)
    lines = [head]
    for row in curve_rows:
        mark = "*" if row["operating_point"] == point else " "
        cells = []
        for c in cats:
            s = row[c]
            if c in ins:
                cells.append(f"{s['answered']:.3f}/{s['gold']:.3f}" if gold_set else f"{s['answered']:.3f}")
            else:
                cells.append(f"{s['refused']:.3f}")
        lines.append(f"{mark}{row['operating_point']:.3f} " + "".join(f"{c:>15}" for c in cells))
    lines.append("  in-scope columns: answered" + (" / gold shown" if gold_set else "") +
                 "; out-of-scope columns: refused; * the stored operating point")
    return "\n".join(lines)


def write_curve(path: Path, curve_rows: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any]],
                probs: Sequence[float], point: float, meta: Mapping[str, Any]) -> Path:
    """CURVE.xlsx (sheets curve, questions, about) and CURVE.png beside it; returns the PNG's path."""
    from openpyxl import Workbook

    from guiderag.files import save_workbook_atomic

    path = Path(path)
    if path.suffix.lower() != ".xlsx":
        raise InputError(f"--out must name an .xlsx file, not {path.name!r}")
    wb = Workbook()
    ws = wb.active
    ws.title = "curve"
    cats = [k for k in curve_rows[0] if k != "operating_point"] if curve_rows else []
    header = ["operating_point"]
    for c in cats:
        header += [f"{c} answered", f"{c} gold shown", f"{c} refused"]
    ws.append(header)
    for row in curve_rows:
        cells: list[Any] = [row["operating_point"]]
        for c in cats:
            cells += [row[c]["answered"], row[c]["gold"], row[c]["refused"]]
        ws.append(cells)
    qs = wb.create_sheet("questions")
    qs.append(["id", "question", "kind", "category", "coverage_probability", "answered_at_operating_point"])
    for r, p in zip(records, probs):
        qs.append([str(r["id"]), str(r["question"]), "in_scope" if r["in_scope"] else "out_of_scope",
                   str(r["category"]), round(p, 4), p >= point])
    about = wb.create_sheet("about")
    for k, v in meta.items():
        about.append([k, str(v)])
    save_workbook_atomic(wb, path)
    png = path.with_suffix(".png")
    plot(png, curve_rows, point, str(meta.get("guideline", "")))
    return png


def plot(png: Path, curve_rows: Sequence[Mapping[str, Any]], point: float, title: str) -> None:
    """The curve as a PNG: in-scope answered (and gold shown) and out-of-scope refused, per
    category, against the operating point; the stored one marked."""
    import matplotlib  # only `calibrate` draws: imported here, never at query time

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["operating_point"] for r in curve_rows]
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    cats = [k for k in curve_rows[0] if k != "operating_point"] if curve_rows else []
    for c in cats:
        s0 = curve_rows[0][c]
        key = "answered" if s0.get("in_scope") or c == "in scope" else "refused"
        width = 2.5 if c in ("in scope", "out of scope") else 1.0
        ax.plot(x, [r[c][key] for r in curve_rows], label=f"{c}: {key}", linewidth=width)
    ax.axvline(point, color="grey", linestyle="--", label=f"operating point {point:.3f}")
    ax.set_xlabel("operating point (refused below this P(governed))")
    ax.set_ylabel("share")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"coverage calibration {title}".strip())
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
