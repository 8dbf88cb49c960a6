"""A PDF's text as lines, from what it draws (scraper.pdfgeometry): the unit of citation,
each line with the PDF page(s) it is printed on.

The same kinds of line as an HTML page gives (scraper.textlines): one per heading,
paragraph, list item or table row (cells joined by " | "), in reading order, a long
paragraph split into sentences. What print adds and a reader skips is taken out, each
with the reason, for review (`PdfText.removed`):

- running heads and feet: a line in the page margins (a tenth of the page on each side)
  whose text (its digits aside) recurs on most pages, a copyright notice there, or a head
  the guide's other PDFs repeat (a one-page document cannot show it); and folios (page
  numbers) in the margins;
- the document's own table of contents: lines naming a later section, followed on the
  same line by a page number (and the heading that introduces only such lines).

Lines the typesetter wrapped are joined into the paragraph they belong to: a visual line
continues the one above when both have the same style, the one above reaches the right
edge of its column (or stops mid-sentence near it), the spacing is normal and the new
line neither starts a list item nor is indented as a new paragraph. No space is put
between Japanese characters; Latin words keep one. A paragraph that runs over a page
break is joined the same way, across the running foot and head: its lines name both
pages. Tables are found from their ruling lines (a grid of at least two rows and two
columns); each row is one line, the header row first as on an HTML page, and the text of
a cell is one run. A single ruled frame is a box: its text is read like the page's, with
the frame's edges as its margins.

Sections come from the outline (every bookmark starts one), else from headings numbered
as questions (Q14, CQ3, 問5), else from the largest heading style used more than once; the
lines before the first are the document's front matter, titled with the document title
(the largest text of its first page, else the file's Title metadata).

Pure functions of the geometry: no PDF library here, so this is tested with real PDFs
through the worker (tests/test_pdf*.py) and reasoned about without one.
"""
from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Sequence

from guiderag.store.structure import LIST_ITEM, QUESTION_NUMBER, SENTENCE_END, TABLE_CELL

from .pdfgeometry import Geometry, Glyph, OutlineEntry, PageGeometry, Rule
from .textlines import WIDE_CHAR, split_sentences

# Page margins (share of the page) where running heads, feet and folios are looked for.
MARGIN_SHARE = 0.1
# A margin line recurring on at least this share of the pages (and 2 pages) is running.
RUNNING_SHARE = 0.5
PLACE_TOLERANCE = 2.0  # a bookmark's target y, give or take
# A folio: a page number alone, maybe decorated (- 12 -, 12 / 40, p.12, ページ12).
FOLIO = re.compile(r"^[\-–—‐―~〜・\s(（\[]*(?:p\.?|page|ページ)?\s*\d{1,4}\s*(?:/\s*\d{1,4})?[\-–—‐―~〜・\s)）\]]*$",
                   re.IGNORECASE)
# A copyright notice in the page margins is print furniture even on a one-page document.
COPYRIGHT = re.compile(r"©|\(c\)\s*\d{4}|copyright|all rights reserved", re.IGNORECASE)
DOT_LEADER = re.compile(r"^[\s.…‥・·･_\-]+$")
# Glyphs further apart than this (in font sizes) on one baseline are separate pieces.
PIECE_GAP = 1.5
# How close to its column's right edge a wrapped line ends (in font sizes).
EDGE_TOLERANCE = 1.0
# A line that stops mid-sentence this far across its column (share of the width) wraps too.
RAGGED_SHARE = 0.6
INDENT = 0.5  # a paragraph's first line is indented by at least this (font sizes)
ALIGNED = 0.3  # lines starting within this (font sizes) of each other are aligned
LEADING_FACTOR = 1.3  # a gap wider than this many typical line steps ends a paragraph
SAME_SIZE = 0.03  # sizes within 3 % are one style
GRID_TOLERANCE = 1.5
MIN_CELL = 4.0  # a cell (or row) narrower than this is the gap between two frames' edges
ROW_SPAN_SHARE = 0.5  # a horizontal rule crossing this share of a table divides its rows
TITLE_MAX_CHARS = 100
CONTENTS = "the document's own table of contents"


