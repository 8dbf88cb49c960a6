"""Harvest the links of a table-of-contents page and classify each (content or not, why).

One `LinkRecord` per harvested `<a href>`, in page order: the first spelling of a page is
classified, later spellings of the same page are `duplicate`. Robots.txt is applied by the
caller (it needs the network), through `apply_robots`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable, Iterable

from bs4 import BeautifulSoup, Tag

from . import urls


@dataclass(frozen=True)
class LinkRecord:
    """One link of the TOC (or one row of the URL workbook)."""

    url: str  # normalised
    href: str  # as written in the page
    link_text: str
    category: str
    reason: str
    include: bool  # fetched and stored as a guideline page
    auto_category: str = ""  # what the classifier said, before any hand edit
    hand: bool = False  # include/category set by hand in the workbook: no verdict learnt by fetching overrides it

    def with_verdict(self, category: str, reason: str, include: bool | None = None) -> "LinkRecord":
        return replace(
            self, category=category, reason=reason,
            include=(category == urls.CONTENT) if include is None else include,
        )


def _link_text(anchor: Tag) -> str:
    text = anchor.get_text(" ", strip=True)
    if not text:
        img = anchor.find("img", alt=True)
        text = str((img["alt"] if isinstance(img, Tag) else "") or anchor.get("title", "") or anchor.get("aria-label", ""))
    return re.sub(r"\s+", " ", text).strip()


def harvest(html: str) -> list[tuple[str, str]]:
    """(href, link text) of every `<a href>` of the page, in document order."""
    return _harvest(BeautifulSoup(html, "html.parser"))


def _harvest(soup: BeautifulSoup) -> list[tuple[str, str]]:
    return [(str(a.get("href", "")), _link_text(a)) for a in soup.find_all("a", href=True)]


def _base_url(soup: BeautifulSoup, page_url: str) -> str:
    """The URL relative links resolve against: `<base href>` when the page has one."""
    base = soup.find("base", href=True)
    return urls.normalize_url(str(base["href"]), page_url) if isinstance(base, Tag) else page_url


def classify_links(html: str, toc_url: str) -> list[LinkRecord]:
    """Harvest and classify every link of the TOC page `html` served at `toc_url`."""
    toc = urls.normalize_url(toc_url)
    soup = BeautifulSoup(html, "html.parser")
    base = _base_url(soup, toc_url)
    records: list[LinkRecord] = []
    first_seen: dict[str, str] = {}
    for href, text in _harvest(soup):
        try:
            url = urls.normalize_url(href, base)
            key = urls.page_key(url)
        except ValueError:  # e.g. "http://[broken": kept in the workbook, never fetched
            records.append(LinkRecord(url=href, href=href, link_text=text, category=urls.SCHEME,
                                      reason="malformed URL", include=False, auto_category=urls.SCHEME))
            continue
        if key in first_seen:
            verdict = urls.Verdict(urls.DUPLICATE, f"duplicate of {first_seen[key]!r} (same page: {key})")
        else:
            first_seen[key] = href
            verdict = urls.classify(url, toc, text)
        records.append(
            LinkRecord(url=url, href=href, link_text=text, category=verdict.category,
                       reason=verdict.reason, include=verdict.is_content, auto_category=verdict.category)
        )
    return _printables_when_alone(_widen_to_the_pages_folder(records, toc))


# A TOC folder with fewer content links than this, beside more links outside it, is not
# where the guide lives (the TOC sits apart from its pages).
MIN_GUIDE_LINKS = 3


def _widen_to_the_pages_folder(records: list[LinkRecord], toc: str) -> list[LinkRecord]:
    """When (almost) none of the TOC's links lie under its own folder but many lie
    elsewhere on the site, the guide is the folder that holds most of those: its links
    become content, with a reason saying so; the others stay outside the guide."""
    content = sum(r.category == urls.CONTENT for r in records)
    outside = [r.url for r in records if r.category == urls.OUTSIDE_GUIDE]
    if content >= MIN_GUIDE_LINKS or len(outside) < max(MIN_GUIDE_LINKS, content + 1):
        return records
    folder = urls.majority_folder(outside, MIN_GUIDE_LINKS)
    if folder is None:
        return records
    widened = sum(urls.is_inside_folder(url, folder) for url in outside)
    if widened < 3 * content:  # a small guide beside a bigger news folder stays as it is
        return records
    reason = (f"guide page: outside the TOC's folder {urls.guide_path(toc)}, inside {folder}, "
              f"the folder of most of its links")
    return [
        replace(r.with_verdict(urls.CONTENT, reason), auto_category=urls.CONTENT)
        if r.category == urls.OUTSIDE_GUIDE and urls.is_inside_folder(r.url, folder) else r
        for r in records
    ]


def _printables_when_alone(records: list[LinkRecord]) -> list[LinkRecord]:
    """Links named as print editions are the guide when the TOC links nothing else of it."""
    if any(r.category == urls.CONTENT for r in records) or not any(r.category == urls.PRINTABLE for r in records):
        return records
    reason = "guide document: named as a print edition, but the only guide documents the TOC links"
    return [replace(r.with_verdict(urls.CONTENT, reason), auto_category=urls.CONTENT)
            if r.category == urls.PRINTABLE else r for r in records]


def apply_robots(records: Iterable[LinkRecord], allowed: Callable[[str], bool]) -> list[LinkRecord]:
    """Mark content links that robots.txt disallows (the classifier's own verdict)."""
    out = []
    for rec in records:
        if rec.category == urls.CONTENT and not allowed(rec.url):
            rec = replace(rec.with_verdict(urls.DISALLOWED, "disallowed by robots.txt"),
                          auto_category=urls.DISALLOWED)
        out.append(rec)
    return out
