"""An in-process retrieval quality check on JSQuAD, for tuning (no HTTP, no answer stage).

The pages are what the scraper would store: eval.jsquad builds the guidebook site of the
in-scope articles, and scraper.textlines.extract turns each article's HTML into
(title, lines), so long paragraphs are split into one line per sentence exactly as in a
real scrape. The pages go into a real Store in a temporary folder; then every question
is searched with each pipeline.

Reported, for in-scope questions: right page ranked first, answer string inside the
reference (passages; and for the protocol also its literal char-truncated reference),
governed (something above the threshold); for out-of-scope questions: left with no
candidate. Plus, for tuning, the same rates over a sweep of thresholds.

    python -m retrieval.devcheck [--pipelines ours,protocol] [--limit N]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Sequence

from guiderag.settings import Settings
from store import FetchedPage, Store

SWEEP = tuple(round(0.05 + 0.025 * i, 3) for i in range(23))  # 0.05 .. 0.6


def _norm(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).split())


def build_store(db: Path, settings: Settings) -> tuple[list, list]:
    """Write the in-scope JSQuAD pages into a store at `db`; return (in_scope, held_out) articles."""
    from eval.jsquad import build_site, load_articles, split_articles
    from scraper.textlines import extract

    articles = load_articles(settings=settings)
    inside, outside = split_articles(articles)
    with tempfile.TemporaryDirectory(prefix="guiderag-devcheck-site-") as site:
        build_site(inside, Path(site))
        fetched = []
        for article in inside:
            html = (Path(site) / article.path).read_text(encoding="utf-8")
            title, lines = extract(html, split_over_chars=settings.split_lines_over_chars)
            fetched.append(FetchedPage(url=article.path, title=title, lines=tuple(lines)))
    with Store(db) as store:
        run = store.begin_run("devcheck")
        store.commit_run(run, fetched, content_urls=[f.url for f in fetched])
    return inside, outside


def evaluate(retriever, inside: Sequence, outside: Sequence, limit: int | None = None) -> dict:
    """Metrics of one retriever over the questions (see the module docstring)."""
    rows_in: list[tuple[float, bool, bool, bool, bool]] = []
    rows_out: list[float] = []
    latencies: list[float] = []
    for article in inside:
        for qa in article.qas[: limit or None]:
            t0 = time.perf_counter()
            r = retriever.search(qa.question)
            latencies.append((time.perf_counter() - t0) * 1000)
            first = r.candidates[0].url if r.candidates else None
            ref = _norm(r.reference_text)
            literal = _norm(r.literal_reference) if r.literal_reference is not None else ref
            answers = [_norm(a) for a in qa.answers]
            rows_in.append(
                (
                    r.top_score,
                    first == article.path,
                    any(a and a in ref for a in answers),
                    any(a and a in literal for a in answers),
                    # the right page is the best-scoring one, whatever the threshold
                    _best_page(retriever, r) == article.path,
                )
            )
    for article in outside:
        for qa in article.qas[: limit or None]:
            t0 = time.perf_counter()
            r = retriever.search(qa.question)
            latencies.append((time.perf_counter() - t0) * 1000)
            rows_out.append(r.top_score)
    n_in, n_out = len(rows_in), len(rows_out)
    threshold = retriever.settings.threshold

    def rate(values) -> float:
        values = list(values)
        return round(sum(values) / len(values), 4) if values else float("nan")

    sweep = {}
    for t in SWEEP:
        sweep[str(t)] = {
            "in_first_and_governed": rate(best and s >= t for s, _, _, _, best in rows_in),
            "out_refused": rate(s < t for s in rows_out),
        }
    latencies.sort()
    # the operating points a threshold can reach: best refusal keeping 95% of answers
    # first-and-governed, and best answer rate refusing 90% of out-of-scope questions
    at95 = [v["out_refused"] for v in sweep.values() if v["in_first_and_governed"] >= 0.95]
    at90 = [v["in_first_and_governed"] for v in sweep.values() if v["out_refused"] >= 0.90]
    return {
        "pipeline": retriever.pipeline,
        "threshold": threshold,
        "in_scope_questions": n_in,
        "out_of_scope_questions": n_out,
        "right_page_first": rate(f for _, f, _, _, _ in rows_in),
        "answer_in_reference": rate(a for _, _, a, _, _ in rows_in),
        "answer_in_literal_reference": rate(a for _, _, _, a, _ in rows_in),
        "in_scope_governed": rate(s >= threshold for s, *_ in rows_in),
        "out_of_scope_refused": rate(s < threshold for s in rows_out),
        "best_page_right_ignoring_threshold": rate(b for *_, b in rows_in),
        "latency_p50_ms": round(latencies[len(latencies) // 2], 2) if latencies else None,
        "refused_keeping_95_first": max(at95) if at95 else None,
        "first_refusing_90": max(at90) if at90 else None,
        "sweep": sweep,
    }


def _best_page(retriever, result) -> str | None:
    if result.candidates:
        return result.candidates[0].url
    best = getattr(retriever, "best_page", None)
    return best(result.question, result.keywords) if best else None


def main(argv: Sequence[str] | None = None) -> int:
    import retrieval

    parser = argparse.ArgumentParser(prog="python -m retrieval.devcheck")
    parser.add_argument("--pipelines", default="ours,protocol")
    parser.add_argument("--limit", type=int, help="at most this many questions per article")
    parser.add_argument("--set", action="append", default=[], help="settings override NAME=VALUE")
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.set:
        name, value = item.split("=", 1)
        field_type = type(getattr(Settings(), name))
        overrides[name] = field_type(value) if field_type is not bool else value.lower() in ("1", "true")
    with tempfile.TemporaryDirectory(prefix="guiderag-devcheck-") as tmp:
        settings = Settings.load(db=Path(tmp) / "dev.db", progress=False, **overrides)
        inside, outside = build_store(settings.db, settings)
        reports = []
        for pipeline in args.pipelines.split(","):
            ps = settings.replace(pipeline=pipeline)
            retriever = retrieval.load_retriever(ps)
            reports.append(evaluate(retriever, inside, outside, args.limit))
            print(json.dumps(reports[-1], ensure_ascii=False), file=sys.stderr)
    print(json.dumps(reports, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