@dataclass
class PdfText:
    """A PDF read as lines: what the store keeps (lines, their pages, sections) and what
    the workbook shows (the removed lines, the tables' blank cells)."""

    title: str
    lines: list[str]
    line_pages: list[tuple[int, ...]]
    sections: list[tuple[int, str]]  # (first line, counted from 1; title)
    removed: list[tuple[int, str, str]]  # (PDF page, text, why)
    page_count: int
    table_cells: int = 0
    blank_cells: int = 0
    chars: int = 0  # characters of text drawn (before anything is removed)


@dataclass
class _Piece:
    """Glyphs on one baseline, in drawing order, in one region of a page."""

    page: int
    region: tuple  # ("flow",) | ("box", id) | ("cell", table id, row, col)
    order: int  # drawing order of its first glyph on the page
    glyphs: list[Glyph] = field(default_factory=list)

    @cached_property
    def x0(self) -> float:
        return min(g.x0 for g in self.glyphs)

    @cached_property
    def x1(self) -> float:
        return max(g.x1 for g in self.glyphs)

    @cached_property
    def y0(self) -> float:
        return min(g.y0 for g in self.glyphs)

    @cached_property
    def y1(self) -> float:
        return max(g.y1 for g in self.glyphs)

    @cached_property
    def size(self) -> float:
        return Counter(round(g.size, 1) for g in self.glyphs if not g.text.isspace()).most_common(1)[0][0]

    @cached_property
    def style(self) -> tuple[float, int, bool]:
        solid = [g for g in self.glyphs if not g.text.isspace()] or self.glyphs
        color = Counter(g.color for g in solid).most_common(1)[0][0]
        bold = sum(g.bold for g in solid) * 2 > len(solid)
        return self.size, color, bold

    @cached_property
    def text(self) -> str:
        return _glyph_text(self.glyphs)

    @cached_property
    def text_x0(self) -> float:
        """Where the text after a leading bullet starts (the hanging indent of a list item)."""
        m = LIST_ITEM.match(self.text)
        if not m:
            return self.x0
        seen = 0
        for g in self.glyphs:
            seen += len(g.text)
            if seen >= m.end():
                return g.x1
        return self.x0


def _is_wide(ch: str) -> bool:
    return bool(WIDE_CHAR.match(ch))


def _glyph_text(glyphs: Sequence[Glyph]) -> str:
    """The glyphs' text: spaces PDFium inferred between Japanese characters (justification)
    dropped, runs of spaces collapsed, ends trimmed."""
    out: list[str] = []
    for i, g in enumerate(glyphs):
        if g.text.isspace() and g.generated:
            before = out[-1] if out else ""
            after = next((h.text for h in glyphs[i + 1:] if not h.text.isspace()), "")
            if not before or not after or _is_wide(before[-1]) or _is_wide(after[0]):
                continue
            out.append(" ")
        elif g.text.isspace() and g.text != "\u3000":
            if out and out[-1] != " ":
                out.append(" ")
        else:
            out.append(g.text)
    return "".join(out).strip(" ")


def join_wrapped(before: str, after: str) -> str:
    """Two visual lines of one paragraph as one: nothing between Japanese characters, a
    space between Latin words, nothing after a hyphen."""
    if not before:
        return after
    if not after:
        return before
    if _is_wide(before[-1]) or _is_wide(after[0]) or before.endswith(("-", "‐")) or before[-1].isspace():
        return before + after
    return before + " " + after


def squash(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).split())


# --- tables and boxes from ruling lines -------------------------------------------------
@dataclass
class _Grid:
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


def find_grids(rules: Sequence[Rule]) -> list[_Grid]:
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
            grids.append(_Grid(x0, ys[0], x1, ys[-1], rows))
    return grids


def _region_of(g: Glyph, grids: Sequence[_Grid]) -> tuple:
    cx, cy = (g.x0 + g.x1) / 2, (g.y0 + g.y1) / 2
    for gi, grid in enumerate(grids):
        if not (grid.x0 <= cx <= grid.x1 and grid.y0 <= cy <= grid.y1):
            continue
        for ri, row in enumerate(grid.rows):
            for ci, (a, b, c, d) in enumerate(row):
                if a <= cx <= c and b <= cy <= d:
                    return ("cell", gi, ri, ci) if grid.is_table else ("box", gi)
    return ("flow",)


