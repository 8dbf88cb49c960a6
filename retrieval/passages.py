"""A page's passages and line spans: the units the index scores.

A passage is a window of about PASSAGE_CHARS characters of lines under one
heading (headed by the page title and that heading when scored); a line span is one body
line with its heading and the page title, the short context in which a question's terms
count as said together. Headings and the title line are read with store.structure.
"""
from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from typing import Sequence

from guiderag.store.structure import QUESTION_NUMBER, is_heading, title_line

# A passage is a window of about this many characters of lines under a heading (windows
# overlap by half), scored with the page title and heading. A constant of the index, not a
# setting: the threshold and the proximity factor were measured on windows of this size
# (JSQuAD and the patient sets, issue 11), and the index is rebuilt when it changes.
PASSAGE_CHARS = 300


def segment(
    lines: Sequence[str], passage_chars: int, heading_max_chars: int, skip: int = 0,
    headings: Sequence[bool] | None = None,
) -> list[tuple[int, int, int]]:
    """Passages of one page as (heading line or 0, first line, last line), numbered from 1.

    A passage is a window of about `passage_chars` characters of lines under one heading;
    windows advance by about half their length, so a sentence near a window's edge is
    also seen with the lines around it. Line `skip` (the line that repeats the page title,
    which heads every passage anyway) is no body line: a passage of the title alone would
    count its words twice in a few characters and outrank the pages' text. `headings`:
    each line's is_heading, when the caller has them."""
    out: list[tuple[int, int, int]] = []
    heading = 0
    body: list[int] = []

    def windows() -> None:
        if not body:
            return
        lengths = [len(lines[i - 1]) for i in body]
        start = 0
        while start < len(body):
            total, end = 0, start
            while end < len(body) and (total < passage_chars or end == start):
                total += lengths[end]
                end += 1
            out.append((heading, body[start], body[end - 1]))
            if end >= len(body):
                break
            # next window starts once half of this one is behind it
            half, step = 0, start
            while step < end - 1 and half < total / 2:
                half += lengths[step]
                step += 1
            start = max(step, start + 1)

    for number, line in enumerate(lines, start=1):
        if not line.strip() or number == skip:
            continue
        if is_heading(line, heading_max_chars) if headings is None else headings[number - 1]:
            windows()
            body = []
            heading = number
        else:
            body.append(number)
    windows()
    if not out and any(l.strip() for l in lines):
        # A page of headings only: one passage of all its lines.
        out.append((0, 1, len(lines)))
    return out


def line_spans(lines: Sequence[str], heading_max_chars: int, skip: int = 0,
               headings: Sequence[bool] | None = None) -> list[tuple[int, int]]:
    """One span per body line, in line order, as (heading line or 0, line), numbered from 1:
    the short context (with the page title) in which a question's terms count as said
    together. A heading line is no span of its own; it heads its section's. One line, not a
    line and its neighbour: measured better on JSQuAD's refusal trade-off and on the
    patient-worded sample set (a neighbour lets unrelated sentences pair up again). Line
    `skip` (the title repeated) is no span, as it is no body line of a passage (segment).
    `headings`: each line's is_heading, when the caller has them."""
    heading = 0
    out: list[tuple[int, int]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip() or number == skip:
            continue
        if is_heading(line, heading_max_chars) if headings is None else headings[number - 1]:
            heading = number
        else:
            out.append((heading, number))
    return out


def span_range(spans: Sequence[tuple[int, int]], first: int, last: int) -> tuple[int, int]:
    """Indexes [start, end) of the spans whose line lies in first..last (spans in line order)."""
    lines = [s[1] for s in spans]
    lo, hi = bisect.bisect_left(lines, first), bisect.bisect_right(lines, last)
    return (lo, hi) if lo < hi else (0, 0)


def body_skip(title: str, lines: Sequence[str], heading_max_chars: int) -> int:
    """The line `segment` and `line_spans` leave out: the line repeating the page title
    when it reads as a sentence (Q29 ...ですか？); a short title line heads its section,
    as any heading does, and is kept (0)."""
    skip = title_line(title, lines)
    return 0 if skip and is_heading(lines[skip - 1], heading_max_chars) else skip


# Page titles whose is_question_title answer a process keeps (a few deployments' pages).
_TITLES_KEPT = 65_536
# A title that asks (治療方針はどのように決まりますか？ / 副作用について教えてください) or is
# numbered as a question (Q14, Q.3, 問5): the page is the guideline's answer to that one question.
_QUESTION_TITLE = re.compile(r"(?:[?？]|か|ください|たい|とは)[。.\s]*$|" + QUESTION_NUMBER.pattern)


@functools.lru_cache(maxsize=_TITLES_KEPT)
def is_question_title(title: str) -> bool:
    """Whether a page title is a question (a Q&A page answers one question as a whole).
    Kept per title: the answer stage asks it of its passages' pages on every answer."""
    return bool(_QUESTION_TITLE.search(unicodedata.normalize("NFKC", title or "").strip()))
