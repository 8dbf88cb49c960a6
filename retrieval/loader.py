"""load_retriever: the configured pipeline over the store's current corpus."""
from __future__ import annotations

import sys

from guiderag.errors import IndexCorruptError, IndexWriteError
from guiderag.settings import PROTOCOL, GuidelineScope, Settings

from .build import build_data
from .corpus import read_corpus, resolve_guideline
from .index import index_fingerprint, make_analyzer
from .persist import check_matches, load_data, save_data
from .pipeline_ours import OursRetriever
from .pipeline_protocol import ProtocolRetriever
from .retriever import Retriever


def load_retriever(settings: Settings, guideline: GuidelineScope | None = None) -> Retriever:
    """The retriever of settings.pipeline over one guideline's current pages (`guideline`,
    else the store's only one; `retriever.guideline` says which).

    For `ours`, the saved index is loaded and checked against the store's corpus version
    and the analyzer settings; when it is missing, damaged or stale it is rebuilt (and
    swapped in atomically), with a one-line notice on stderr. Callers load it once per
    process and reuse it. Raises EmptyCorpusError when nothing was scraped yet."""
    scope = resolve_guideline(settings, guideline)
    pages, corpus_version = read_corpus(settings, scope)
    if settings.pipeline == PROTOCOL:
        return ProtocolRetriever(settings, pages, corpus_version, guideline=scope.id)
    analyzer = make_analyzer(settings)
    fingerprint = index_fingerprint(settings, analyzer)
    try:
        data = load_data(scope.index_dir)
        check_matches(data, pages, corpus_version, fingerprint, scope.index_dir)
    except IndexCorruptError as exc:
        print(f"guiderag: {exc}; rebuilding it now", file=sys.stderr)
        data = build_data(pages, corpus_version, settings, analyzer)
        try:
            data.path = save_data(data, scope.index_dir)
        except IndexWriteError as write_error:
            # answering still works from the index built in memory
            print(f"guiderag: {write_error} Using the index built in memory.", file=sys.stderr)
    return OursRetriever(settings, pages, data, analyzer, guideline=scope.id)