# --- pieces of lines -------------------------------------------------------------------
def page_pieces(page: PageGeometry, grids: Sequence[_Grid]) -> list[_Piece]:
    """The page's glyphs as pieces: consecutive glyphs (in drawing order) of one region on
    one baseline, without a wide gap."""
    open_pieces: dict[tuple, _Piece] = {}
    pieces: list[_Piece] = []
    for order, g in enumerate(page.glyphs):
        region = _region_of(g, grids)
        cur = open_pieces.get(region)
        size = max(g.size, 1.0)
        if cur is not None:
            last = cur.glyphs[-1]
            same_line = abs(last.y0 - g.y0) <= 0.35 * size and g.x0 >= last.x1 - 0.5 * size
            if same_line and g.x0 - last.x1 <= PIECE_GAP * size:
                cur.glyphs.append(g)
                continue
        if g.text.isspace():
            continue
        cur = _Piece(page=page.number, region=region, order=order, glyphs=[g])
        open_pieces[region] = cur
        pieces.append(cur)
    return [p for p in pieces if p.text]


# --- what print adds -------------------------------------------------------------------
def _folded(text: str) -> str:
    return re.sub(r"\d+", "#", squash(text))


def running_pieces(pages: Sequence[PageGeometry], pieces: Sequence[_Piece],
                   known: frozenset[str] = frozenset()) -> dict[int, str]:
    """id(piece) -> why, for the running heads, feet and folios; `known`: the (folded)
    running heads and feet of the guide's other PDFs, which a one-page document has too."""
    n = len(pages)
    size_of = {p.number: p for p in pages}
    margin: dict[str, set[int]] = {}

    def in_margin(p: _Piece) -> bool:
        geo = size_of[p.page]
        return (p.y0 >= geo.height * (1 - MARGIN_SHARE) or p.y1 <= geo.height * MARGIN_SHARE
                or p.x1 <= geo.width * MARGIN_SHARE or p.x0 >= geo.width * (1 - MARGIN_SHARE))

    for p in pieces:
        key = _folded(p.text)
        if in_margin(p):
            margin.setdefault(key, set()).add(p.page)
    out: dict[int, str] = {}
    need = max(2, math.ceil(RUNNING_SHARE * n))
    for p in pieces:
        key = _folded(p.text)
        if in_margin(p) and FOLIO.match(unicodedata.normalize("NFKC", p.text)):
            out[id(p)] = "folio (page number)"
        elif in_margin(p) and COPYRIGHT.search(p.text):
            out[id(p)] = "running head or foot (a copyright notice in the margin)"
        elif in_margin(p) and key in known:
            out[id(p)] = "running head or foot (as on the guide's other PDFs)"
        elif n >= 2 and in_margin(p) and len(margin.get(key, ())) >= need:
            out[id(p)] = f"running head or foot (on {len(margin[key])} of {n} pages)"
    return out


def contents_pieces(pieces: Sequence[_Piece], titles: set[str]) -> dict[int, str]:
    """id(piece) -> why, for the entries of the document's own table of contents: a piece
    naming a section of the document, with a page number after it on its line."""
    out: dict[int, str] = {}
    by_line: dict[tuple[int, tuple, int], list[_Piece]] = {}
    for p in pieces:
        by_line.setdefault((p.page, p.region, round(p.y0)), []).append(p)
    for line in by_line.values():
        line.sort(key=lambda p: p.x0)
        named = [p for p in line if squash(p.text) in titles]
        numbers = [p for p in line if FOLIO.match(unicodedata.normalize("NFKC", p.text))
                   or DOT_LEADER.match(p.text)]
        if named and numbers and max(p.x0 for p in numbers) > max(p.x1 for p in named):
            for p in named + numbers:
                out[id(p)] = CONTENTS
    return out


# --- blocks ----------------------------------------------------------------------------
@dataclass
class _Block:
    kind: str  # "text" | "row"
    pieces: list[_Piece]
    text: str = ""
    pages: list[int] = field(default_factory=list)  # the page of each character of `text`

    def add_text(self, piece_text: str, page: int, joined: bool = True) -> None:
        new = join_wrapped(self.text, piece_text) if joined else (self.text + " " + piece_text if self.text else piece_text)
        added = len(new) - len(self.text)
        self.pages.extend([page] * added)
        self.text = new


