"""Real PDF documents made in the tests: a typeset guidebook chapter (reportlab), and the bad
files a scraper meets (encrypted, a scan, damaged, truncated, a bomb, too many pages,
JavaScript, an embedded file). All text here is written for the tests.

`Chapter` lays out its lines itself, as a print typesetter does: a running head and foot
with the printed folio on every page, paragraphs broken into lines at the column's width
(the first line indented by one character), 「・」 list items with a hanging indent, grid
tables (a frame per cell, the header row shaded), headings numbered as questions in a
larger size with a bookmark each, and a paragraph that runs over a page break when the
page is full. Japanese text in reportlab's built-in CID font (HeiseiKakuGo-W5: no font file
needed), where every Japanese character is one em wide, so that a line of COLUMN_CHARS
characters reaches the right edge as justified print does.
"""
from __future__ import annotations

import io
import zlib
from dataclasses import dataclass, field

from reportlab.lib.pagesizes import A4
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfgen import canvas

FONT = "HeiseiKakuGo-W5"
pdfmetrics.registerFont(UnicodeCIDFont(FONT))
BODY = 10.5
LEADING = 18.0
COLUMN_CHARS = 40
LEFT = 60.0
RIGHT = LEFT + COLUMN_CHARS * BODY
TOP = A4[1] - 80
BOTTOM = 80.0
HEADER = "テスト病院 患者さんのためのてびき（試験用）"
COPYRIGHT = "Copyright (C) 2026 Test Hospital. All rights reserved."


def width(text: str, size: float = BODY) -> float:
    return pdfmetrics.stringWidth(text, FONT, size)


def wrap(text: str, room: float, size: float = BODY) -> list[str]:
    """Lines of at most `room` points: Japanese broken anywhere, Latin at a space."""
    lines: list[str] = []
    line = ""
    for ch in text:
        if width(line + ch, size) <= room + 0.01:
            line += ch
            continue
        if ch == " ":
            lines.append(line)
            line = ""
            continue
        cut = line.rfind(" ") if ch.isascii() and ch.isalnum() and line[-1:].isascii() else -1
        if cut > 0:
            lines.append(line[:cut])
            line = line[cut + 1:] + ch
        else:
            lines.append(line)
            line = ch
    if line:
        lines.append(line)
    return lines


@dataclass
class Chapter:
    """A chapter PDF built item by item; `build()` gives its bytes."""

    title: str
    folio_start: int = 1
    items: list[tuple] = field(default_factory=list)

    def question(self, text: str) -> "Chapter":
        self.items.append(("question", text))
        return self

    def heading(self, text: str) -> "Chapter":
        self.items.append(("heading", text))
        return self

    def paragraph(self, text: str) -> "Chapter":
        self.items.append(("paragraph", text))
        return self

    def bullets(self, *items: str) -> "Chapter":
        self.items.append(("bullets", items))
        return self

    def table(self, *rows: tuple[str, ...]) -> "Chapter":
        self.items.append(("table", rows))
        return self

    def new_page(self) -> "Chapter":
        self.items.append(("page",))
        return self

    def build(self, *, compress: bool = True) -> bytes:
        buf = io.BytesIO()
        c = canvas.Canvas(buf, pagesize=A4, pageCompression=1 if compress else 0, invariant=1)
        c.setTitle(self.title)
        state = {"page": 0, "y": TOP}

        def furniture() -> None:
            c.setFont(FONT, 8)
            c.drawString(LEFT, A4[1] - 40, HEADER)
            c.setFont(FONT, 9)
            c.drawCentredString(A4[0] / 2, 36, f"- {self.folio_start + state['page']} -")
            c.setFont(FONT, 7)
            c.drawCentredString(A4[0] / 2, 24, COPYRIGHT)

        def next_page() -> None:
            c.showPage()
            state["page"] += 1
            state["y"] = TOP
            furniture()

        def room(height: float) -> None:
            if state["y"] - height < BOTTOM:
                next_page()

        def line(text: str, x: float, size: float = BODY) -> None:
            room(LEADING)
            c.setFont(FONT, size)
            c.drawString(x, state["y"], text)
            state["y"] -= LEADING

        furniture()
        c.setFont(FONT, 18)
        c.drawString(LEFT, state["y"], self.title)
        c.bookmarkPage("top", fit="XYZ", top=state["y"] + 20)
        c.addOutlineEntry(self.title, "top", level=0)
        state["y"] -= 40
        for n, item in enumerate(self.items):
            kind = item[0]
            if kind == "page":
                next_page()
            elif kind == "question":
                room(3 * LEADING)
                state["y"] -= 8
                key = f"q{n}"
                c.bookmarkPage(key, fit="XYZ", top=state["y"] + 16)
                c.addOutlineEntry(item[1], key, level=1)
                line(item[1], LEFT, 14)
                state["y"] -= 6
            elif kind == "heading":
                room(2 * LEADING)
                state["y"] -= 4
                line(item[1], LEFT, 12)
            elif kind == "paragraph":
                for i, text in enumerate(wrap("\u3000" + item[1] if not item[1][:1].isascii() else item[1],
                                              RIGHT - LEFT)):
                    if i == 0 and text.startswith("\u3000"):
                        line(text[1:], LEFT + BODY)
                    else:
                        line(text, LEFT)
            elif kind == "bullets":
                for entry in item[1]:
                    for i, text in enumerate(wrap(entry, RIGHT - LEFT - BODY)):
                        line(("・" + text) if i == 0 else text, LEFT if i == 0 else LEFT + BODY)
            elif kind == "table":
                self._table(c, state, item[1], room)
        c.showPage()
        c.save()
        return buf.getvalue()

    @staticmethod
    def _table(c: canvas.Canvas, state: dict, rows: tuple[tuple[str, ...], ...], room) -> None:
        cols = len(rows[0])
        cell_w = (RIGHT - LEFT) / cols
        pad = 4.0
        for r, row in enumerate(rows):
            wrapped = [wrap(text, cell_w - 2 * pad) for text in row]
            height = max(len(w) for w in wrapped) * LEADING + 2 * pad
            room(height)
            top = state["y"] + BODY
            if r == 0:
                c.setFillGray(0.85)
                c.rect(LEFT, top - height, RIGHT - LEFT, height, stroke=0, fill=1)
                c.setFillGray(0)
            for i, lines in enumerate(wrapped):
                x = LEFT + i * cell_w
                c.rect(x, top - height, cell_w, height, stroke=1, fill=0)
                c.setFont(FONT, BODY)
                for k, text in enumerate(lines):
                    c.drawString(x + pad, top - pad - BODY - k * LEADING + 2, text)
            state["y"] -= height
        state["y"] -= LEADING


