"""What the store holds, as values: a page version, a fetched page, a guideline, what a
scrape changed; and the content hash that tells two texts apart."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from guiderag.clock import utc_now
from guiderag.guideline import DEFAULT_GUIDELINE

from .layout import PdfLayout


def content_hash(title: str, lines: Sequence[str], pdf: PdfLayout | None = None) -> str:
    """Hash of what a reader sees: the title and the text lines, not the raw HTML; for a
    PDF also where each line is printed and the file's bytes (PdfLayout.digest_parts)."""
    parts: list[Any] = [title, list(lines)]
    if pdf is not None:
        parts.append(pdf.digest_parts())
    digest = hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8"))
    return "sha256:" + digest.hexdigest()


@dataclass(frozen=True)
class PageVersion:
    """One stored version of one page: what retrieval indexes and answers cite."""

    page_id: int
    url: str
    title: str
    version: int
    fetched_at: str
    content_hash: str
    lines: tuple[str, ...]
    etag: str | None = None
    last_modified: str | None = None
    removed: bool = False
    guideline: str = DEFAULT_GUIDELINE  # the id of the guideline the page belongs to
    pdf: PdfLayout | None = None  # a PDF document: the pages of its lines, its sections

    def line(self, number: int) -> str:
        """Line `number`, counted from 1 as in citations."""
        return self.lines[number - 1]

    def summary(self) -> dict[str, Any]:
        """The page as `guiderag pages --json` and `GET /v1/pages` list it."""
        out: dict[str, Any] = {
            "url": self.url, "title": self.title, "version": self.version, "fetched_at": self.fetched_at,
            "content_hash": self.content_hash, "lines": len(self.lines), "removed": self.removed,
            "guideline": self.guideline,
        }
        if self.pdf is not None:  # a PDF document: its pages and sections
            out.update(pdf_pages=self.pdf.page_count, sections=len(self.pdf.sections))
        return out


@dataclass(frozen=True)
class FetchedPage:
    """A page the scraper fetched in this run (or found not modified: `not_modified`)."""

    url: str
    title: str = ""
    lines: tuple[str, ...] = ()
    fetched_at: str = field(default_factory=utc_now)
    etag: str | None = None
    last_modified: str | None = None
    http_status: int = 200
    not_modified: bool = False
    pdf: PdfLayout | None = None  # a PDF document: the pages of its lines, its sections


@dataclass(frozen=True)
class Guideline:
    """One guideline of the store: a table of contents and the pages scraped from it."""

    id: str
    title: str
    toc_url: str | None
    created_at: str
    removed_at: str | None = None

    @property
    def label(self) -> str:
        """What to call it for a reader: its title, else its id."""
        return self.title or self.id

    @property
    def removed(self) -> bool:
        return self.removed_at is not None


@dataclass
class RunSummary:
    """What a scrape changed, by URL."""

    run_id: int
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        return {
            "added": len(self.added),
            "changed": len(self.changed),
            "unchanged": len(self.unchanged),
            "removed": len(self.removed),
            "failed": len(self.failed),
        }

    @property
    def corpus_changed(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def describe(self) -> str:
        c = self.counts()
        text = ", ".join(f"{k} {v}" for k, v in c.items())
        if not self.corpus_changed:
            text += " (no page changed: no new version stored)"
        return text
