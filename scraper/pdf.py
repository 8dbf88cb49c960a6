"""A PDF document's text as lines, read in a worker process with bounded memory and time.

`read_pdf(data, config) -> PdfText` (config: the scraper's ScraperConfig) is the scraper's whole view of a PDF. The bytes go
to a fresh process (`python -m guiderag.scraper.pdf`) that limits its own address space
(config.pdf_memory_mb) and CPU time, scans the file (scraper.pdfscan), opens it with
PDFium (scraper.pdfgeometry) and lays out its lines (scraper.pdflines); the lines come
back as JSON. Whatever goes wrong in there (a decompression bomb PDFium inflates in
memory, a file that crashes the library, one that takes too long) ends that process, not
the scrape: the document is refused with the reason (PdfRefusedError) and the run goes on
with its previous version current.

Refused, each with a reason a maintainer can act on: larger than pdf_max_bytes, not a PDF,
truncated or damaged, a decompression bomb, JavaScript, launch actions or embedded files
(never run or extracted), encrypted (a password to open it, or text extraction not
permitted), more than pdf_max_pages pages, no text layer (a scan: OCR is not supported),
and a worker that ran out of memory, crashed or ran out of time.
"""
from __future__ import annotations

import json
import resource
import subprocess
import sys
from dataclasses import asdict
from typing import Any, Sequence

from guiderag.errors import PdfRefusedError
from guiderag.scopes import ScraperConfig
from guiderag.store.structure import HEADING_MAX_CHARS

from .pdflines import PdfText

# Fewer characters than this per page (and in all) is no text layer: a scanned document.
SCAN_CHARS_PER_PAGE = 5
SCAN_MIN_CHARS = 20
# PDF permission bits (ISO 32000 table 22): copy or extract text, and extract for accessibility.
PERMIT_COPY = 1 << 4
PERMIT_EXTRACT = 1 << 9


def read_pdf(data: bytes, config: ScraperConfig, *, known_running: Sequence[str] = ()) -> PdfText:
    """The document's lines, pages, sections and removed lines; PdfRefusedError when it is
    not read (see the module docstring). `known_running`: running heads and feet of the
    guide's other PDFs (a one-page document cannot show they repeat)."""
    from .textlines import DEFAULT_SPLIT_OVER  # here, not above: the worker needs no HTML parser

    if len(data) > config.pdf_max_bytes:
        raise PdfRefusedError("too_large", f"larger than the PDF size limit ({len(data)} > {config.pdf_max_bytes} "
                                           "bytes, GUIDERAG_PDF_MAX_BYTES)")
    limits = {
        "max_pages": config.pdf_max_pages,
        "max_stream_bytes": config.pdf_max_stream_bytes,
        "memory_mb": config.pdf_memory_mb,
        "cpu_s": int(config.pdf_timeout_s) + 1,
        # the same line and heading rules as an HTML page's (constants, not settings)
        "split_over_chars": DEFAULT_SPLIT_OVER,
        "heading_max_chars": HEADING_MAX_CHARS,
        "known_running": list(known_running),
    }
    try:
        proc = subprocess.run([sys.executable, "-m", "guiderag.scraper.pdf", json.dumps(limits)], input=data,
                              capture_output=True, timeout=config.pdf_timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise PdfRefusedError("timeout", f"reading it took longer than {config.pdf_timeout_s:g} s "
                                         "(GUIDERAG_PDF_TIMEOUT_S); too complex, or damaged") from None
    reply: dict[str, Any] = {}
    try:
        reply = json.loads(proc.stdout.decode("utf-8")) if proc.stdout else {}
    except (ValueError, UnicodeDecodeError):
        reply = {}
    if reply.get("ok"):
        text = reply["text"]
        return PdfText(title=text["title"], lines=list(text["lines"]),
                       line_pages=[tuple(p) for p in text["line_pages"]],
                       sections=[(int(n), str(t)) for n, t in text["sections"]],
                       removed=[(int(p), str(t), str(w)) for p, t, w in text["removed"]],
                       page_count=int(text["page_count"]), table_cells=int(text["table_cells"]),
                       blank_cells=int(text["blank_cells"]), chars=int(text["chars"]))
    if reply.get("code"):
        raise PdfRefusedError(str(reply["code"]), str(reply.get("reason", "refused")))
    how = f"was killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exited with {proc.returncode}"
    raise PdfRefusedError("crashed", f"the PDF reader {how} without an answer: it may have needed more than "
                                     f"{config.pdf_memory_mb} MB (GUIDERAG_PDF_MEMORY_MB; a decompression "
                                     "bomb?) or the file is damaged")


# --- the worker (this module run as a program) -------------------------------------------
def _limit(memory_mb: int, cpu_s: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))


def _read(data: bytes, limits: dict[str, Any]) -> PdfText:
    from . import pdfgeometry, pdflines, pdfscan

    try:
        pdfscan.scan(data, max_stream_bytes=int(limits["max_stream_bytes"]))
    except pdfscan.PdfScanError as exc:
        raise PdfRefusedError(exc.code, str(exc)) from None
    try:
        doc = pdfgeometry.open_document(data)
    except pdfgeometry.PdfReadError as exc:
        raise PdfRefusedError(exc.code, str(exc)) from None
    encrypted, permits = pdfgeometry.permissions(doc)
    if encrypted and not permits & (PERMIT_COPY | PERMIT_EXTRACT):
        raise PdfRefusedError("encrypted", "encrypted, and its permissions do not allow extracting its text")
    scripts, files = pdfgeometry.javascript_and_attachments(doc)
    if scripts or files:
        what = ", ".join(w for n, w in ((scripts, "JavaScript"), (files, "embedded files")) if n)
        raise PdfRefusedError("active", f"it contains {what}; guiderag never runs or extracts those, and does "
                                        "not read such a file")
    pages = len(doc)
    if pages > int(limits["max_pages"]):
        raise PdfRefusedError("too_many_pages", f"{pages} pages, more than the {limits['max_pages']} a PDF may have "
                                                "(GUIDERAG_PDF_MAX_PAGES)")
    if pages == 0:
        raise PdfRefusedError("damaged", "damaged: it has no pages")
    geo = pdfgeometry.read_geometry(doc)
    chars = sum(1 for pg in geo.pages for g in pg.glyphs if not g.text.isspace())
    if chars < max(SCAN_MIN_CHARS, SCAN_CHARS_PER_PAGE * pages):
        raise PdfRefusedError("scanned", f"no text layer ({chars} characters on {pages} pages): a scanned "
                                         "document, whose text is only an image; OCR is not supported")
    return pdflines.read_lines(geo, split_over_chars=int(limits["split_over_chars"]),
                               heading_max_chars=int(limits["heading_max_chars"]),
                               known_running=limits.get("known_running", ()))


def _main(argv: list[str]) -> int:
    limits = json.loads(argv[1])
    try:
        _limit(int(limits["memory_mb"]), int(limits["cpu_s"]))
        data = sys.stdin.buffer.read()
        text = _read(data, limits)
        reply: dict[str, Any] = {"ok": True, "text": asdict(text)}
    except PdfRefusedError as exc:
        reply = {"ok": False, "code": exc.code, "reason": str(exc)}
    except MemoryError:
        reply = {"ok": False, "code": "crashed", "reason": f"reading it needed more than {limits['memory_mb']} MB "
                 "of memory (GUIDERAG_PDF_MEMORY_MB): a decompression bomb, or far too complex"}
    out = json.dumps(reply, ensure_ascii=False).encode("utf-8")
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
