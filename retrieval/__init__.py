"""Japanese retrieval: analyzer, index (fit once, .npz + JSON, atomic swap) and two pipelines.

Public surface (ARCHITECTURE.md):
- `build_index(config, store, guideline) -> IndexInfo`: index a guideline's current pages (a
  RetrievalConfig, the StoreConfig, a GuidelineScope), swap in atomically;
- `load_retriever(config, store, guideline) -> Retriever`: the configured pipeline (config.pipeline);
  for `ours` the index is loaded, and rebuilt when missing, corrupt or stale;
- `Retriever.search(question, keywords=None) -> RetrievalResult`,
  `.offline_keywords(question, k)`, `.idf(term)`, `.analyze(text)` (question terms, framing words
  dropped), `.query_weights(question, keywords)`, `.query_slots(question, keywords)` (ours; the
  protocol has none), `.pages`, `.corpus_version`, `.guideline` (the id of the one it serves);
- `analyze(text)`: the module-level, picklable analyzer;
- keywords: `KEYWORD_PROMPT`, `keyword_prompt`, `parse_keywords` for a model's reply.
"""
from __future__ import annotations

from .analyzer import Analyzer, analyze
from .build import build_index
from .index import IndexInfo
from .keywords import KEYWORD_PROMPT, keyword_prompt, parse_keywords
from .loader import load_retriever
from .result import Candidate, Passage, RetrievalResult
from .retriever import Retriever

__all__ = [
    "Analyzer",
    "Candidate",
    "IndexInfo",
    "KEYWORD_PROMPT",
    "Passage",
    "RetrievalResult",
    "Retriever",
    "analyze",
    "build_index",
    "keyword_prompt",
    "load_retriever",
    "parse_keywords",
]
