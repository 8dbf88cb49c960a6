"""What a PDF draws, read with PDFium (pypdfium2): glyphs with their boxes and fonts, ruling
lines and rectangles, the outline (bookmarks) and the document's facts.

This is the only module that imports pypdfium2, and it runs inside the PDF worker process
(scraper.pdf), never in the scraper's own process: a damaged or hostile file can exhaust
that process's memory limit or crash it, and the scrape only sees a refusal.

Coordinates are PDF points with y growing upwards, as PDFium gives them. A glyph's box is
PDFium's loose box (advance width by the font's ascent and descent), so the glyphs of one
line touch and a line's right end is where its last character ends. Nothing here decides
what is a line, a heading or a table: scraper.pdflines does, from these facts alone.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field, replace

import pypdfium2 as pdfium
import pypdfium2.raw as raw

BOLD_WEIGHT = 600  # PDFium's font weight from which a glyph counts as bold
FORCE_BOLD_FLAG = 1 << 18  # the font descriptor's ForceBold flag
BOLD_NAME = ("bold", "heavy", "black", "-w6", "-w7", "-w8", "-w9", "demi", "semibold")
RULE_MAX_THICKNESS = 2.5  # a filled or stroked path thinner than this is a ruling line
RULE_MIN_LENGTH = 4.0


class PdfReadError(Exception):
    """PDFium could not open or read the file: the message says why, for a maintainer."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Glyph:
    """One character as drawn: its text, loose box, font size, fill colour and weight."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    size: float
    color: int  # 0xRRGGBB
    bold: bool
    generated: bool  # a space PDFium inferred from a gap, not a character of the file


@dataclass(frozen=True)
class Rule:
    """A ruling line: horizontal (y0 == y1) or vertical (x0 == x1), in page coordinates."""

    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def horizontal(self) -> bool:
        return abs(self.y1 - self.y0) <= abs(self.x1 - self.x0)


@dataclass
class PageGeometry:
    number: int  # 1-based
    width: float
    height: float
    glyphs: list[Glyph] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)


@dataclass(frozen=True)
class OutlineEntry:
    """A bookmark: its level (0 = top), title, 1-based page and the y it points at (None: the page)."""

    level: int
    title: str
    page: int
    top: float | None


@dataclass
class Geometry:
    pages: list[PageGeometry]
    outline: list[OutlineEntry]
    metadata_title: str
    page_count: int


def open_document(data: bytes) -> pdfium.PdfDocument:
    """The PDF, or PdfReadError saying why PDFium cannot open it (a password, damage)."""
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError:
        code = raw.FPDF_GetLastError()
        if code == raw.FPDF_ERR_PASSWORD:
            raise PdfReadError("encrypted", "encrypted: it needs a password to open") from None
        if code == raw.FPDF_ERR_SECURITY:
            raise PdfReadError("encrypted", "encrypted with a security handler PDFium does not support") from None
        if code == raw.FPDF_ERR_FORMAT:
            raise PdfReadError("damaged", "damaged: not a readable PDF (its structure is broken)") from None
        raise PdfReadError("damaged", f"damaged: PDFium cannot open it (error {code})") from None


def permissions(doc: pdfium.PdfDocument) -> tuple[bool, int]:
    """(encrypted, the permission bits P of its encryption dictionary)."""
    revision = raw.FPDF_GetSecurityHandlerRevision(doc.raw)
    return revision != -1, int(raw.FPDF_GetDocPermissions(doc.raw)) & 0xFFFFFFFF


def javascript_and_attachments(doc: pdfium.PdfDocument) -> tuple[int, int]:
    """Document-level JavaScript actions and embedded files, as PDFium counts them."""
    return int(raw.FPDFDoc_GetJavaScriptActionCount(doc.raw)), int(raw.FPDFDoc_GetAttachmentCount(doc.raw))


def read_geometry(doc: pdfium.PdfDocument) -> Geometry:
    """Every page's glyphs and rules, the outline and the metadata title."""
    pages = [_page(doc, i) for i in range(len(doc))]
    return Geometry(pages=pages, outline=_outline(doc), metadata_title=_meta(doc, "Title"), page_count=len(doc))


