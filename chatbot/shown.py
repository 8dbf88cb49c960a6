"""From chosen stored lines to what the user is shown: the answer text and its citations.

Shared by extract and lines. A `Pick` names one stored line (page version + line number)
in priority order; `render` adds the page's title line heading each excerpt and the
context line a picked line needs to be read (the heading above it, or the sentence that
introduces a list item), keeps within a character budget without ever cutting a line,
and returns the verbatim lines joined by newlines plus one `ShownPassage` per run of
consecutive lines of a page.
"""
from __future__ import annotations

import functools
from typing import Iterable, NamedTuple, Sequence

from guiderag.store import PageVersion
from guiderag.store import structure
from guiderag.store.structure import HEADING_MAX_CHARS, title_line

from .answer import ShownPassage


class Pick(NamedTuple):
    """One stored line chosen for the answer, with the score of the passage it came from (a
    named tuple: an answer makes one per reference line)."""

    page: PageVersion
    line: int
    score: float = 0.0

    @property
    def key(self) -> tuple[str, int, int]:
        return line_key(self.page, self.line)


def line_key(page: PageVersion, number: int) -> tuple[str, int, int]:
    """A stored line's identity in an answer (a line is shown once): page URL, version, number."""
    return (page.url, page.version, number)


# Pages whose title line is kept across answers (the same pages answer question after question).
_TITLE_LINES_KEPT = 4096


@functools.lru_cache(maxsize=_TITLE_LINES_KEPT)
def _title_line(title: str, lines: tuple[str, ...]) -> int:
    """A page's title line (store.structure.title_line), kept by its title and lines."""
    return title_line(title, lines)


class TitleLines:
    """Each page's title line (_title_line), looked up once per answer. Kept by the page
    object, not its URL and version: the sections of a PDF document share both, each with
    a title and lines of its own (pages outlive the answer that holds this)."""

    def __init__(self) -> None:
        self._at: dict[int, int] = {}

    def __call__(self, page: PageVersion) -> int:
        at = self._at.get(id(page))
        if at is None:
            at = self._at[id(page)] = _title_line(page.title, page.lines)
        return at


def context_line(page: PageVersion, number: int, heading_max_chars: int = HEADING_MAX_CHARS) -> int | None:
    """The line a reader needs above line `number`: the sentence introducing a list item,
    else the nearest heading above it (None when the line is itself a heading;
    store.structure.context_line)."""
    return structure.context_line(page.lines, number, heading_max_chars)


def render(
    picks: Sequence[Pick],
    budget: int,
    *,
    with_context: bool = True,
    heading_max_chars: int = HEADING_MAX_CHARS,
    titles: TitleLines | None = None,
) -> tuple[str, list[ShownPassage]]:
    """Lay out picked lines (highest priority first) within `budget` characters.

    Each pick brings its page's title line and its context line when they fit; a pick that
    does not fit is skipped (a later, shorter one may still fit). The first pick is always
    shown, alone if it is longer than the budget on its own. Pages appear in the order of
    their first pick, lines in page order. Returns (answer text, shown passages).
    """
    chosen: dict[tuple[str, int, int], Pick] = {}
    title_of = titles if titles is not None else TitleLines()  # the caller's, when it has one
    used = 0

    def cost(keys: Iterable[tuple[str, int, int]], page: PageVersion) -> int:
        return sum(len(page.line(k[2])) + 1 for k in keys if k not in chosen)

    for pick in picks:
        if chosen and used >= budget:
            break  # full: a line costs at least 2 (a letter and its newline), none fits any more
        text = pick.page.line(pick.line)
        if pick.key in chosen or not text.strip():
            continue
        if chosen and used + len(text) > budget:
            continue  # the line alone does not fit, and every option holds it: none fits
        page = pick.page
        extras: list[int] = []
        if with_context:
            t = title_of(page)
            if t:
                extras.append(t)
            c = context_line(page, pick.line, heading_max_chars)
            if c is not None and c != t:
                extras.append(c)
        options = [extras, extras[:1], []] if extras else [[]]
        placed = False
        for extra in options:
            keys = [line_key(page, n) for n in [*extra, pick.line]]
            keys = list(dict.fromkeys(keys))
            c = cost(keys, page)
            if used + c <= budget + 1:  # +1: the last line needs no newline
                for k in keys:
                    if k not in chosen:
                        chosen[k] = Pick(page, k[2], pick.score)
                used += c
                placed = True
                break
        if not placed and not chosen:
            chosen[pick.key] = pick  # a single over-long line is shown alone
            break
    return layout(chosen.values())


def layout(picks: Iterable[Pick]) -> tuple[str, list[ShownPassage]]:
    """Group picks by page (first-seen order), sort lines, split into runs of consecutive
    lines (in a PDF, a run also ends where a PDF page does: each run cites its page)."""
    by_page: dict[tuple[str, int], list[Pick]] = {}
    for p in picks:
        by_page.setdefault((p.page.url, p.page.version), []).append(p)
    shown: list[ShownPassage] = []
    texts: list[str] = []
    for group in by_page.values():
        group = sorted({p.line: p for p in group}.values(), key=lambda p: p.line)
        run: list[Pick] = []
        for p in group:
            if run and (p.line != run[-1].line + 1 or _new_page(run[-1], p)):
                shown.append(_passage(run))
                run = []
            run.append(p)
        if run:
            shown.append(_passage(run))
        texts.extend(p.page.line(p.line) for p in group)
    return "\n".join(texts), shown


def _new_page(before: Pick, after: Pick) -> bool:
    """Whether `after` starts another PDF page than the one `before` ends on (or another
    section of the document)."""
    pdf = after.page.pdf
    if pdf is None:
        return False
    if before.page.title != after.page.title:
        return True
    ends, starts = pdf.pages_of([before.line]), pdf.pages_of([after.line])
    return bool(ends and starts and max(ends) != min(starts))


def _passage(run: list[Pick]) -> ShownPassage:
    page = run[0].page
    numbers = [p.line for p in run]
    return ShownPassage(
        url=page.url,
        title=page.title,
        score=max(p.score for p in run),
        lines=numbers,
        text="\n".join(page.line(p.line) for p in run),
        version=page.version,
        fetched_at=page.fetched_at,
        content_hash=page.content_hash,
        pdf_page=page.pdf.first_page(numbers) if page.pdf is not None else None,
        pdf_pages=page.pdf.pages_of(numbers) if page.pdf is not None else None,
        document_title=page.pdf.document_title if page.pdf is not None else None,
    )
