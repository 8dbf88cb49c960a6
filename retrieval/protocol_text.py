"""The published protocol's text processing, kept literal: strip HTML tags, then every
character that is not Japanese, then MeCab's nouns, space-joined (retrieval.pipeline_protocol,
and the refit baseline of retrieval.bench). retrieval.analyzer says why the index reads
text otherwise."""
from __future__ import annotations

import re

from .analyzer import nodes

_TAG = re.compile(r"<[^>]*>")
_NON_JAPANESE = re.compile(r"[^\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\u3005\u30fc\s]")


def protocol_clean(text: str) -> str:
    """The protocol: strip HTML tags, then every character that is not Japanese."""
    return _NON_JAPANESE.sub("", _TAG.sub("", text))


def protocol_nouns(text: str) -> str:
    """The protocol: MeCab (default dictionary) nouns of the cleaned text, space-joined."""
    return " ".join(surface for surface, feature in nodes(protocol_clean(text))
                    if surface and feature.startswith("名詞,"))
