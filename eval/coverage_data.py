"""Per-question records for training and measuring the coverage decision (issue 20).

For every labelled question of a site (eval.coverage_sites) one record: the coverage
features (chatbot.coverage_features) measured on a retrieval with the reference floor
(every passage down to `floor`, so that questions below today's threshold are measured
too), and what the answer would be if the question were answered: whether the extract
answer shows a gold string, whether the right page ranks first. The decision then only
chooses which of those answers are shown, so any decision rule is scored exactly from
the records (eval.coverage_train), as the refusal curves of eval.patient are.

The features are measured on the retrieval the product answers from (the passages over
the threshold when there are any, else those over settings.retrieval.reference_floor), and so is
the answer (`threshold`); `floor` is the answer from every passage over `floor`, for
comparison.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import time
from pathlib import Path
from typing import Any, Iterable

from guiderag.settings import Settings

from guiderag.errors import InputError

from .coverage_sites import Labelled, Site
from .metrics import contains_any, same_page

# Passages down to this score form the reference the coverage model measures.
FLOOR = 0.01


def collect(site: Site, *, floor: float = FLOOR, log: Any = None) -> list[dict[str, Any]]:
    """One record per question of the site (see the module docstring)."""
    from guiderag import retrieval

    t0 = time.perf_counter()
    s = site.settings
    retriever = retrieval.load_retriever(s.retrieval, s.storage, progress=s.progress_reporter)
    records = collect_questions(retriever, site.questions, s, site.name, floor=floor)
    if log:
        log(f"coverage records: {site.name}: {len(records)} questions in {time.perf_counter() - t0:.1f} s")
    return records


def collect_questions(base: Any, questions: Iterable[Labelled], settings: Settings, site_name: str, *,
                      floor: float = FLOOR, progress: Any = None) -> list[dict[str, Any]]:
    """One record per labelled question against one guideline's retriever (`base`, the
    ours pipeline): its features, today's decision, and the answer it would get."""
    from guiderag.chatbot.answer_type import missing_figure
    from guiderag.chatbot.coverage import measure_inputs
    from guiderag.chatbot.extract import extract, line_coverage
    from guiderag.retrieval.evidence import guideline_form
    from guiderag.retrieval.pipeline_ours import OursRetriever

    if not isinstance(base, OursRetriever):
        raise InputError("the coverage decision needs the ours pipeline (GUIDERAG_PIPELINE=ours)")
    low = OursRetriever(dataclasses.replace(settings.retrieval, threshold=floor), base.pages, base.data, base.analyzer,
                        guideline=base.guideline)
    analyze = functools.lru_cache(maxsize=65536)(base.analyze)
    form = guideline_form(base)
    records: list[dict[str, Any]] = []
    for item in questions:
        q = item.question
        at_threshold = base.search(q.question, None)  # the reference the product answers from
        floor_result = low.search(q.question, None)
        started = time.perf_counter()
        inputs = measure_inputs(q.question, at_threshold, base, analyze)
        measured = inputs.measure()
        measure_ms = (time.perf_counter() - started) * 1000.0
        slots = base.query_slots(q.question, at_threshold.keywords)
        # today's decision, for checking the records against the devbench tables
        legacy = False
        if at_threshold.governed:
            cov = max(line_coverage(q.question, at_threshold.passages, analyze, slots=s) for s in slots) if slots else 1.0
            pages = {(p.page.url, p.page.version): p.page for p in at_threshold.passages}
            figure = settings.answer.require_asked_figure and missing_figure(
                q.question, [line for page in pages.values() for line in page.lines])
            legacy = cov >= settings.answer.min_line_coverage and not figure
        record: dict[str, Any] = {
            "site": site_name, "form": form, "id": q.id, "question": q.question, "in_scope": item.in_scope,
            "category": item.category, "features": measured.values, "measure_ms": round(measure_ms, 3),
            "words": words(measured),
            "legacy_answered": legacy,
            "inputs": _jsonable(dataclasses.asdict(inputs)),
        }
        for label, result in (("threshold", at_threshold), ("floor", floor_result)):
            slots_of = base.query_slots(q.question, result.keywords)
            text, _ = extract(q.question, result.keywords, result.passages, settings.answer.answer_chars, analyze,
                              base.idf, slots=slots_of[-1] if slots_of else None)
            top = result.candidates[0].url if result.candidates else None
            record[label] = {
                "gold": bool(text) and bool(q.golds) and contains_any(text, q.golds),
                "page_first": bool(top and q.gold_url and same_page(top, q.gold_url)),
                "shown": bool(text),
            }
        records.append(record)
        if progress is not None:
            progress(1)
    return records


def save(records: Iterable[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def collect_sites(names: Iterable[str], work: Path, settings: Settings, log: Any = None) -> dict[str, list[dict]]:
    """Prepare each site in `work` and collect its records (kept as work/<site>.jsonl)."""
    from .coverage_sites import prepare

    out: dict[str, list[dict]] = {}
    for name in names:
        site = prepare(name, work, settings)
        out[name] = collect(site, log=log)
        save(out[name], Path(work) / f"{name}.jsonl")
    return out


def remeasure(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its features computed again from its kept inputs (after a change of
    chatbot.coverage_features, without retrieving again)."""
    from guiderag.chatbot.coverage import MeasureInputs
    from guiderag.chatbot.coverage_features import PageFacts
    from guiderag.retrieval.evidence import QueryEvidence, SlotFact

    raw = dict(record["inputs"])
    ev = dict(raw["evidence"])
    ev["slots"] = tuple(SlotFact(**f) for f in ev["slots"])
    raw["evidence"] = QueryEvidence(**ev)
    for key in ("top_page", "reference"):
        raw[key] = PageFacts(frozenset(raw[key]["gives"]), bool(raw[key]["odds"]), frozenset(raw[key].get("units", ())))
    measured = MeasureInputs(**raw).measure()
    out = dict(record)
    out["features"] = measured.values
    out["words"] = words(measured)
    return out


def words(measured: Any) -> dict[str, Any]:
    """The words behind a record's features (chatbot.coverage_features.Measured), for reading."""
    return {"unknown_specific": measured.unknown_specific, "unknown_common": measured.unknown_common,
            "unknown_partial": measured.unknown_partial, "unknown_paraphrase": measured.unknown_paraphrase,
            "unknown_when": measured.unknown_when, "unknown_named": measured.unknown_named,
            "passing_named": measured.passing_named, "missing_units": measured.missing_units,
            "rare_diseases": measured.rare_diseases, "unknown_diseases": measured.unknown_diseases,
            "permission_unknown": measured.permission_unknown,
            "top_title": measured.top_title}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return value