def form(title: str, labels: list[str]) -> bytes:
    """A form to print and fill in: a two-column table of labels and blank fields."""
    chapter = Chapter(title)
    chapter.paragraph("診察の前に、聞きたいことを書き出しておくための用紙です。")
    chapter.table(*[(label, "") for label in labels])
    return chapter.build()


# --- bad files ----------------------------------------------------------------------------
def raw_pdf(objects: list[bytes], *, trailer_extra: bytes = b"") -> bytes:
    """A PDF of these objects (1 0 obj is the catalog), with a correct xref table."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, trailer_extra, xref)
    return bytes(out)


def _stream(data: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s>>\nstream\n" % (len(data), extra) + data + b"\nendstream"


def _page_objects(content: bytes, catalog_extra: bytes = b"") -> list[bytes]:
    return [
        b"<< /Type /Catalog /Pages 2 0 R " + catalog_extra + b">>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        _stream(content),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]


TEXT = b"BT /F1 12 Tf 72 720 Td (This page has a few words of text on it, enough to read.) Tj ET"


def with_javascript() -> bytes:
    objects = _page_objects(TEXT, b"/OpenAction 6 0 R ")
    objects.append(b"<< /S /JavaScript /JS (app.alert\\('hello'\\);) >>")
    return raw_pdf(objects)


def with_hidden_javascript() -> bytes:
    """JavaScript named with #xx escapes, inside a compressed object stream (PDF 1.5)."""
    inner = b"<< /S /J#61vaScript /JS (app.alert\\(1\\)) >>"
    header = b"6 0 "
    body = zlib.compress(header + inner)
    objects = _page_objects(TEXT, b"/OpenAction 6 0 R ")
    objects.append(_stream(body, b"/Type /ObjStm /N 1 /First %d /Filter /FlateDecode " % len(header)))
    return raw_pdf(objects)


def with_embedded_file() -> bytes:
    objects = _page_objects(TEXT, b"/Names << /EmbeddedFiles << /Names [(notes.txt) 6 0 R] >> >> ")
    objects.append(b"<< /Type /Filespec /F (notes.txt) /EF << /F 7 0 R >> >>")
    objects.append(_stream(b"not to be extracted", b"/Type /EmbeddedFile "))
    return raw_pdf(objects)


def bomb(expanded_bytes: int) -> bytes:
    """A page whose content stream inflates from a few kB to `expanded_bytes`."""
    squeeze = zlib.compressobj(1)
    chunk = b" " * (1 << 20)
    parts = [squeeze.compress(chunk) for _ in range(expanded_bytes >> 20)]
    parts.append(squeeze.flush())
    data = b"".join(parts)
    objects = _page_objects(b"")
    objects[3] = _stream(data, b"/Filter /FlateDecode ")
    return raw_pdf(objects)


def encrypted(password: str = "secret") -> bytes:
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4, encrypt=password)
    c.setFont(FONT, BODY)
    c.drawString(LEFT, TOP, "パスワードで保護された文書です。内容は読めません。")
    c.showPage()
    c.save()
    return buf.getvalue()


def scanned() -> bytes:
    """Pages that are only images: what a scanner makes."""
    from PIL import Image, ImageDraw
    from reportlab.lib.utils import ImageReader

    picture = Image.new("L", (400, 300), 255)
    pen = ImageDraw.Draw(picture)
    for y in range(20, 280, 16):
        pen.line((20, y, 380, y), fill=0, width=3)
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    for _ in range(2):
        c.drawImage(ImageReader(picture), 60, 300, width=400, height=300)
        c.showPage()
    c.save()
    return buf.getvalue()


def many_pages(count: int) -> bytes:
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4, pageCompression=1)
    for n in range(count):
        c.setFont("Helvetica", 10)
        c.drawString(72, 720, f"page {n + 1}")
        c.showPage()
    c.save()
    return buf.getvalue()


def damaged() -> bytes:
    return b"%PDF-1.4\n" + bytes(range(256)) * 40 + b"\n%%EOF\n"


def truncated(good: bytes) -> bytes:
    return good[: len(good) // 2]
