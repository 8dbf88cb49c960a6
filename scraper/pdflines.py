"""A PDF's text as lines, from what it draws (scraper.pdfgeometry): the unit of citation,
each line with the PDF page(s) it is printed on.

The same kinds of line as an HTML page gives (scraper.textlines): one per heading,
paragraph, list item or table row (cells joined by " | "), in reading order, a long
paragraph split into sentences. What print adds and a reader skips (running heads and
feet, folios, the document's own table of contents: scraper.pdfpieces) is taken out,
each with the reason, for review (`PdfText.removed`); tables and boxes come from the
ruling lines (scraper.pdfgrid).

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
through the worker (tests/test_pdf.py) and reasoned about without one.
"""
from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from guiderag.store.structure import LIST_ITEM, QUESTION_NUMBER, SENTENCE_END, TABLE_CELL

from .pdfgeometry import Geometry, OutlineEntry, PageGeometry
from .pdfgrid import Grid, find_grids
from .pdfpieces import (Piece, contents_pieces, drop_contents_headings, folded, join_wrapped, page_pieces,
                        reading_order, running_pieces, squash)
from .textlines import split_sentences

PLACE_TOLERANCE = 2.0  # a bookmark's target y, give or take
# How close to its column's right edge a wrapped line ends (in font sizes).
EDGE_TOLERANCE = 1.0
# A line that stops mid-sentence this far across its column (share of the width) wraps too.
RAGGED_SHARE = 0.6
INDENT = 0.5  # a paragraph's first line is indented by at least this (font sizes)
ALIGNED = 0.3  # lines starting within this (font sizes) of each other are aligned
LEADING_FACTOR = 1.3  # a gap wider than this many typical line steps ends a paragraph
SAME_SIZE = 0.03  # sizes within 3 % are one style
TITLE_MAX_CHARS = 100


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


# --- blocks ----------------------------------------------------------------------------
@dataclass
class _Block:
    kind: str  # "text" | "row"
    pieces: list[Piece]
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

    def __init__(self, flow: Sequence[Piece]) -> None:
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

    def continues(self, block: _Block, before: Piece, after: Piece, right: float, left: float) -> bool:
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


def build_blocks(layout: _Layout, pieces: Sequence[Piece], grids: dict[int, list[Grid]],
                 box_edges: dict[tuple[int, int], tuple[float, float]]) -> list[_Block]:
    """Paragraphs, list items and headings (joined across wraps and page breaks) and table
    rows, in reading order."""
    blocks: list[_Block] = []
    open_text: dict[tuple, _Block] = {}  # region key -> the paragraph still open in it
    rows_done: set[tuple[int, int, int]] = set()
    by_cell: dict[tuple, list[Piece]] = {}
    for p in pieces:
        if p.region[0] == "cell":
            by_cell.setdefault((p.page, *p.region[1:]), []).append(p)
    last_flow: _Block | None = None
    for p in reading_order(pieces):
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
    pieces: list[Piece] = []
    for pg in pages:
        pieces.extend(page_pieces(pg, grids[pg.number]))
    chars = sum(len(p.text) for p in pieces)
    removed: list[tuple[int, str, str]] = []
    drop = running_pieces(pages, pieces, frozenset(folded(t) for t in known_running))
    outline_titles = {squash(e.title) for e in geo.outline}
    question_titles = {squash(p.text) for p in pieces if QUESTION_NUMBER.match(unicodedata.normalize("NFKC", p.text))}
    drop.update(contents_pieces([p for p in pieces if id(p) not in drop], outline_titles | question_titles))
    drop_contents_headings(drop, pieces)
    for p in pieces:
        if id(p) in drop:
            removed.append((p.page, p.text, drop[id(p)]))
    kept = [p for p in pieces if id(p) not in drop]
    flow = [p for p in reading_order(kept) if p.region == ("flow",)]
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
    starts: list[Piece] = []  # the first piece of each line's block (for sections)
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


def _title(pages: Sequence[PageGeometry], kept: Sequence[Piece], metadata: str) -> str:
    """The largest text of the first page with text, else the Title metadata."""
    for pg in pages:
        first = [p for p in kept if p.page == pg.number and p.region[0] != "cell"]
        if not first:
            continue
        biggest = max(p.size for p in first)
        parts = [p for p in reading_order(first) if abs(p.size - biggest) <= SAME_SIZE * biggest]
        text = ""
        for p in parts:
            text = join_wrapped(text, p.text)
        if 0 < len(text) <= TITLE_MAX_CHARS:
            return text
        break
    return " ".join(metadata.split())


def _sections(outline: Sequence[OutlineEntry], lines: Sequence[str], starts: Sequence[Piece],
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


def _line_of(entry: OutlineEntry, lines: Sequence[str], starts: Sequence[Piece]) -> int:
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