def _similar(a: tuple[float, int, bool], b: tuple[float, int, bool]) -> bool:
    return abs(a[0] - b[0]) <= SAME_SIZE * max(a[0], b[0]) and a[1] == b[1] and a[2] == b[2]


class _Layout:
    """The measures of one document its joins are judged by: the body size, the flow's
    left and right edges, the usual step between lines and a paragraph's first-line indent."""

    def __init__(self, flow: Sequence[_Piece]) -> None:
        sizes: Counter[float] = Counter()
        for p in flow:
            sizes[p.size] += len(p.glyphs)
        self.body = sizes.most_common(1)[0][0] if sizes else 10.0
        body = [p for p in flow if abs(p.size - self.body) <= SAME_SIZE * self.body]
        ends = Counter(round(p.x1) for p in body)
        self.flow_right = float(max((x for x, n in ends.items() if n >= 2), default=max((p.x1 for p in flow), default=0.0)))
        lefts = Counter(round(p.x0) for p in body)
        self.flow_left = float(min((x for x, n in lefts.items() if n >= 2), default=min((p.x0 for p in flow), default=0.0)))
        steps: Counter[float] = Counter()
        indents: Counter[float] = Counter()
        for a, b in zip(body, body[1:]):
            if a.page == b.page and a.region == b.region and _similar(a.style, b.style):
                step = a.y0 - b.y0
                if step > 0:
                    steps[round(step)] += 1
                if a.text.rstrip().endswith(SENTENCE_END) and not LIST_ITEM.match(b.text):
                    indents[round(b.x0 - self.flow_left)] += 1
        self.step = float(steps.most_common(1)[0][0]) if steps else 0.0
        indent = float(indents.most_common(1)[0][0]) if indents else 0.0
        self.indent = indent if indent >= INDENT * self.body else 0.0

    def continues(self, block: _Block, before: _Piece, after: _Piece, right: float, left: float) -> bool:
        """Whether `after` is the next visual line of the paragraph `block` ends with `before`."""
        if not _similar(before.style, after.style) or LIST_ITEM.match(after.text):
            return False
        size = after.size
        if before.page == after.page:
            step = before.y0 - after.y0
            if step <= 0 or (self.step and step > LEADING_FACTOR * max(self.step, size)):
                return False
        width = max(right - left, size)
        reaches = before.x1 >= right - EDGE_TOLERANCE * size
        ragged = (not before.text.rstrip().endswith(SENTENCE_END)
                  and before.x1 - left >= RAGGED_SHARE * width)
        if not (reaches or ragged):
            return False
        tolerance, tight = INDENT * size, ALIGNED * size
        first = block.pieces[0]
        if len(block.pieces) > 1:
            return abs(after.x0 - block.pieces[1].x0) <= tight
        if LIST_ITEM.match(first.text):
            return abs(after.x0 - first.text_x0) <= tight or abs(after.x0 - first.x0) <= tight
        if self.indent and abs(first.x0 - (left + self.indent)) <= tolerance:
            # a paragraph's indented first line: the next line of it starts further left
            return after.x0 < first.x0 - tolerance
        return abs(after.x0 - first.x0) <= tight


def _reading_order(pieces: Sequence[_Piece]) -> list[_Piece]:
    return sorted(pieces, key=lambda p: (p.page, p.order))


