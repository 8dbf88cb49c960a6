"""The URL workbook (.xlsx): the manual review step of the protocol, written and read back.

Each scrape writes one row per harvested link: url, link_text, category, reason, include,
http_status, title, fetched_at, content_hash (then href as written, and auto_category, the
classifier's own verdict). Read back with `--urls-xlsx`, a maintainer's hand edits win: a
row whose include or category differs from auto_category was edited by hand (include=FALSE
drops a content page, include=TRUE adds a page the classifier rejected, or a row added by
hand with include=TRUE adds a page the TOC does not link). The file is replaced atomically.
"""
from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from guiderag.errors import WorkbookError
from guiderag.files import BesideFile, save_workbook_beside

from . import urls
from .harvest import LinkRecord

COLUMNS = ("url", "link_text", "category", "reason", "include", "http_status", "title",
           "fetched_at", "content_hash", "href", "auto_category")
REQUIRED = ("url", "include")
SHEET = "urls"
REMOVED_SHEET = "removed from PDFs"
HOW_TO_REVIEW = (
    "One row per link of the table-of-contents page (sheet 'urls'), as the scraper classified it.",
    "include: TRUE = stored as a guideline page, FALSE = not. category/reason: why (auto_category: the "
    "classifier's own verdict).",
    "To correct it, change include (or category) and scrape again with --urls-xlsx pointing at this file: "
    "your edits win, and stay in force on later scrapes.",
    "To add a page the table of contents does not link, add a row with its url and include TRUE.",
    "Learnt by fetching: 'index' = a page that is only a list of links to guide pages (set include TRUE to "
    "keep it anyway); 'duplicate' = another spelling of a page listed above (query string, #fragment, "
    "rel=canonical), with the page it resolved to in the reason; 'printable' = a form to print and fill in "
    "or a print edition (by its link text, or a PDF whose tables are mostly blank fields).",
    "PDF documents are read as lines, each with its PDF page; sheet 'removed from PDFs' lists the lines left "
    "out of their text (running heads and feet, page numbers, the document's own table of contents), "
    "with the reason. A PDF that cannot be read (encrypted, a scan, damaged...) fails with the reason, and "
    "its previous version stays current.",
    "Categories: " + ", ".join(urls.CATEGORIES) + ".",
)
TRUE_WORDS = frozenset({"true", "yes", "y", "1", "x", "○", "はい", "対象"})
FALSE_WORDS = frozenset({"false", "no", "n", "0", "×", "いいえ", "対象外"})


@dataclass(frozen=True)
class Edit:
    """One workbook row as the maintainer left it."""

    url: str
    include: bool | None
    category: str | None
    auto_category: str | None
    link_text: str
    row: int


@dataclass(frozen=True)
class FetchInfo:
    """What the fetch of one page gave, for the workbook's right-hand columns."""

    http_status: int | None = None
    title: str = ""
    fetched_at: str = ""
    content_hash: str = ""
    removed: tuple[tuple[int, str, str], ...] = ()  # a PDF's lines left out: (PDF page, text, why)


def _parse_include(value: object, row: int) -> bool | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    word = str(value).strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise WorkbookError(f"row {row}: include must be TRUE or FALSE, not {value!r}")


