"""The coverage model: P(the guideline governs the question) from named features, as a dot product.

A logistic regression over standardised features (chatbot.coverage_features), stored as
plain JSON (data/coverage_model.json: the feature names, their mean and scale, the
coefficients, the intercept, the operating point and how it was chosen), reviewed like
code and read without scikit-learn: P = 1 / (1 + exp(-(b + sum_i w_i (x_i - m_i) / s_i))).
A question whose P is below the operating point is refused. No pickle is ever read.

`explain` turns the largest contributions into sentences an evaluator reads
(chatbot.coverage_reasons).
"""
from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from guiderag.errors import InputError
from guiderag.resources import data_path

MODEL_FILE = "coverage_model.json"
FORMAT = "guiderag-coverage/1"
# The forms of guideline a model is fitted for (retrieval.evidence.guideline_form): pages
# that each answer one question (a Q&A guidebook), or articles.
QA, ARTICLE = "qa", "article"
FORMS = (QA, ARTICLE)


@dataclass(frozen=True)
class CoverageModel:
    """A fitted coverage model and its operating point."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    operating_point: float  # refuse below this P(governed)
    target_refusal: float = 0.95  # the out-of-scope refusal the operating point was chosen for
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        n = len(self.features)
        if not (len(self.mean) == len(self.scale) == len(self.coef) == n) or n == 0:
            raise InputError(f"coverage model: {n} features but {len(self.mean)} means, {len(self.scale)} "
                             f"scales and {len(self.coef)} coefficients")
        if any(s <= 0 for s in self.scale) or not 0.0 <= self.operating_point <= 1.0:
            raise InputError("coverage model: every scale must be > 0 and the operating point in [0, 1]")

    def logit(self, values: Mapping[str, float]) -> float:
        return self.intercept + sum(w * (float(values.get(n, 0.0)) - m) / s
                                    for n, m, s, w in zip(self.features, self.mean, self.scale, self.coef))

    def probability(self, values: Mapping[str, float]) -> float:
        z = self.logit(values)
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    def governed(self, values: Mapping[str, float]) -> bool:
        return self.probability(values) >= self.operating_point

    def contributions(self, values: Mapping[str, float]) -> list[tuple[str, float]]:
        """Each feature's push on the logit (positive: towards answering), largest first."""
        parts = [(n, w * (float(values.get(n, 0.0)) - m) / s)
                 for n, m, s, w in zip(self.features, self.mean, self.scale, self.coef)]
        return sorted(parts, key=lambda nc: -abs(nc[1]))

    def with_operating_point(self, point: float, target: float, **meta: Any) -> "CoverageModel":
        return CoverageModel(self.features, self.mean, self.scale, self.coef, self.intercept, point, target,
                             {**self.meta, **meta})

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "features": list(self.features),
            # exact (a float's JSON text reads back as the same float): a rounded cut could
            # answer the out-of-scope question it was set just above
            "mean": list(self.mean),
            "scale": list(self.scale),
            "coef": list(self.coef),
            "intercept": self.intercept,
            "operating_point": self.operating_point,
            "target_refusal": self.target_refusal,
            "meta": self.meta,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "coverage model") -> "CoverageModel":
        if not isinstance(data, Mapping) or data.get("format", FORMAT) != FORMAT:
            found = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise InputError(f"{source} is not a {FORMAT} model (format {found!r})")
        try:
            return cls(tuple(str(x) for x in data["features"]), tuple(float(x) for x in data["mean"]),
                       tuple(float(x) for x in data["scale"]), tuple(float(x) for x in data["coef"]),
                       float(data["intercept"]), float(data["operating_point"]),
                       float(data.get("target_refusal", 0.95)), dict(data.get("meta") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{source} is malformed: {exc}") from exc


@dataclass(frozen=True)
class ShippedModels:
    """The model of each guideline form, as data/coverage_model.json holds them."""

    forms: dict[str, CoverageModel]
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def for_form(self, form: str) -> CoverageModel:
        return self.forms.get(form) or self.forms[QA]

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "forms": {f: {k: v for k, v in m.to_json().items() if k != "format"}
                                            for f, m in self.forms.items()}, "meta": self.meta}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str) -> "ShippedModels":
        if not isinstance(data, Mapping) or data.get("format") != FORMAT or not isinstance(data.get("forms"), Mapping):
            raise InputError(f"{source} is not a {FORMAT} model file (a format and a model per guideline form)")
        forms = {str(f): CoverageModel.from_json(m, f"{source} ({f})") for f, m in data["forms"].items()}
        if QA not in forms:
            raise InputError(f"{source} has no model for the {QA!r} form")
        return cls(forms, dict(data.get("meta") or {}))


_SHIPPED: ShippedModels | None = None
_LOCK = threading.Lock()


def shipped_path() -> Path:
    return data_path(MODEL_FILE)


def read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the coverage model {path}: {exc}") from exc


def load_file(path: Path) -> ShippedModels:
    return ShippedModels.from_json(read_json(path), str(path))


def shipped() -> ShippedModels:
    """The models shipped with guiderag (data/coverage_model.json), read once per process."""
    global _SHIPPED
    if _SHIPPED is None:
        with _LOCK:
            if _SHIPPED is None:
                _SHIPPED = load_file(shipped_path())
    return _SHIPPED


def dump(models: ShippedModels, path: Path) -> None:
    Path(path).write_text(json.dumps(models.to_json(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
