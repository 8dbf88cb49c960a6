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
  title (NFKC, whitespace ignored).
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
