"""Numbers written as ranges: [3, 4, 5, 9] -> "3-5, 9" (cited lines, skipped rows)."""
from __future__ import annotations

from typing import Iterable


def number_ranges(numbers: Iterable[int], dash: str = "-") -> str:
    """The distinct numbers, sorted, runs of consecutive ones joined by `dash`."""
    runs: list[str] = []
    ordered = sorted({int(n) for n in numbers})
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        runs.append(str(ordered[i]) if i == j else f"{ordered[i]}{dash}{ordered[j]}")
        i = j + 1
    return ", ".join(runs)