def read_edits(path: Path) -> dict[str, Edit]:
    """The rows of an existing URL workbook, by page key (urls.page_key). WorkbookError if malformed."""
    from openpyxl import load_workbook
    from openpyxl.utils.exceptions import InvalidFileException

    path = Path(path)
    try:
        book = load_workbook(path, read_only=True, data_only=True)
    except (InvalidFileException, zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise WorkbookError(
            f"{path} is not a readable .xlsx workbook ({exc.__class__.__name__}: {exc}); "
            "pass the URL workbook a previous scrape wrote, or a new path to start one"
        ) from exc
    try:
        sheet = book[SHEET] if SHEET in book.sheetnames else book.worksheets[0]
        rows = sheet.iter_rows(values_only=True)
        header = next(rows, None)
        names = [str(h).strip().lower() if h is not None else "" for h in (header or ())]
        missing = [c for c in REQUIRED if c not in names]
        if missing:
            raise WorkbookError(
                f"{path}: the first row must name the columns; missing {', '.join(missing)} "
                f"(expected: {', '.join(COLUMNS)})"
            )
        col = {name: i for i, name in reversed(list(enumerate(names))) if name}
        edits: dict[str, Edit] = {}
        for number, values in enumerate(rows, start=2):
            def cell(name: str) -> object:
                i = col.get(name)
                return values[i] if i is not None and i < len(values) else None

            raw_url = cell("url")
            if raw_url is None or not str(raw_url).strip():
                continue
            category = _parse_category(cell("category"), number, path)
            auto = _parse_category(cell("auto_category"), number, path)
            if urls.DUPLICATE in (auto, category):
                continue  # the first spelling's row carries the decision
            try:
                url = urls.normalize_url(str(raw_url).strip())
            except ValueError as exc:
                raise WorkbookError(f"{path} row {number}: {raw_url!r} is not a URL ({exc})") from exc
            if urls.page_key(url) in edits:
                continue
            edits[urls.page_key(url)] = Edit(url=url, include=_parse_include(cell("include"), number), category=category,
                              auto_category=auto, link_text=str(cell("link_text") or ""), row=number)
        return edits
    finally:
        book.close()


def _parse_category(value: object, row: int, path: Path) -> str | None:
    if value is None or not str(value).strip():
        return None
    category = str(value).strip().lower()
    if category not in urls.CATEGORIES:
        raise WorkbookError(
            f"{path} row {row}: unknown category {value!r}; use one of {', '.join(urls.CATEGORIES)}"
        )
    return category


def apply_edits(records: list[LinkRecord], edits: Mapping[str, Edit], *,
                public: Callable[[str], str] = lambda u: u,
                private: Callable[[str], str] = lambda u: u, toc_url: str = "") -> list[LinkRecord]:
    """The classifier's records with the maintainer's hand edits applied (edits win).

    `public` maps a fetched URL to the URL the workbook and store use, `private` back.
    """
    out: list[LinkRecord] = []
    seen: set[str] = set()
    for rec in records:
        key = urls.page_key(public(rec.url))
        edit = edits.get(key) if rec.category != urls.DUPLICATE else None
        seen.add(key)
        out.append(_edited(rec, edit) if edit else rec)
    for key, edit in edits.items():
        url = edit.url
        if key in seen or not edit.include:
            continue
        auto = edit.auto_category
        if auto == urls.CONTENT and edit.category in (None, urls.CONTENT):
            continue  # a page a past scrape found, no longer in the TOC: not a hand edit
        fetched_url = private(url)
        rec = LinkRecord(url=fetched_url, href=url, link_text=edit.link_text, category=urls.CONTENT,
                         reason="added by hand in the workbook", include=True,
                         auto_category=auto or "", hand=True)
        if toc_url and not (urls.is_web_url(fetched_url) and urls.is_same_site(fetched_url, toc_url)):
            rec = rec.with_verdict(urls.OFFSITE, "added by hand in the workbook, but not on the guide's "
                                   "site: not fetched")
        out.append(rec)
    return out


def _edited(rec: LinkRecord, edit: Edit) -> LinkRecord:
    auto = edit.auto_category or rec.auto_category
    auto_include = auto == urls.CONTENT
    if edit.include is not None and edit.include != auto_include:
        category = edit.category if edit.category and edit.category != auto else rec.category
        done = "included" if edit.include else "excluded"
        reason = f"{done} by hand in the workbook (classifier: {rec.reason})"
        return replace(rec, category=category, include=edit.include, reason=reason, hand=True)
    if edit.category and edit.category != auto:
        include = edit.category == urls.CONTENT
        return replace(rec, category=edit.category, include=include,
                       reason=f"category set by hand in the workbook (classifier: {rec.reason})", hand=True)
    return rec


def prepare(path: Path, records: Iterable[LinkRecord], info: Mapping[str, FetchInfo], *,
            public: Callable[[str], str] = lambda u: u) -> BesideFile:
    """Write the workbook to a (locked) temporary file beside `path`; `install` moves it in place."""
    from openpyxl import Workbook
    from openpyxl.styles import Font

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    book = Workbook()
    sheet = book.active
    sheet.title = SHEET
    sheet.append(list(COLUMNS))
    for cell in sheet[1]:
        cell.font = Font(bold=True)
    for rec in records:
        got = info.get(rec.url, FetchInfo()) if rec.category != urls.DUPLICATE else FetchInfo()
        sheet.append([public(rec.url), rec.link_text, rec.category, rec.reason, bool(rec.include),
                      got.http_status, got.title, got.fetched_at, got.content_hash, rec.href,
                      rec.auto_category])
    sheet.freeze_panes = "A2"
    removed = [(public(url), *row) for url, got in info.items() for row in got.removed]
    if removed:
        cut = book.create_sheet(REMOVED_SHEET)
        cut.append(["url", "pdf_page", "text", "why"])
        for cell in cut[1]:
            cell.font = Font(bold=True)
        for row in removed:
            cut.append(list(row))
        for letter, width in zip("ABCD", (60, 9, 70, 45)):
            cut.column_dimensions[letter].width = width
        cut.freeze_panes = "A2"
    notes = book.create_sheet("how to review")
    for line in HOW_TO_REVIEW:
        notes.append([line])
    notes.column_dimensions["A"].width = 110
    for letter, width in zip("ABCDEFGHIJK", (60, 30, 16, 50, 9, 11, 40, 22, 30, 40, 16)):
        sheet.column_dimensions[letter].width = width
    return save_workbook_beside(book, path)


def write(path: Path, records: Iterable[LinkRecord], info: Mapping[str, FetchInfo], **kw: Any) -> None:
    """Write the workbook atomically (temp file + os.replace)."""
    tmp = prepare(path, records, info, **kw)
    try:
        tmp.install()
    except BaseException:
        tmp.discard()
        raise
