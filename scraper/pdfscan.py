"""What a PDF file holds besides text, found without a PDF library: the checks made before
PDFium reads a byte of it (in the PDF worker, scraper.pdf).

- the %PDF- signature and the %%EOF end marker (a file cut short is refused: its last
  pages, or its cross-reference table, are missing);
- every Flate stream (after ASCII85 or hex, when those come first) decompressed with a
  bound (`max_stream_bytes`): a stream expanding beyond it is a decompression bomb,
  refused before PDFium inflates it in memory;
- the names that mark active or embedded content, in the file and inside its compressed
  object streams (PDF 1.5 keeps dictionaries there): JavaScript (/JavaScript, /JS),
  launch actions (/Launch), embedded files (/EmbeddedFile, /EmbeddedFiles, /FileAttachment)
  and rich media. Such a file is refused, and nothing of it is executed or extracted.

Names are compared after their #xx escapes are decoded (/J#61vaScript is /JavaScript).
Streams of an encrypted file cannot be inflated here; PDFium, under the worker's memory
limit, is their check.
"""
from __future__ import annotations

import base64
import re
import zlib
from dataclasses import dataclass

SIGNATURE = b"%PDF-"
SIGNATURE_WITHIN = 1024
EOF_MARKER = b"%%EOF"
EOF_WITHIN = 2048
CHUNK = 1 << 16

STREAM = re.compile(rb"\bobj\b(.{0,2000}?)\bstream\r?\n", re.DOTALL)
END_STREAM = b"endstream"
FILTERS = re.compile(rb"/Filter\s*(\[[^\]]*\]|/[A-Za-z0-9]+)")
FLATE_NAMES = (b"FlateDecode", b"Fl")
TEXT_FILTERS = {b"ASCII85Decode": "a85", b"A85": "a85", b"ASCIIHexDecode": "hex", b"AHx": "hex"}
OBJECT_STREAM = re.compile(rb"/Type\s*/ObjStm\b")
NAME = re.compile(rb"/[A-Za-z#][^\s/<>\[\]()%{}]{1,30}")
ESCAPE = re.compile(rb"#([0-9A-Fa-f]{2})")
ACTIVE_NAMES = {
    b"/JavaScript": "JavaScript",
    b"/JS": "JavaScript",
    b"/Launch": "an action that launches a program",
    b"/EmbeddedFile": "embedded files",
    b"/EmbeddedFiles": "embedded files",
    b"/FileAttachment": "embedded files",
    b"/RichMedia": "embedded rich media",
}


class PdfScanError(Exception):
    """The file is refused before it is read: `code` names the kind, the message why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ScanResult:
    streams: int
    inflated_bytes: int


def is_pdf(data: bytes) -> bool:
    """The %PDF- signature near the start (some files have bytes before it)."""
    return SIGNATURE in data[:SIGNATURE_WITHIN]


def _names(data: bytes) -> set[str]:
    found = set()
    for match in NAME.finditer(data):
        name = match.group(0)
        if b"#" in name:
            name = ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), name)
        what = ACTIVE_NAMES.get(name)
        if what:
            found.add(what)
    return found


def _filters(header: bytes) -> list[bytes]:
    match = FILTERS.search(header)
    return re.findall(rb"/([A-Za-z0-9]+)", match.group(1)) if match else []


def _unwrap(raw: bytes, filters: list[bytes]) -> bytes | None:
    """The stream's bytes with the text encodings before its Flate filter undone (ASCII85 and
    hex shrink what they decode); None when another filter comes first."""
    for name in filters:
        if name in FLATE_NAMES:
            return raw
        kind = TEXT_FILTERS.get(name)
        try:
            if kind == "a85":
                body = raw.strip()
                body = body[2:] if body.startswith(b"<~") else body
                raw = base64.a85decode(body if body.endswith(b"~>") else body + b"~>", adobe=True)
            elif kind == "hex":
                raw = bytes.fromhex(re.sub(rb"[^0-9A-Fa-f]", b"", raw.split(b">", 1)[0]).decode("ascii"))
            else:
                return None
        except ValueError:
            return None
    return None


def _inflate(raw: bytes, limit: int) -> tuple[bytes | None, int]:
    """(the stream's bytes inflated, or None when they are not valid Flate data; how many
    bytes it inflated to). PdfScanError when that exceeds `limit`."""
    inflater = zlib.decompressobj()
    out = bytearray()
    pending = raw
    try:
        while pending and not inflater.eof:
            piece = inflater.decompress(pending, CHUNK)
            out.extend(piece)
            if len(out) > limit:
                raise PdfScanError(
                    "bomb", f"a decompression bomb: one of its streams expands beyond {limit // 1_000_000} MB "
                            f"(from {len(raw)} bytes)")
            pending = inflater.unconsumed_tail
            if not piece and not pending:
                break
    except zlib.error:
        return None, len(out)
    return bytes(out), len(out)


def scan(data: bytes, *, max_stream_bytes: int) -> ScanResult:
    """Check the file as the module docstring says; PdfScanError when it is refused."""
    if not is_pdf(data):
        raise PdfScanError("not_pdf", "not a PDF file (no %PDF- signature at its start)")
    if EOF_MARKER not in data[-EOF_WITHIN:]:
        raise PdfScanError("truncated", "truncated: the file ends without the %%EOF marker (the download "
                                        "was cut short, or the file is damaged)")
    active: set[str] = set()
    streams = inflated = 0
    pos = 0
    while True:
        match = STREAM.search(data, pos)
        if match is None:
            active |= _names(data[pos:])
            break
        start = match.end()
        end = data.find(END_STREAM, start)
        end = len(data) if end < 0 else end
        active |= _names(data[pos:start])  # the objects' dictionaries, never stream bytes
        header = match.group(1)
        compressed = _unwrap(data[start:end], _filters(header))
        if compressed is not None:
            streams += 1
            body, size = _inflate(compressed, max_stream_bytes)
            inflated += size
            if body is not None and OBJECT_STREAM.search(header):
                active |= _names(body)
        pos = end + len(END_STREAM)
    if active:
        raise PdfScanError("active", f"it contains {', '.join(sorted(active))}; guiderag never runs or "
                                     "extracts those, and does not read such a file")
    return ScanResult(streams=streams, inflated_bytes=inflated)
