"""The corpus retrieval works on: one guideline's current pages and their corpus version."""
from __future__ import annotations

from guiderag.errors import EmptyCorpusError
from guiderag.settings import DEFAULT_GUIDELINE, Settings
from guiderag.store import PageVersion, Store


def for_guideline(settings: Settings) -> Settings:
    """`settings` naming the guideline to index or search: settings.guideline when the
    store holds it, else the store's only guideline (InputError when it holds several and
    none is named, or not the one named). Every index path follows from it."""
    with Store(settings.store, create=False) as store:
        gid = store.resolve_guideline(settings.guideline)
    return settings if gid == settings.guideline else settings.replace(guideline=gid)


def read_corpus(settings: Settings) -> tuple[list[PageVersion], str]:
    """The current pages and corpus version of the guideline settings name (see
    `for_guideline`); EmptyCorpusError when there are none."""
    with Store(settings.store, create=False) as store:
        gid = store.resolve_guideline(settings.guideline)
        pages = store.current_pages(guideline=gid)
        version = store.corpus_version(guideline=gid)
    if not pages:
        named = "" if gid == DEFAULT_GUIDELINE else f" for guideline {gid!r}"
        raise EmptyCorpusError(
            f"the page store {settings.store_name} holds no content page{named}: run `guiderag scrape TOC_URL` "
            "(or `guiderag scrape --sample`) first"
        )
    return pages, version
