"""What a page's fetched HTML says about its link: an index of links, or another spelling.

Two verdicts the table of contents alone cannot give, so they are made after fetching
(scraper.run records them in the URL workbook with the reason):

- `index`: a page whose main text is a list of links to other guide pages (a chapter's
  list of questions, a site map) is navigation, not content. Measured on the page's main
  text with its link lists kept (textlines.LinkProfile): at least INDEX_MIN_LINKS links
  to other guide pages, whose text makes up at least INDEX_LINK_SHARE of it. A question
  page with a "related Q&A" box stays far below (about 0.15 on the gastric development
  site, against 0.58 to 0.70 for its chapter indexes). A maintainer can still include
  such a page by hand in the workbook.
- `printable`: a PDF whose ruled tables are largely blank cells is a form to print and
  fill in (a visit memo, a diary sheet), not content (`form_reason`).
- `duplicate`: spellings of one document are one page. A page whose
  `<link rel="canonical">` names another listed spelling is a duplicate of it, when the
  two differ only in query string or fragment or have the same text (a canonical link
  naming some other page, as misconfigured sites do for every page, is ignored). Else,
  spellings that differ only in query string (`q1.html?from=toc`) and have the same
  text are one page: the spelling without a query, or the first listed, is kept.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence
from urllib.parse import urlsplit

from . import urls
from .textlines import LINK_LIST_MIN_LINKS, LinkProfile

INDEX_MIN_LINKS = LINK_LIST_MIN_LINKS
INDEX_LINK_SHARE = 0.5
# A PDF whose ruled tables have at least this many blank cells, making up this share of
# their cells, is a form to print and fill in (受診メモ: 受診日 | ____ ), not content.
FORM_MIN_BLANK_CELLS = 4
FORM_BLANK_SHARE = 0.25


def index_reason(profile: LinkProfile, page_url: str, is_guide_page: Callable[[str], bool]) -> str | None:
    """Why the page at `page_url` is an index page (a list of links to guide pages), or None."""
    base = urls.normalize_url(profile.base, page_url) if profile.base else page_url
    own = urls.page_key(page_url)
    targets: set[str] = set()
    linked = 0
    for href, chars in profile.links:
        try:
            url = urls.normalize_url(href, base)
            key = urls.page_key(url)
        except ValueError:
            continue
        if not urls.is_web_url(url) or key == own or not is_guide_page(url):
            continue
        targets.add(key)
        linked += chars
    if len(targets) < INDEX_MIN_LINKS or profile.text_chars <= 0:
        return None
    share = linked / profile.text_chars
    if share < INDEX_LINK_SHARE:
        return None
    return (f"index page: links to {len(targets)} guide pages make up {share:.0%} of its text "
            "(a list of links, not content; set include=TRUE to keep it)")


def form_reason(table_cells: int, blank_cells: int) -> str | None:
    """Why a PDF with these table cells is a form to fill in, or None."""
    if blank_cells < FORM_MIN_BLANK_CELLS or blank_cells < FORM_BLANK_SHARE * table_cells:
        return None
    return (f"a form to print and fill in: {blank_cells} of the {table_cells} cells of its tables are blank "
            "fields (not guideline content; set include=TRUE to keep it)")


@dataclass(frozen=True)
class Spelling:
    """One fetched link of the table of contents, as the store would keep it."""

    url: str  # the URL it would be stored under
    content_hash: str
    canonical: str | None = None  # its <link rel="canonical">, resolved (same site only)


def duplicates(spellings: Sequence[Spelling]) -> dict[str, tuple[str, str]]:
    """url -> (the url of the page it spells, why) for every spelling that is a duplicate."""
    by_key: dict[str, Spelling] = {}
    for s in spellings:
        by_key.setdefault(urls.page_key(s.url), s)
    dup: dict[str, tuple[str, str]] = {}
    for s in spellings:
        if not s.canonical or urls.page_key(s.canonical) == urls.page_key(s.url):
            continue
        target = by_key.get(urls.page_key(s.canonical))
        if target is None or target is s:
            continue
        if urls.document_key(s.url) == urls.document_key(target.url) or s.content_hash == target.content_hash:
            dup[s.url] = (target.url, f"duplicate of {target.url} (its rel=canonical link names that page)")
    # A canonical target that is itself a duplicate spells what that one spells.
    for url, (target_url, why) in list(dup.items()):
        if target_url in dup:
            dup[url] = (dup[target_url][0], why)
    groups: dict[tuple[str, str], list[tuple[int, Spelling]]] = {}
    for i, s in enumerate(spellings):
        if s.url not in dup:
            groups.setdefault((urls.document_key(s.url), s.content_hash), []).append((i, s))
    for members in groups.values():
        if len(members) < 2:
            continue
        _, keep = min(members, key=lambda m: (bool(urlsplit(m[1].url).query), m[0]))
        for _, s in members:
            if s is not keep:
                dup[s.url] = (keep.url, f"duplicate of {keep.url} (the same text under another query string)")
    return dup
