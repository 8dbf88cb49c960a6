"""A PDF page's glyphs as pieces of lines, and the pieces print adds that a reader skips.

A piece is the glyphs (in drawing order) of one region of a page (the flow, a box, a table
cell) on one baseline without a wide gap. Removed, each with the reason:

- running heads and feet: a piece in the page margins (a tenth of the page on each side)
  whose text (its digits aside) recurs on most pages, a copyright notice there, or a head
  the guide's other PDFs repeat (a one-page document cannot show it); and folios (page
  numbers) in the margins;
- the document's own table of contents: pieces naming a section of the document with a
  page number after them on their line, and the heading that introduces only those.
"""
from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Sequence

from guiderag.store.structure import LIST_ITEM, SENTENCE_END

from .pdfgeometry import Glyph, PageGeometry
from .pdfgrid import Grid, region_of
from .textlines import WIDE_CHAR

# Page margins (share of the page) where running heads, feet and folios are looked for.
MARGIN_SHARE = 0.1
# A margin line recurring on at least this share of the pages (and 2 pages) is running.
RUNNING_SHARE = 0.5
# A folio: a page number alone, maybe decorated (- 12 -, 12 / 40, p.12, ページ12).
FOLIO = re.compile(r"^[\-–—‐―~〜・\s(（\[]*(?:p\.?|page|ページ)?\s*\d{1,4}\s*(?:/\s*\d{1,4})?[\-–—‐―~〜・\s)）\]]*$",
                   re.IGNORECASE)
# A copyright notice in the page margins is print furniture even on a one-page document.
COPYRIGHT = re.compile(r"©|\(c\)\s*\d{4}|copyright|all rights reserved", re.IGNORECASE)
DOT_LEADER = re.compile(r"^[\s.…‥・·･_\-]+$")
# Glyphs further apart than this (in font sizes) on one baseline are separate pieces.
PIECE_GAP = 1.5
CONTENTS = "the document's own table of contents"


@dataclass
class Piece:
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


def page_pieces(page: PageGeometry, grids: Sequence[Grid]) -> list[Piece]:
    """The page's glyphs as pieces: consecutive glyphs (in drawing order) of one region on
    one baseline, without a wide gap."""
    open_pieces: dict[tuple, Piece] = {}
    pieces: list[Piece] = []
    for order, g in enumerate(page.glyphs):
        region = region_of(g, grids)
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
        cur = Piece(page=page.number, region=region, order=order, glyphs=[g])
        open_pieces[region] = cur
        pieces.append(cur)
    return [p for p in pieces if p.text]


def folded(text: str) -> str:
    return re.sub(r"\d+", "#", squash(text))


def running_pieces(pages: Sequence[PageGeometry], pieces: Sequence[Piece],
                   known: frozenset[str] = frozenset()) -> dict[int, str]:
    """id(piece) -> why, for the running heads, feet and folios; `known`: the (folded)
    running heads and feet of the guide's other PDFs, which a one-page document has too."""
    n = len(pages)
    size_of = {p.number: p for p in pages}
    margin: dict[str, set[int]] = {}

    def in_margin(p: Piece) -> bool:
        geo = size_of[p.page]
        return (p.y0 >= geo.height * (1 - MARGIN_SHARE) or p.y1 <= geo.height * MARGIN_SHARE
                or p.x1 <= geo.width * MARGIN_SHARE or p.x0 >= geo.width * (1 - MARGIN_SHARE))

    for p in pieces:
        key = folded(p.text)
        if in_margin(p):
            margin.setdefault(key, set()).add(p.page)
    out: dict[int, str] = {}
    need = max(2, math.ceil(RUNNING_SHARE * n))
    for p in pieces:
        key = folded(p.text)
        if in_margin(p) and FOLIO.match(unicodedata.normalize("NFKC", p.text)):
            out[id(p)] = "folio (page number)"
        elif in_margin(p) and COPYRIGHT.search(p.text):
            out[id(p)] = "running head or foot (a copyright notice in the margin)"
        elif in_margin(p) and key in known:
            out[id(p)] = "running head or foot (as on the guide's other PDFs)"
        elif n >= 2 and in_margin(p) and len(margin.get(key, ())) >= need:
            out[id(p)] = f"running head or foot (on {len(margin[key])} of {n} pages)"
    return out


def contents_pieces(pieces: Sequence[Piece], titles: set[str]) -> dict[int, str]:
    """id(piece) -> why, for the entries of the document's own table of contents: a piece
    naming a section of the document, with a page number after it on its line."""
    out: dict[int, str] = {}
    by_line: dict[tuple[int, tuple, int], list[Piece]] = {}
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


def drop_contents_headings(drop: dict[int, str], pieces: Sequence[Piece]) -> None:
    """A heading directly followed by table-of-contents entries (nothing else before the
    next kept line) introduces the contents: dropped with them."""
    ordered = reading_order(pieces)
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




def reading_order(pieces: Sequence[Piece]) -> list[Piece]:
    return sorted(pieces, key=lambda p: (p.page, p.order))
