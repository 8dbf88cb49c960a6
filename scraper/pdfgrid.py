"""Tables and boxes of a PDF page, from its ruling lines (scraper.pdfgeometry.Rule).

Collinear rules that touch are one line (each cell framed on its own, as many typesetters
draw them, gives four edges per cell); groups of horizontal and vertical lines that meet
are a grid. A grid of at least two rows and two columns is a table: its rows are divided
by the horizontal lines crossing half its width, each row's cells by the vertical lines
crossing that row (a merged cell is one). A single frame is a box, read like the page.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from .pdfgeometry import Glyph, Rule

GRID_TOLERANCE = 1.5
MIN_CELL = 4.0  # a cell (or row) narrower than this is the gap between two frames' edges
ROW_SPAN_SHARE = 0.5  # a horizontal rule crossing this share of a table divides its rows


@dataclass
class Grid:
    """A ruled table (rows top to bottom, each a list of cell boxes) or a box (one cell)."""

    x0: float
    y0: float
    x1: float
    y1: float
    rows: list[list[tuple[float, float, float, float]]]

    @property
    def is_table(self) -> bool:
        return len(self.rows) >= 2 and max(len(r) for r in self.rows) >= 2


def _merge(values: Iterable[float]) -> list[float]:
    out: list[float] = []
    for v in sorted(values):
        if not out or v - out[-1] > GRID_TOLERANCE:
            out.append(v)
    return out


def _joined(rules: Sequence[Rule], horizontal: bool) -> list[Rule]:
    """Collinear rules that touch or overlap as one (the edges of adjacent cells' frames)."""
    t = GRID_TOLERANCE
    items = sorted((r.y0, r.x0, r.x1) if horizontal else (r.x0, r.y0, r.y1) for r in rules)
    clusters: list[list[tuple[float, float, float]]] = []
    for item in items:  # rules within the tolerance of each other's position: one line
        if clusters and item[0] - clusters[-1][-1][0] <= t:
            clusters[-1].append(item)
        else:
            clusters.append([item])
    out: list[tuple[float, float, float]] = []
    for cluster in clusters:
        at = cluster[0][0]
        merged: list[list[float]] = []
        for _, lo, hi in sorted(cluster, key=lambda v: v[1]):
            if merged and lo <= merged[-1][1] + t:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        out.extend((at, lo, hi) for lo, hi in merged)
    if horizontal:
        return [Rule(lo, at, hi, at) for at, lo, hi in out]
    return [Rule(at, lo, at, hi) for at, lo, hi in out]


def find_grids(rules: Sequence[Rule]) -> list[Grid]:
    """Tables and boxes: groups of horizontal and vertical rules that meet."""
    hs = _joined([r for r in rules if r.horizontal and r.x1 - r.x0 > GRID_TOLERANCE], True)
    vs = _joined([r for r in rules if not r.horizontal and r.y1 - r.y0 > GRID_TOLERANCE], False)
    if not hs or not vs:
        return []
    items = hs + vs
    parent = list(range(len(items)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    t = GRID_TOLERANCE
    for i, h in enumerate(hs):
        for j, v in enumerate(vs, start=len(hs)):
            if h.x0 - t <= v.x0 <= h.x1 + t and v.y0 - t <= h.y0 <= v.y1 + t:
                parent[find(i)] = find(j)
    groups: dict[int, list[Rule]] = {}
    for i, r in enumerate(items):
        groups.setdefault(find(i), []).append(r)
    grids = []
    for members in groups.values():
        gh = [r for r in members if r.horizontal]
        gv = [r for r in members if not r.horizontal]
        if len(gh) < 2 or len(gv) < 2:
            continue
        x0, x1 = min(r.x0 for r in gh), max(r.x1 for r in gh)
        width = max(x1 - x0, 1.0)
        ys = _merge(r.y0 for r in gh if r.x1 - r.x0 >= ROW_SPAN_SHARE * width)
        if len(ys) < 2:
            continue
        rows = []
        for top, bottom in zip(reversed(ys[1:]), reversed(ys[:-1])):
            if top - bottom < MIN_CELL:
                continue
            middle = (top + bottom) / 2
            xs = _merge(r.x0 for r in gv if r.y0 - t <= middle <= r.y1 + t)
            cells = [(a, bottom, b, top) for a, b in zip(xs, xs[1:]) if b - a >= MIN_CELL]
            if cells:
                rows.append(cells)
        if rows:
            grids.append(Grid(x0, ys[0], x1, ys[-1], rows))
    return grids


def region_of(g: Glyph, grids: Sequence[Grid]) -> tuple:
    cx, cy = (g.x0 + g.x1) / 2, (g.y0 + g.y1) / 2
    for gi, grid in enumerate(grids):
        if not (grid.x0 <= cx <= grid.x1 and grid.y0 <= cy <= grid.y1):
            continue
        for ri, row in enumerate(grid.rows):
            for ci, (a, b, c, d) in enumerate(row):
                if a <= cx <= c and b <= cy <= d:
                    return ("cell", gi, ri, ci) if grid.is_table else ("box", gi)
    return ("flow",)
