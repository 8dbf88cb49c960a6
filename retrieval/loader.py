"""load_retriever: the configured pipeline over the store's current corpus."""
from __future__ import annotations

import sys

from guiderag.errors import IndexCorruptError, IndexWriteError
from guiderag.guideline import GuidelineScope
from guiderag.progress import QUIET, ProgressReporter
from guiderag.scopes import PROTOCOL, RetrievalConfig, StoreConfig

from .build import build_data
from .corpus import read_corpus, resolve_guideline
from .index import index_fingerprint, make_analyzer
from .persist import check_matches, load_data, save_data
from .pipeline_ours import OursRetriever
from .pipeline_protocol import ProtocolRetriever
from .retriever import Retriever


def load_retriever(config: RetrievalConfig, store: StoreConfig, guideline: GuidelineScope | None = None, *,
                   progress: ProgressReporter = QUIET) -> Retriever:
    """The retriever of config.pipeline over one guideline's current pages in the store
    `store` (`guideline`, else the store's only one; `retriever.guideline` says which);
    `progress` reports a rebuild.

    For `ours`, the saved index is loaded and checked against the store's corpus version
    and the analyzer settings; when it is missing, damaged or stale it is rebuilt (and
    swapped in atomically), with a one-line notice on stderr. Callers load it once per
    process and reuse it. Raises EmptyCorpusError when nothing was scraped yet."""
    scope = resolve_guideline(store, guideline)
    pages, corpus_version = read_corpus(store, scope)
    if config.pipeline == PROTOCOL:
        return ProtocolRetriever(config, pages, corpus_version, guideline=scope.id)
    analyzer = make_analyzer(config)
    fingerprint = index_fingerprint(config, analyzer)
    try:
        data = load_data(scope.index_dir)
        check_matches(data, pages, corpus_version, fingerprint, scope.index_dir)
    except IndexCorruptError as exc:
        print(f"guiderag: {exc}; rebuilding it now", file=sys.stderr)
        data = build_data(pages, corpus_version, config, analyzer, progress)
        try:
            data.path = save_data(data, scope.index_dir)
        except IndexWriteError as write_error:
            # answering still works from the index built in memory
            print(f"guiderag: {write_error} Using the index built in memory.", file=sys.stderr)
    return OursRetriever(config, pages, data, analyzer, guideline=scope.id)
