"""Where a PDF document's stored lines are printed: the one thing a PDF version keeps that
an HTML page's does not (store migration 4, the `pdf_layout` JSON column of page_versions).

A PDF is one page of the store (one URL, one row of `pages`, its versions), its text the
same kind of lines as an HTML page's. `PdfLayout` adds, for each line, the PDF page(s) it
is printed on (a sentence running over a page break names both), the document's sections
(first line and title: a bookmark, or a heading numbered as a question), its page count,
the SHA-256 of the file's bytes, and the lines the scraper removed (running heads, folios,
its own table of contents) with the reason, for review.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Sequence


@dataclass(frozen=True)
class PdfLayout:
    """The pages of a PDF version's lines, its sections and what was removed."""

    line_pages: tuple[tuple[int, ...], ...]  # per stored line (line n at index n - 1)
    sections: tuple[tuple[int, str], ...]  # (first line, counted from 1; title), in line order
    page_count: int
    sha256: str  # of the file's bytes
    document_title: str = ""
    removed: tuple[tuple[int, str, str], ...] = ()  # (PDF page, text, why)

    def pages_of(self, numbers: Iterable[int]) -> list[int]:
        """The PDF pages the given lines (counted from 1) are printed on, in order."""
        out: set[int] = set()
        for n in numbers:
            if 1 <= n <= len(self.line_pages):
                out.update(self.line_pages[n - 1])
        return sorted(out)

    def first_page(self, numbers: Sequence[int]) -> int | None:
        """The page the first of the given lines starts on."""
        for n in numbers:
            if 1 <= n <= len(self.line_pages) and self.line_pages[n - 1]:
                return min(self.line_pages[n - 1])
        return None

    def lines_on(self, pages: Iterable[int]) -> set[int]:
        """The line numbers printed (wholly or in part) on any of `pages`."""
        wanted = set(pages)
        return {n for n, on in enumerate(self.line_pages, start=1) if wanted.intersection(on)}

    def section_ranges(self, line_count: int) -> list[tuple[int, int, str]]:
        """(first line, last line, title) of each section, covering lines 1..line_count."""
        starts = [(n, t) for n, t in self.sections if 1 <= n <= line_count]
        if not starts or starts[0][0] != 1:
            starts.insert(0, (1, self.document_title))
        out = []
        for i, (first, title) in enumerate(starts):
            last = starts[i + 1][0] - 1 if i + 1 < len(starts) else line_count
            if last >= first:
                out.append((first, last, title))
        return out

    def digest_parts(self) -> list[Any]:
        """What a version's content hash covers besides its title and lines: the pages and
        sections cited, and the file's bytes (a new file is a new version)."""
        return [[list(p) for p in self.line_pages], [list(s) for s in self.sections], self.sha256]

    def to_json(self) -> str:
        return json.dumps({
            "line_pages": [list(p) for p in self.line_pages],
            "sections": [[n, t] for n, t in self.sections],
            "page_count": self.page_count,
            "sha256": self.sha256,
            "document_title": self.document_title,
            "removed": [[p, t, w] for p, t, w in self.removed],
        }, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | None) -> "PdfLayout | None":
        if not text:
            return None
        data = json.loads(text)
        return cls(
            line_pages=tuple(tuple(int(x) for x in p) for p in data.get("line_pages", [])),
            sections=tuple((int(n), str(t)) for n, t in data.get("sections", [])),
            page_count=int(data.get("page_count", 0)),
            sha256=str(data.get("sha256", "")),
            document_title=str(data.get("document_title", "")),
            removed=tuple((int(p), str(t), str(w)) for p, t, w in data.get("removed", [])),
        )


def pdf_citation(url: str, layout: PdfLayout, lines: Sequence[int]) -> dict[str, Any]:
    """What a passage of a PDF adds to its JSON: the url of its first line's page
    (`…pdf#page=N`), that page, every page its lines are on, and the document's title."""
    page = layout.first_page(lines)
    return {
        "url": page_link(url, page),
        "pdf_page": page,
        "pdf_pages": layout.pages_of(lines),
        "document_title": layout.document_title,
    }


def page_link(url: str, page: int | None) -> str:
    """The URL that opens a PDF at `page` (PDF open parameters, RFC 8118)."""
    return f"{url.split('#', 1)[0]}#page={page}" if page else url