def _meta(doc: pdfium.PdfDocument, key: str) -> str:
    try:
        return str(doc.get_metadata_value(key) or "").strip()
    except (pdfium.PdfiumError, KeyError, ValueError):
        return ""


def _outline(doc: pdfium.PdfDocument) -> list[OutlineEntry]:
    out: list[OutlineEntry] = []
    try:
        for bm in doc.get_toc(max_depth=8):
            dest = bm.get_dest()
            if dest is None:
                continue
            index = dest.get_index()
            if index is None or index < 0:
                continue
            top: float | None = None
            mode, view = dest.get_view()
            if mode == raw.PDFDEST_VIEW_XYZ and len(view) >= 2 and view[1]:
                top = float(view[1])
            elif mode in (raw.PDFDEST_VIEW_FITH, raw.PDFDEST_VIEW_FITBH) and view:
                top = float(view[0])
            title = " ".join((bm.get_title() or "").split())
            if title:
                out.append(OutlineEntry(level=int(bm.level), title=title, page=int(index) + 1, top=top))
    except pdfium.PdfiumError:
        return out
    return out


def _page(doc: pdfium.PdfDocument, index: int) -> PageGeometry:
    page = doc[index]
    try:
        width, height = page.get_size()
        geo = PageGeometry(number=index + 1, width=float(width), height=float(height))
        textpage = page.get_textpage()
        try:
            glyphs, owners = _glyphs(textpage)
        finally:
            textpage.close()
        geo.glyphs = _restore_repeats(page, glyphs, owners)
        geo.rules = _rules(page)
        return geo
    finally:
        page.close()


def _glyphs(textpage: pdfium.PdfTextPage) -> tuple[list[Glyph], list[int]]:
    """The page's characters in PDFium's reading order, and the text object of each."""
    tp = textpage.raw
    count = raw.FPDFText_CountChars(tp)
    box = raw.FS_RECTF()
    r, g, b, a = (ctypes.c_uint() for _ in range(4))
    flags = ctypes.c_int()
    name = ctypes.create_string_buffer(128)
    fonts: dict[int, bool] = {}  # text object address -> bold
    out: list[Glyph] = []
    owners: list[int] = []
    for i in range(count):
        code = raw.FPDFText_GetUnicode(tp, i)
        if code in (0, 0x0D, 0x0A, 0xFFFE, 0xFFFF):
            continue
        text = chr(code)
        if not raw.FPDFText_GetLooseCharBox(tp, i, ctypes.byref(box)):
            continue
        size = float(raw.FPDFText_GetFontSize(tp, i))
        raw.FPDFText_GetFillColor(tp, i, ctypes.byref(r), ctypes.byref(g), ctypes.byref(b), ctypes.byref(a))
        obj = raw.FPDFText_GetTextObject(tp, i)
        key = ctypes.cast(obj, ctypes.c_void_p).value or 0
        bold = fonts.get(key)
        if bold is None:
            weight = raw.FPDFText_GetFontWeight(tp, i)
            raw.FPDFText_GetFontInfo(tp, i, name, len(name), ctypes.byref(flags))
            font = name.value.decode("latin-1", "replace").lower()
            bold = weight >= BOLD_WEIGHT or bool(flags.value & FORCE_BOLD_FLAG) or any(m in font for m in BOLD_NAME)
            fonts[key] = bold
        out.append(Glyph(
            text=text, x0=float(box.left), y0=float(box.bottom), x1=float(box.right), y1=float(box.top),
            size=size, color=(r.value << 16) | (g.value << 8) | b.value, bold=bold,
            generated=bool(raw.FPDFText_IsGenerated(tp, i) == 1),
        ))
        owners.append(key)
    return out, owners


REPEAT_LOOKBACK = 5  # PDFium compares a text object with the few drawn before it


