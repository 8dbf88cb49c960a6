"""A text's terms as ids in an index-building process's own vocabulary (retrieval.build):
compact arrays a text cache can keep, joined into one int32 array per chunk of pages."""
from __future__ import annotations

from array import array

import numpy as np

# array's type code of 4-byte ids (numpy reads the joined arrays as int32)
_INT32 = next(code for code in "ilh" if array(code).itemsize == 4)


def text_ids(tokens: list[str], vocab: dict[str, int], order: list[str]) -> array:
    """Ids of one text's `tokens` in a worker's vocabulary, new tokens appended to it and to
    `order`, as a compact array('i') (the text cache keeps it)."""
    ids = list(map(vocab.get, tokens))
    if None in ids:
        for i, j in enumerate(ids):
            if j is None:
                tok = tokens[i]
                j = vocab.get(tok)
                if j is None:
                    j = vocab[tok] = len(order)
                    order.append(tok)
                ids[i] = j
    return array(_INT32, ids)


def joined(parts: list[array]) -> np.ndarray:
    """The texts' id arrays (`text_ids`) one after another, int32."""
    return np.frombuffer(b"".join(parts), dtype=np.int32)
