"""The corpus retrieval works on: the store's current pages and their corpus version."""
from __future__ import annotations

from guiderag.errors import EmptyCorpusError
from guiderag.settings import Settings
from guiderag.store import PageVersion, Store


def read_corpus(settings: Settings) -> tuple[list[PageVersion], str]:
    """The store's current pages and corpus version; EmptyCorpusError when there are none."""
    with Store(settings.db, create=False) as store:
        pages = store.current_pages()
        version = store.corpus_version()
    if not pages:
        raise EmptyCorpusError(
            f"the page store {settings.db} holds no content page: run `guiderag scrape TOC_URL` "
            "(or `guiderag scrape --sample`) first"
        )
    return pages, version