def build_blocks(layout: _Layout, pieces: Sequence[_Piece], grids: dict[int, list[_Grid]],
                 box_edges: dict[tuple[int, int], tuple[float, float]]) -> list[_Block]:
    """Paragraphs, list items and headings (joined across wraps and page breaks) and table
    rows, in reading order."""
    blocks: list[_Block] = []
    open_text: dict[tuple, _Block] = {}  # region key -> the paragraph still open in it
    rows_done: set[tuple[int, int, int]] = set()
    by_cell: dict[tuple, list[_Piece]] = {}
    for p in pieces:
        if p.region[0] == "cell":
            by_cell.setdefault((p.page, *p.region[1:]), []).append(p)
    last_flow: _Block | None = None
    for p in _reading_order(pieces):
        if p.region[0] == "cell":
            _, gi, ri, _ci = p.region
            key = (p.page, gi, ri)
            if key in rows_done:
                continue
            rows_done.add(key)
            grid = grids[p.page][gi]
            row = _Block("row", [])
            cells = []
            for ci in range(len(grid.rows[ri])):
                cell = _Block("text", [])
                for q in sorted(by_cell.get((p.page, gi, ri, ci), []), key=lambda q: q.order):
                    cell.add_text(q.text, q.page, joined=not LIST_ITEM.match(q.text))
                    cell.pieces.append(q)
                cells.append(cell)
            for c in (c for c in cells if c.text):
                if row.text:
                    row.text += TABLE_CELL
                    row.pages.extend([p.page] * len(TABLE_CELL))
                row.text += c.text
                row.pages.extend(c.pages)
                row.pieces.extend(c.pieces)
            if row.text:
                blocks.append(row)
            last_flow = None
            continue
        region = p.region if p.region[0] == "box" else ("flow",)
        block = open_text.get(region) if region != ("flow",) else last_flow
        if region == ("flow",):
            right, left = layout.flow_right, layout.flow_left
        else:
            left, right = box_edges[(p.page, p.region[1])]
        if block is not None and layout.continues(block, block.pieces[-1], p, right, left):
            block.add_text(p.text, p.page)
            block.pieces.append(p)
            continue
        block = _Block("text", [p])
        block.add_text(p.text, p.page)
        blocks.append(block)
        if region == ("flow",):
            last_flow = block
        else:
            open_text[region] = block
    return blocks


def _split(block: _Block, split_over: int) -> list[tuple[str, tuple[int, ...]]]:
    """The block's line(s) with their pages: one per sentence when it is long."""
    text = block.text
    if block.kind == "row" or not split_over or len(text) <= split_over:
        return [(text, tuple(sorted(set(block.pages))))]
    out = []
    cursor = 0
    for sentence in split_sentences(text):
        start = text.find(sentence, cursor)
        if start < 0:
            start = cursor
        end = start + len(sentence)
        pages = tuple(sorted(set(block.pages[start:end]))) or (block.pages[min(start, len(block.pages) - 1)],)
        out.append((sentence, pages))
        cursor = end
    return out


# --- the whole document ----------------------------------------------------------------
def read_lines(geo: Geometry, *, split_over_chars: int, heading_max_chars: int,
               known_running: Iterable[str] = ()) -> PdfText:
    """The document's lines, their pages, its sections, and what was removed
    (`known_running`: texts of running heads and feet found in the guide's other PDFs)."""
    pages = geo.pages
    grids = {pg.number: find_grids(pg.rules) for pg in pages}
    pieces: list[_Piece] = []
    for pg in pages:
        pieces.extend(page_pieces(pg, grids[pg.number]))
    chars = sum(len(p.text) for p in pieces)
    removed: list[tuple[int, str, str]] = []
    drop = running_pieces(pages, pieces, frozenset(_folded(t) for t in known_running))
    outline_titles = {squash(e.title) for e in geo.outline}
    question_titles = {squash(p.text) for p in pieces if QUESTION_NUMBER.match(unicodedata.normalize("NFKC", p.text))}
    drop.update(contents_pieces([p for p in pieces if id(p) not in drop], outline_titles | question_titles))
    _drop_contents_headings(drop, pieces)
    for p in pieces:
        if id(p) in drop:
            removed.append((p.page, p.text, drop[id(p)]))
    kept = [p for p in pieces if id(p) not in drop]
    flow = [p for p in _reading_order(kept) if p.region == ("flow",)]
    layout = _Layout(flow)
    box_edges: dict[tuple[int, int], tuple[float, float]] = {}
    for p in kept:
        if p.region[0] == "box":
            key = (p.page, p.region[1])
            lo, hi = box_edges.get(key, (p.x0, p.x1))
            box_edges[key] = (min(lo, p.x0), max(hi, p.x1))
    blocks = build_blocks(layout, kept, grids, box_edges)
    lines: list[str] = []
    line_pages: list[tuple[int, ...]] = []
    starts: list[_Piece] = []  # the first piece of each line's block (for sections)
    heading_style: list[tuple[float, int, bool] | None] = []
    for block in blocks:
        for i, (text, pgs) in enumerate(_split(block, split_over_chars)):
            if not text.strip():
                continue
            lines.append(text)
            line_pages.append(pgs)
            starts.append(block.pieces[0])
            heading_style.append(block.pieces[0].style if i == 0 and block.kind == "text" else None)
    title = _title(pages, kept, geo.metadata_title)
    sections = _sections(geo.outline, lines, starts, heading_style, layout.body, heading_max_chars, title)
    table_cells = blank = 0
    for number, page_grids in grids.items():
        used = {p.region[1:] for p in kept if p.page == number and p.region[0] == "cell"}
        for gi, grid in enumerate(page_grids):
            if not grid.is_table:
                continue
            for ri, row in enumerate(grid.rows):
                for ci in range(len(row)):
                    table_cells += 1
                    blank += (gi, ri, ci) not in used
    return PdfText(title=title, lines=lines, line_pages=line_pages, sections=sections, removed=removed,
                   page_count=geo.page_count, table_cells=table_cells, blank_cells=blank, chars=chars)


