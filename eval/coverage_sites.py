"""The labelled sites the coverage decision is trained and measured on, each in a store of its own.

A site is a guideline served on loopback, scraped with our scraper into a fresh store in a
work folder and indexed, with its labelled questions (in scope / out of scope, by
category):

| site | guideline | questions |
|---|---|---|
| `jsquad` | the JSQuAD v1.3 validation articles as a guidebook (eval.jsquad) | in scope, and the held-back articles' questions |
| `gastric` | ../shared/bench/patient-gastric | 200 patient-worded questions by category |
| `sample` | the bundled sample site (data/sample_site) | eval/questions/sample_patient.xlsx and protocol.xlsx |
| `colorectal`, `breast` | our demo sites (eval/sites, eval.demo_sites) | their questions.jsonl |

`prepare(name, work, settings)` gives the site's settings (store, index) and questions.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from guiderag.errors import InputError
from guiderag.resources import SAMPLE_SITE_URL, question_set
from guiderag.settings import Settings

from . import demo_sites, jsquad
from .patient import load_questions as load_patient, suite_dir
from .workbook import IN_SCOPE, Question, read_questions
from .workdir import fresh_store

JSQUAD, GASTRIC, SAMPLE = "jsquad", "gastric", "sample"
DEV_SITES = (JSQUAD, GASTRIC, SAMPLE)
# in-scope and out-of-scope categories of the sets that have none
JSQUAD_IN, JSQUAD_OUT = "article", "held_out_article"
SAMPLE_IN, SAMPLE_OUT = "sample_in", "sample_out"


@dataclass(frozen=True)
class Labelled:
    """One labelled question of a site."""

    question: Question
    category: str

    @property
    def in_scope(self) -> bool:
        return self.question.kind == IN_SCOPE


@dataclass
class Site:
    name: str
    settings: Settings  # its store and index
    questions: list[Labelled]


def site_names() -> list[str]:
    return [*DEV_SITES, *demo_sites.site_names()]


def prepare(name: str, work: Path, settings: Settings, *, bench_dir: Path | None = None) -> Site:
    """Serve, scrape and index the site `name` into work/<name>/ (a fresh store)."""
    from guiderag import retrieval, scraper
    from guiderag.scraper.sample import serve_directory, serve_sample_site

    folder = Path(work) / name
    folder.mkdir(parents=True, exist_ok=True)
    book = folder / "urls.xlsx"
    base = settings.replace(db=folder / f"{name}.db", delay_s=0.0, urls_xlsx=book, progress=False, guideline="")
    fresh_store(base)
    if book.exists():
        book.unlink()  # an earlier run's workbook would be read as hand edits
    questions: list[Labelled]
    if name == JSQUAD:
        articles = jsquad.load_articles(None, settings=settings)
        inside, outside = jsquad.split_articles(articles, jsquad.HELD_OUT, jsquad.SEED)
        toc = jsquad.build_site(inside, folder / "site")
        with serve_directory(folder / "site") as root:
            scraper.scrape_site(base.scraper, base.storage, root + toc)
        questions = [Labelled(q, JSQUAD_IN if q.kind == IN_SCOPE else JSQUAD_OUT)
                     for q in jsquad.questions(inside, outside)]
    elif name == GASTRIC:
        path = suite_dir(bench_dir)
        with serve_directory(path / "site") as root:
            scraper.scrape_site(base.scraper, base.storage, root + "gb/index.html")
        questions = [Labelled(p.question, p.category) for p in load_patient(path)]
    elif name == SAMPLE:
        with serve_sample_site() as toc:
            scraper.scrape_site(base.scraper, base.storage, toc, public_site=SAMPLE_SITE_URL)
        questions = []
        for set_name, prefix in (("sample_patient.xlsx", ""), ("protocol.xlsx", "")):
            for q in read_questions(question_set(set_name)):
                questions.append(Labelled(q, SAMPLE_IN if q.kind == IN_SCOPE else SAMPLE_OUT))
    elif name in demo_sites.site_names():
        guide = demo_sites.load_guide(name)
        toc = demo_sites.build_site(guide, folder / "site")
        with serve_directory(folder / "site") as root:
            scraper.scrape_site(base.scraper, base.storage, root + toc)
        questions = [Labelled(Question(str(q["id"]), q["question"], q["kind"], gold_url=q.get("gold_page"),
                                       gold_answers=list(q.get("answers") or [])), str(q["category"]))
                     for q in demo_sites.load_questions(name)]
    else:
        raise InputError(f"no coverage site {name!r}: use {', '.join(site_names())}")
    retrieval.build_index(base.retrieval, base.storage, progress=base.progress_reporter)
    return Site(name, base, questions)


def categories(site: Site) -> dict[str, list[str]]:
    """{"in": [...], "out": [...]}: the site's categories in first-seen order."""
    ins: dict[str, None] = {}
    outs: dict[str, None] = {}
    for q in site.questions:
        (ins if q.in_scope else outs).setdefault(q.category, None)
    return {"in": list(ins), "out": list(outs)}


def by_name(sites: Sequence[Site]) -> dict[str, Site]:
    return {s.name: s for s in sites}
