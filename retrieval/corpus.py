"""The corpus retrieval works on: one guideline's current pages and their corpus version."""
from __future__ import annotations

from guiderag.errors import EmptyCorpusError
from guiderag.settings import DEFAULT_GUIDELINE, GuidelineScope, Settings
from guiderag.store import PageVersion, Store


def resolve_guideline(settings: Settings, guideline: GuidelineScope | None = None) -> GuidelineScope:
    """The guideline to index or search: `guideline` when given, else the store's only one
    (InputError when it holds several). Every index path follows from it."""
    if guideline is not None:
        return guideline
    with Store(settings.store, create=False) as store:
        return settings.guideline_scope(store.resolve_guideline(""))


def read_corpus(settings: Settings, guideline: GuidelineScope | None = None) -> tuple[list[PageVersion], str]:
    """The current pages and corpus version of a guideline (see `resolve_guideline`);
    InputError when the store does not hold it, EmptyCorpusError when it has no pages."""
    with Store(settings.store, create=False) as store:
        gid = store.resolve_guideline(guideline.id if guideline is not None else "")
        pages = store.current_pages(guideline=gid)
        version = store.corpus_version(guideline=gid)
    if not pages:
        named = "" if gid == DEFAULT_GUIDELINE else f" for guideline {gid!r}"
        raise EmptyCorpusError(
            f"the page store {settings.store_name} holds no content page{named}: run `guiderag scrape TOC_URL` "
            "(or `guiderag scrape --sample`) first"
        )
    return pages, version
