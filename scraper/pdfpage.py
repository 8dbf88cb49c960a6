"""A fetched PDF as the store keeps it: a page of lines with their PDF pages, or the
reason it is not one (refused, or a form to print).

`PdfReader(config).read(result, link, public_url)` reads the bytes through the worker
(scraper.pdf), once per file in a round (two spellings of one file, ch3.pdf and
ch3.pdf?v=2, are read once and found duplicates by their equal content hash), and judges
a form by its blank fields (scraper.postfetch.form_reason).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from guiderag.errors import PdfRefusedError
from guiderag.scopes import ScraperConfig
from guiderag.store.layout import PdfLayout
from guiderag.store.pages import FetchedPage

from . import postfetch
from .fetch import FetchResult
from .harvest import LinkRecord
from .pdf import read_pdf
from .pdflines import PdfText


@dataclass(frozen=True)
class PdfRead:
    """One fetched PDF: the page to store, or why not."""

    page: FetchedPage | None = None
    refused: str = ""  # not read: why (the page fails; its previous version stays current)
    printable: str = ""  # read, but a form to print and fill in: why


class PdfReader:
    """Reads the PDFs of one scrape or check round."""

    def __init__(self, config: ScraperConfig) -> None:
        self.config = config
        self._done: dict[str, PdfText | PdfRefusedError] = {}
        self._running: dict[str, None] = {}  # running heads and feet met so far, in order

    def read(self, result: FetchResult, link: LinkRecord, public: str) -> PdfRead:
        data = result.pdf or b""
        digest = hashlib.sha256(data).hexdigest()
        got = self._done.get(digest)
        if got is None:
            try:
                got = read_pdf(data, self.config, known_running=list(self._running))
            except PdfRefusedError as exc:
                got = exc
            self._done[digest] = got
            if not isinstance(got, PdfRefusedError):
                self._running.update((text, None) for _, text, why in got.removed if why.startswith("running"))
        if isinstance(got, PdfRefusedError):
            return PdfRead(refused=f"PDF not read: {got}")
        title = got.title or link.link_text or unquote(urlsplit(public).path.rsplit("/", 1)[-1])
        layout = PdfLayout(line_pages=tuple(got.line_pages), sections=tuple(got.sections),
                           page_count=got.page_count, sha256="sha256:" + digest, document_title=title,
                           removed=tuple(got.removed))
        page = FetchedPage(url=public, title=title, lines=tuple(got.lines), fetched_at=result.fetched_at,
                           etag=result.etag, last_modified=result.last_modified, http_status=result.status or 200,
                           pdf=layout)
        return PdfRead(page=page, printable=postfetch.form_reason(got.table_cells, got.blank_cells) or "")
