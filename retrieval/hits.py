"""A query's passage scores where the search reads them (retrieval.scoring.PassageScorer.query_hits)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Hits:
    """A query's scores where they matter: `rows` (ascending) with `scores` holds every
    passage whose score reaches its threshold, exactly, and the top one; a passage not
    listed scores below its threshold and at most the top score. (Merged over two queries,
    `better`, a listed score below its threshold may be the lower of the two.)"""

    rows: np.ndarray
    scores: np.ndarray
    unknown: list[str]

    @property
    def top(self) -> float:
        """The best score of any passage (0 when none scores)."""
        return float(self.scores.max()) if len(self.scores) else 0.0

    def dense(self, n: int) -> np.ndarray:
        """A score per passage of the index: the listed ones, 0 elsewhere."""
        out = np.zeros(n, dtype=np.float32)
        out[self.rows] = self.scores
        return out

    def better(self, other: "Hits", n: int) -> "Hits":
        """Each passage's better score of two queries (keywords may only add evidence)."""
        if not len(other.rows):
            return self
        if not len(self.rows):
            return Hits(other.rows, other.scores, self.unknown)
        dense = self.dense(n)
        dense[other.rows] = np.maximum(dense[other.rows], other.scores)
        listed = np.zeros(n, dtype=bool)
        listed[self.rows] = True
        listed[other.rows] = True
        rows = np.flatnonzero(listed)
        return Hits(rows, dense[rows], self.unknown)