def _restore_repeats(page: pdfium.PdfPage, glyphs: list[Glyph], owners: list[int]) -> list[Glyph]:
    """PDFium's text page leaves out a text object that repeats one of the few drawn just
    before it (its guard against fake bold, text drawn twice a hair apart), judged by a
    tolerance that grows with the object's width: two identical long lines a paragraph
    apart are one to it. Such an object is put back here, as a copy of the glyphs of the
    object it repeats (same text, same size), moved to its own place."""
    by_owner: dict[int, list[int]] = {}
    for i, key in enumerate(owners):
        by_owner.setdefault(key, []).append(i)
    inserts: dict[int, list[Glyph]] = {}  # after glyph index -> glyphs
    recent: list[tuple[tuple[float, ...], list[Glyph]]] = []  # objects drawn, with their glyphs
    after = -1  # the glyph a restored object goes after: the last of the object before it
    for obj in page.get_objects(filter=[raw.FPDF_PAGEOBJ_TEXT], max_depth=4):
        key = ctypes.cast(obj.raw, ctypes.c_void_p).value or 0
        try:
            bounds = tuple(float(v) for v in obj.get_bounds())
        except pdfium.PdfiumError:
            continue
        if key in by_owner:
            recent = [*recent, (bounds, [glyphs[i] for i in by_owner[key]])][-REPEAT_LOOKBACK:]
            after = by_owner[key][-1]
            continue
        width, height = bounds[2] - bounds[0], bounds[3] - bounds[1]
        if width <= 0:
            continue
        for (x0, y0, x1, y1), theirs in reversed(recent):
            if abs((x1 - x0) - width) <= 0.5 and abs((y1 - y0) - height) <= 0.5:
                dx, dy = bounds[0] - x0, bounds[1] - y0
                copy = [replace(g, x0=g.x0 + dx, x1=g.x1 + dx, y0=g.y0 + dy, y1=g.y1 + dy) for g in theirs]
                inserts.setdefault(after, []).extend(copy)
                recent = [*recent, (bounds, copy)][-REPEAT_LOOKBACK:]
                break
    if not inserts:
        return glyphs
    out: list[Glyph] = list(inserts.get(-1, ()))
    for i, g in enumerate(glyphs):
        out.append(g)
        out.extend(inserts.get(i, ()))
    return out


def _rules(page: pdfium.PdfPage) -> list[Rule]:
    """Ruling lines: thin paths, and the four edges of stroked rectangles."""
    out: list[Rule] = []
    fill_mode, stroke = ctypes.c_int(), ctypes.c_int()
    line_width = ctypes.c_float()
    for obj in page.get_objects(filter=[raw.FPDF_PAGEOBJ_PATH], max_depth=4):
        try:
            x0, y0, x1, y1 = (float(v) for v in obj.get_bounds())
        except pdfium.PdfiumError:
            continue
        raw.FPDFPath_GetDrawMode(obj.raw, ctypes.byref(fill_mode), ctypes.byref(stroke))
        if stroke.value and raw.FPDFPageObj_GetStrokeWidth(obj.raw, ctypes.byref(line_width)):
            half = max(0.0, float(line_width.value)) / 2  # the bounds take in the stroke's width
            if x1 - x0 > 2 * half and y1 - y0 > 2 * half:
                x0, y0, x1, y1 = x0 + half, y0 + half, x1 - half, y1 - half
        w, h = x1 - x0, y1 - y0
        if h <= RULE_MAX_THICKNESS and w >= RULE_MIN_LENGTH:
            y = (y0 + y1) / 2
            out.append(Rule(x0, y, x1, y))
        elif w <= RULE_MAX_THICKNESS and h >= RULE_MIN_LENGTH:
            x = (x0 + x1) / 2
            out.append(Rule(x, y0, x, y1))
        elif stroke.value and _is_rectangle(obj):
            out += [Rule(x0, y0, x1, y0), Rule(x0, y1, x1, y1), Rule(x0, y0, x0, y1), Rule(x1, y0, x1, y1)]
    return out


def _is_rectangle(obj: pdfium.PdfObject) -> bool:
    """A path of one closed rectangle (re, or four lines), corners on the axes."""
    n = raw.FPDFPath_CountSegments(obj.raw)
    if not 4 <= n <= 6:
        return False
    x, y = ctypes.c_float(), ctypes.c_float()
    xs, ys = set(), set()
    for i in range(n):
        seg = raw.FPDFPath_GetPathSegment(obj.raw, i)
        if raw.FPDFPathSegment_GetType(seg) == raw.FPDF_SEGMENT_BEZIERTO:
            return False
        raw.FPDFPathSegment_GetPoint(seg, ctypes.byref(x), ctypes.byref(y))
        xs.add(round(x.value, 1))
        ys.add(round(y.value, 1))
    return len(xs) <= 2 and len(ys) <= 2
