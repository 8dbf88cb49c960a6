"""A query's passage scores where the search reads them (retrieval.scoring.PassageScorer.query_hits)."""
from __future__ import annotations

import numpy as np

# A value per passage (a threshold, a page weight): an array, or one number for every passage.
PerPassage = np.ndarray | np.floating | float


def at_rows(values: PerPassage, rows: np.ndarray) -> PerPassage:
    """The values of the passages `rows`: the array's, or the one number of every passage."""
    return values[rows] if isinstance(values, np.ndarray) else values


class Hits:
    """A query's scores where they matter: `rows` (ascending) with `scores` holds every
    passage whose score reaches its threshold, exactly, and the top one; a passage not
    listed scores below its threshold and at most the top score. (Merged over two queries,
    `better`, a listed score below its threshold may be the lower of the two.)

    `every`, when the scorer had to score most passages anyway: every passage's exact
    score, from which the listed ones are read (`scores`, made when first asked for) and
    the passages reaching a cut are found without going through the list (`reaching`)."""

    def __init__(self, rows: np.ndarray, scores: np.ndarray | None, unknown: list[str],
                 every: np.ndarray | None = None) -> None:
        if scores is None and every is None:
            raise ValueError("Hits needs the listed scores or every passage's")
        self.rows = rows
        self._scores = scores
        self.unknown = unknown
        self.every = every
        self._top: float | None = None

    @property
    def scores(self) -> np.ndarray:
        """The listed passages' scores, aligned with `rows`."""
        if self._scores is None:
            assert self.every is not None
            self._scores = self.every.take(self.rows)
        return self._scores

    @property
    def top(self) -> float:
        """The best score of any passage (0 when none scores). With `every`, its maximum:
        a passage not listed scores at most the top one. Found once: the scorer and the
        search both ask."""
        if self._top is None:
            values = self.every if self.every is not None else self.scores
            self._top = float(values.max()) if len(values) else 0.0
        return self._top

    def _reach(self, cut: PerPassage) -> np.ndarray:
        """Whether each score reaches `cut`: every passage's with `every`, else the listed ones'."""
        if self.every is not None:
            return self.every >= cut
        return self.scores >= at_rows(cut, self.rows)

    def reaches(self, cut: PerPassage) -> bool:
        """Whether any passage's score reaches `cut` (as `reaching` finds them, without
        listing them)."""
        return bool(self._reach(cut).any())

    def reaching(self, cut: PerPassage) -> tuple[np.ndarray, np.ndarray]:
        """The listed passages whose score reaches `cut` (one, or one per passage), ascending,
        and their scores; `cut` no lower than the threshold the list was made for. With
        `every`, found in it: a passage not listed scores below that threshold, so the
        same passages."""
        keep = self._reach(cut)
        if self.every is not None:
            at = np.flatnonzero(keep)
            return at, self.every.take(at)
        return self.rows[keep], self.scores[keep]

    def dense(self, n: int) -> np.ndarray:
        """A score per passage of the index: the listed ones, 0 elsewhere."""
        out = np.zeros(n, dtype=np.float32)
        out[self.rows] = self.scores
        return out

    def better(self, other: "Hits", n: int) -> "Hits":
        """Each passage's better score of two queries (keywords may only add evidence), over
        the passages either lists."""
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
