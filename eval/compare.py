"""Compare two results workbooks: paired bootstrap 95% intervals of metric differences.

Questions are paired by id (only ids present in both workbooks count). Each bootstrap
resample draws question ids with replacement; every summary metric (metrics.SUMMARY_METRICS)
is recomputed on A and on B over the same drawn questions, and the difference A - B is
recorded. The interval is the 2.5th and 97.5th percentile of those differences
(percentile bootstrap, fixed seed, so the same workbooks always give the same table).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from guiderag.errors import WorkbookError

from . import metrics
from .workbook import read_results

BATCH = 250  # bootstrap resamples drawn at a time
# The paired bootstrap of `guiderag eval --compare`: resamples and the seed that makes a
# comparison reproducible. Constants, not settings: 2000 resamples give the 95% interval's
# ends to about 0.002 on our sets; a method parameter, not a deployment's.
RESAMPLES = 2000
SEED = 20261129


@dataclass
class Difference:
    metric: str
    a: float | None
    b: float | None
    diff: float | None
    low: float | None
    high: float | None
    n: int  # paired questions that count for this metric (in A or B)

    def to_json(self) -> dict[str, Any]:
        return {k: (None if v is None else (round(v, 6) if isinstance(v, float) else v))
                for k, v in self.__dict__.items()}


@dataclass
class Comparison:
    a_path: Path
    b_path: Path
    paired: int
    only_a: int
    only_b: int
    resamples: int
    seed: int
    differences: list[Difference]

    def to_json(self) -> dict[str, Any]:
        return {
            "a": str(self.a_path), "b": str(self.b_path), "paired": self.paired,
            "only_in_a": self.only_a, "only_in_b": self.only_b,
            "resamples": self.resamples, "seed": self.seed, "confidence": 0.95,
            "metrics": [d.to_json() for d in self.differences],
        }

    def table(self) -> str:
        lines = [
            f"A = {self.a_path}", f"B = {self.b_path}",
            f"{self.paired} questions paired by id"
            + (f" ({self.only_a} only in A, {self.only_b} only in B: left out)" if self.only_a or self.only_b else "")
            + f"; paired bootstrap, {self.resamples} resamples, seed {self.seed}",
            "",
            f"{'metric':<28}{'A':>11}{'B':>11}{'A-B':>11}  {'95% interval':<26}{'n':>6}",
        ]
        for d in self.differences:
            interval = "" if d.low is None else f"[{d.low:+.4f}, {d.high:+.4f}]"
            mark = " *" if d.low is not None and d.high is not None and (d.low > 0 or d.high < 0) else ""
            lines.append(f"{d.metric:<28}{_f(d.a):>11}{_f(d.b):>11}{_f(d.diff, True):>11}  {interval + mark:<26}{d.n:>6}")
        lines.append("")
        lines.append("* the interval excludes 0")
        return "\n".join(lines)


def _f(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v:+.4f}" if signed else f"{v:.4f}"


def _matrix(rows_a: Sequence[dict], rows_b: Sequence[dict], column: str, subset: str) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the metric value, NaN where the question does not count for the metric."""
    def col(rows: Sequence[dict]) -> np.ndarray:
        out = np.full(len(rows), np.nan)
        for i, r in enumerate(rows):
            if metrics.in_subset(r, subset):
                v = metrics._num(r.get(column))
                if v is not None:
                    out[i] = v
        return out
    return col(rows_a), col(rows_b)


def _stat(values: np.ndarray, stat: str) -> np.ndarray:
    """The statistic along axis 1, ignoring NaN (NaN where a resample has no value)."""
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            if stat == "mean":
                return np.nanmean(values, axis=-1)
            if stat == "median":
                return np.nanmedian(values, axis=-1)
            if stat == "p95":
                return np.nanpercentile(values, 95, axis=-1)
    raise ValueError(f"unknown statistic {stat!r}")


def paired_bootstrap(
    a: np.ndarray, b: np.ndarray, stat: str, resamples: int, rng: np.random.Generator
) -> tuple[float | None, float | None, float | None]:
    """(observed A - B, 2.5th percentile, 97.5th percentile) of the resampled differences."""
    n = len(a)
    if n == 0:
        return None, None, None
    observed = float(_stat(a[None, :], stat)[0] - _stat(b[None, :], stat)[0])
    chunks = []
    for start in range(0, resamples, BATCH):  # batches keep memory small for big sets
        idx = rng.integers(0, n, size=(min(BATCH, resamples - start), n))
        chunks.append(_stat(a[idx], stat) - _stat(b[idx], stat))
    diffs = np.concatenate(chunks)
    diffs = diffs[~np.isnan(diffs)]
    if np.isnan(observed) or diffs.size == 0:
        return None, None, None
    low, high = np.percentile(diffs, [2.5, 97.5])
    return observed, float(low), float(high)


def compare_rows(
    rows_a: Sequence[dict], rows_b: Sequence[dict], *, resamples: int, seed: int
) -> tuple[list[Difference], int, int, int]:
    """Pair rows by id and bootstrap every summary metric. Returns (diffs, paired, only_a, only_b)."""
    by_a = {str(r["id"]): r for r in rows_a}
    by_b = {str(r["id"]): r for r in rows_b}
    ids = [i for i in by_a if i in by_b]
    if not ids:
        raise WorkbookError("the two results workbooks have no question id in common: nothing to compare")
    pa = [by_a[i] for i in ids]
    pb = [by_b[i] for i in ids]
    rng = np.random.default_rng(seed)
    out: list[Difference] = []
    for name, column, stat, subset, _ in metrics.SUMMARY_METRICS:
        a, b = _matrix(pa, pb, column, subset)
        keep = ~(np.isnan(a) & np.isnan(b))
        a, b = a[keep], b[keep]
        if a.size == 0:
            continue
        va = _stat(a[None, :], stat)[0]
        vb = _stat(b[None, :], stat)[0]
        diff, low, high = paired_bootstrap(a, b, stat, resamples, rng)
        out.append(Difference(name, None if np.isnan(va) else float(va), None if np.isnan(vb) else float(vb),
                              diff, low, high, int(a.size)))
    return out, len(ids), len(by_a) - len(ids), len(by_b) - len(ids)


def compare_workbooks(a_path: Path, b_path: Path, *, resamples: int = RESAMPLES, seed: int = SEED) -> Comparison:
    """Read two results workbooks and compare them (A - B)."""
    rows_a, _, _ = read_results(a_path)
    rows_b, _, _ = read_results(b_path)
    diffs, paired, only_a, only_b = compare_rows(rows_a, rows_b, resamples=resamples, seed=seed)
    return Comparison(Path(a_path), Path(b_path), paired, only_a, only_b, resamples, seed, diffs)
