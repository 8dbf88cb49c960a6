"""The structure of a stored page, read back from its lines: one rule each, for every stage.

Pages are stored as lines of text without markup (the unit of citation). Retrieval cuts
passages under headings and leaves the repeated title out of them; the answer shows a
quoted line with its page's title line and the heading or sentence above it; the
protocol pipeline adds the title unless the page starts with it. They all read the
structure with these rules:

- a sentence end: the line ends with 。．.!?！？ or a closing bracket 」』）);
- a list item: the line starts with a bullet (・ • ● - ...) or an enumerator (1. ① a) ...);
- a table row: cells joined by TABLE_CELL (" | ", the scraper's separator);
- a heading: a non-empty line of at most `max_chars` characters (HEADING_MAX_CHARS)
  that is neither a sentence, a list item nor a table row (Q21 胸腺腫の治療, 治療について);
- the title line: among the first TITLE_LOOKAHEAD lines, the one that repeats the page
  title (NFKC, whitespace ignored);
- the context of a line, what a reader needs above it: the sentence introducing a list
  item, else the nearest heading, within CONTEXT_LOOKBACK lines (`context_line`); and for
  a later row of a table, the table's header row (`table_header`). `line_contexts` gives
  both for every line of a page at once (the index stores them, retrieval.lines).
"""
from __future__ import annotations

import re
import unicodedata
from typing import Sequence

SENTENCE_END = tuple("。．.!?！？」』）)")
LIST_ITEM = re.compile(r"^\s*(?:[・•●○◆◇■□▪‣\-–*]|\(?\d{1,2}[\).．、]|[①-⑳]|[a-zA-Z][\).])\s*")
# A heading or title numbered as a question: Q14, Q.3, CQ2, 問5 (after NFKC: Ｑ１４ is Q14).
QUESTION_NUMBER = re.compile(r"^\s*(?:C?Q\.?\s*\d+|問\s*\d+)")
TITLE_LOOKAHEAD = 5
# How the scraper joins the cells of a table row into one line (scraper.textlines.CELL_SEPARATOR).
TABLE_CELL = " | "
# A line at most this long, not ending like a sentence, is a heading. A constant, not a
# setting: one rule for the index (passages under headings) and the shown answer (a line
# with its heading), which must agree; 40 fits the guidebooks' headings (Q21 胸腺腫の治療).
HEADING_MAX_CHARS = 40
# How far up a page to look for the heading or the introducing sentence of a line.
CONTEXT_LOOKBACK = 8


def ends_sentence(line: str) -> bool:
    """True when the line ends like a sentence (。, ？, a closing bracket...)."""
    return line.strip().endswith(SENTENCE_END)


def is_list_item(line: str) -> bool:
    """True when the line starts with a bullet or an enumerator."""
    return bool(LIST_ITEM.match(line))


def is_table_row(line: str) -> bool:
    """True for a row of a table as the scraper stores it (its cells joined by TABLE_CELL)."""
    return TABLE_CELL in line


def is_heading(line: str, max_chars: int = HEADING_MAX_CHARS) -> bool:
    """Short, not a sentence, not a list item, not a table row: reads as a heading.
    (A short row such as 「甲状腺 | だるさ、むくみ」 is the table's content, not a heading.)"""
    text = line.strip()
    return (0 < len(text) <= max_chars and not text.endswith(SENTENCE_END) and not LIST_ITEM.match(text)
            and TABLE_CELL not in text)


def _squash(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).split())


def title_line(title: str, lines: Sequence[str]) -> int:
    """The line (counted from 1) among the first few that repeats the page title, else 0.
    Blank lines are not counted (a section of a PDF document is read as its document's
    lines with the other sections' left blank)."""
    want = _squash(title)
    if not want:
        return 0
    seen = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if _squash(line) == want:
            return number
        seen += 1
        if seen >= TITLE_LOOKAHEAD:
            break
    return 0


def context_line(lines: Sequence[str], number: int, heading_max_chars: int = HEADING_MAX_CHARS) -> int | None:
    """The line a reader needs above line `number` (from 1): the sentence introducing a list
    item, else the nearest heading above it, within CONTEXT_LOOKBACK lines (None when the
    line is itself a heading, or nothing qualifies)."""
    text = lines[number - 1]
    if is_heading(text, heading_max_chars):
        return None
    stop = max(1, number - CONTEXT_LOOKBACK)
    if is_list_item(text):
        for n in range(number - 1, stop - 1, -1):
            above = lines[n - 1]
            if above.strip() and not is_list_item(above):
                return n
        return None
    for n in range(number - 1, stop - 1, -1):
        if is_heading(lines[n - 1], heading_max_chars):
            return n
    return None


def table_header(lines: Sequence[str], number: int) -> int | None:
    """The header row (the first row) of the table that line `number` is a later row of."""
    if not is_table_row(lines[number - 1]):
        return None
    n = number
    while n > 1 and is_table_row(lines[n - 2]):
        n -= 1
    return n if n != number else None


def line_contexts(lines: Sequence[str], heading_max_chars: int = HEADING_MAX_CHARS,
                  headings: Sequence[bool] | None = None) -> list[tuple[int, ...]]:
    """For every line (index 0 is line 1): the lines it is read with, its context line
    then its table's header row (each at most once), in one pass over the page; the same
    as `context_line` and `table_header` line by line. `headings`: each line's
    is_heading, when the caller has them."""
    out: list[tuple[int, ...]] = []
    last_heading = 0  # the nearest heading above, 0: none
    last_lead = 0  # the nearest non-blank line above that is no list item
    row_run = 0  # the first row of the table the previous line belongs to, 0: none
    for number, text in enumerate(lines, start=1):
        stop = max(1, number - CONTEXT_LOOKBACK)
        heading = is_heading(text, heading_max_chars) if headings is None else headings[number - 1]
        item = bool(LIST_ITEM.match(text))
        context = 0
        if not heading:
            found = last_lead if item else last_heading
            context = found if found >= stop else 0
        row = TABLE_CELL in text
        header = row_run if row and row_run and row_run != number else 0
        out.append(tuple(n for n in (context, header if header != context else 0) if n))
        row_run = (row_run or number) if row else 0
        if heading:
            last_heading = number
        if text.strip() and not item:
            last_lead = number
    return out
