"""The corpus retrieval works on: one guideline's current pages and their corpus version.

Retrieval's unit is a page of the guideline as a reader meets it: an HTML page, or one
section of a PDF document (`units`). A PDF chapter holding Q11 to Q15 is five units, each
titled with its section's title (「Q14 手術の前後は…？」), so that scoring, a Q&A page's
threshold and the answer's title line work on it as on the HTML edition's Q page. A unit
is its document's PageVersion with that title and the other sections' lines left blank:
every line keeps its number in the stored version, which is what a citation names.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from guiderag.errors import EmptyCorpusError
from guiderag.guideline import DEFAULT_GUIDELINE, GuidelineScope
from guiderag.scopes import StoreConfig
from guiderag.store import PageVersion, Store


def resolve_guideline(store: StoreConfig, guideline: GuidelineScope | None = None) -> GuidelineScope:
    """The guideline to index or search: `guideline` when given, else the store's only one
    (InputError when it holds several). Every index path follows from it."""
    if guideline is not None:
        return guideline
    with Store(store.store, create=False) as opened:
        return GuidelineScope.of(store, opened.resolve_guideline(""))


def read_corpus(config: StoreConfig, guideline: GuidelineScope | None = None) -> tuple[list[PageVersion], str]:
    """The current pages and corpus version of a guideline (see `resolve_guideline`);
    InputError when the store does not hold it, EmptyCorpusError when it has no pages."""
    with Store(config.store, create=False) as store:
        gid = store.resolve_guideline(guideline.id if guideline is not None else "")
        pages = store.current_pages(guideline=gid)
        version = store.corpus_version(guideline=gid)
    pages = units(pages)
    if not pages:
        named = "" if gid == DEFAULT_GUIDELINE else f" for guideline {gid!r}"
        raise EmptyCorpusError(
            f"the page store {config.store_name} holds no content page{named}: run `guiderag scrape TOC_URL` "
            "(or `guiderag scrape --sample`) first"
        )
    return pages, version


def units(pages: Sequence[PageVersion]) -> list[PageVersion]:
    """Each page as it is, each PDF document as one unit per section (see the docstring)."""
    out: list[PageVersion] = []
    for page in pages:
        if page.pdf is None or not page.lines:
            out.append(page)
            continue
        for first, last, title in page.pdf.section_ranges(len(page.lines)):
            lines = ("",) * (first - 1) + page.lines[first - 1:last]
            if any(line.strip() for line in lines):
                out.append(replace(page, title=title or page.title, lines=lines))
    return out