def _drop_contents_headings(drop: dict[int, str], pieces: Sequence[_Piece]) -> None:
    """A heading directly followed by table-of-contents entries (nothing else before the
    next kept line) introduces the contents: dropped with them."""
    ordered = _reading_order(pieces)
    for i, p in enumerate(ordered):
        if id(p) in drop or p.region[0] == "cell" or p.text.rstrip().endswith(SENTENCE_END):
            continue
        entries = 0
        for q in ordered[i + 1:]:
            if id(q) not in drop:
                break
            entries += drop[id(q)] == CONTENTS
        if entries >= 2:
            drop[id(p)] = "heading of the document's own table of contents"


def _title(pages: Sequence[PageGeometry], kept: Sequence[_Piece], metadata: str) -> str:
    """The largest text of the first page with text, else the Title metadata."""
    for pg in pages:
        first = [p for p in kept if p.page == pg.number and p.region[0] != "cell"]
        if not first:
            continue
        biggest = max(p.size for p in first)
        parts = [p for p in _reading_order(first) if abs(p.size - biggest) <= SAME_SIZE * biggest]
        text = ""
        for p in parts:
            text = join_wrapped(text, p.text)
        if 0 < len(text) <= TITLE_MAX_CHARS:
            return text
        break
    return " ".join(metadata.split())


def _sections(outline: Sequence[OutlineEntry], lines: Sequence[str], starts: Sequence[_Piece],
              heading_style: Sequence[tuple[float, int, bool] | None], body: float, heading_max_chars: int,
              title: str) -> list[tuple[int, str]]:
    found: dict[int, str] = {}
    if outline:
        for entry in outline:
            number = _line_of(entry, lines, starts)
            if number:
                found[number] = entry.title  # a deeper entry at the same line wins (it comes later)
    if not found:
        for n, (line, style) in enumerate(zip(lines, heading_style), start=1):
            if style is not None and style[0] >= body and QUESTION_NUMBER.match(unicodedata.normalize("NFKC", line)):
                found[n] = line
    if not found:
        styles = Counter(s for s, line in zip(heading_style, lines)
                         if s is not None and s[0] > body * (1 + SAME_SIZE) and len(line) <= heading_max_chars)
        if styles:
            top = max(styles, key=lambda s: (s[0], styles[s]))
            if styles[top] >= 2:
                found = {n: line for n, (line, s) in enumerate(zip(lines, heading_style), start=1) if s == top}
    if lines and 1 not in found:
        found[1] = title or lines[0]
    return sorted(found.items())


def _line_of(entry: OutlineEntry, lines: Sequence[str], starts: Sequence[_Piece]) -> int:
    """The line a bookmark points at: the first line at or below its spot, or a line just
    after it that repeats its title."""
    first = 0
    for n, piece in enumerate(starts, start=1):
        if piece.page > entry.page or (piece.page == entry.page
                                       and (entry.top is None or piece.y1 <= entry.top + PLACE_TOLERANCE)):
            first = n
            break
    if not first:
        return 0
    want = squash(entry.title)
    for n in range(first, min(first + 4, len(lines) + 1)):
        if squash(lines[n - 1]) == want:
            return n
    return first
