"""A page's text as lines: the unit of citation.

One line per heading, paragraph, list item, definition term/description or table row
(cells joined by CELL_SEPARATOR), in reading order. Boilerplate (script, style, nav,
header, footer, aside, forms...), hidden elements (`hidden`, `aria-hidden="true"`, inline
`display:none` / `visibility:hidden`, classes the page's own `<style>` hides, tooltips,
screen-reader-only text) and breadcrumbs are dropped, so that no menu or glossary text
leaks into a guideline sentence. The text of `<main>` / `[role=main]` / the single
`<article>` is used when present, else the body minus boilerplate: blocks whose class or
id names site chrome (sidebar, sideMenu, gNavi, localNav, subContents...) and blocks that
are mostly links (menus and tables of contents, whatever their class).

Lines are shown verbatim later: no NFKC, only whitespace is collapsed (a line break in
the source between two Japanese characters is removed, as browsers do). A block longer
than `split_over_chars` becomes one line per sentence. Same HTML text, same lines.

`read_page` also reports what the scraper decides after fetching (scraper.postfetch): the
page's `<link rel="canonical">`, and its link profile (how much of its main text, link
lists included, is the text of which links), which tells a chapter index from content.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import CData, Comment, Declaration, Doctype, ProcessingInstruction

CELL_SEPARATOR = " | "
# A block (paragraph, list item...) longer than this is stored as one line per sentence,
# so that a cited line stays short. A constant, not a setting: it decides what a line of
# the corpus is, so changing it would give every stored page a new version at the next
# scrape and move every citation; no deployment had a reason to (never set, not by a test).
DEFAULT_SPLIT_OVER = 160

# Never text of the page: code, metadata, site chrome, controls, ruby readings.
DROP_TAGS = frozenset(
    "script style noscript template head title meta link base nav header footer aside form "
    "svg math iframe frame frameset object embed canvas audio video map button select option "
    "textarea input label dialog menu rt rp".split()
)
# Site chrome that may legitimately hold the page's heading inside an article
# (`<article><header><h1>`): kept when it contains a heading, dropped otherwise.
CHROME_WITH_HEADING = frozenset({"header", "footer"})
# Elements that start and end a line.
BLOCK_TAGS = frozenset(
    "address article blockquote center dd details div dl dt fieldset figcaption figure h1 h2 h3 h4 "
    "h5 h6 hgroup hr legend li main ol p pre section summary table tbody thead tfoot caption ul".split()
)
HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
SECTIONING = ("article", "section")
SKIPPED_STRINGS = (Comment, Declaration, Doctype, ProcessingInstruction, CData)

INLINE_HIDDEN_STYLE = re.compile(r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden)\b", re.IGNORECASE)
# Class tokens of tooltip bodies and visually hidden text (the trigger term itself stays).
TOOLTIP_CLASS = re.compile(
    r"^(?!has[-_]|with[-_]|js[-_])(?:.*[-_])?(?:tooltip|tooltiptext|popover|tippy)"
    r"(?:[-_]+(?:text|content|body|inner|box|bubble|popup|def|definition))?$"
    r"|^(?:gloss|glossary|term|yougo|word)[-_]+(?:def|definition|desc|description|body|popup|tip|explain|explanation)$"
    r"|^(?:sr-only|visually-?hidden|screen-reader-text|hidden|is-hidden|u-hidden|d-none|hide|invisible)$",
    re.IGNORECASE,
)
SHOWN_AT_BREAKPOINT = re.compile(r"^d-(?:sm|md|lg|xl|xxl)-(?!none$)[a-z-]+$")
BREADCRUMB = re.compile(r"bread-?crumbs?|topic-?path|pankuzu|パンくず", re.IGNORECASE)
# Class/id tokens of site chrome, used only when the page has no <main>/<article>; matched
# after camelCase is split (sideMenu -> side-Menu, gNavi -> g-Navi, subContents -> sub-Contents),
# with the names older Japanese sites use (side, gnavi, localNavi, subContents).
BOILERPLATE_CLASS = re.compile(
    r"(?:^|[-_])(?:side[-_]?(?:bar|nav|navi|menu|column|col|area|box|contents?)|side(?=$)"
    r"|sub[-_]?(?:nav|navi|menu|contents?|column|col|area)|(?:global|local|g|l|h|site)[-_]?navi?|navi?|navigation"
    r"|nav[-_]?bar|menu|masthead|banner|header|footer|share|sns|social|page[-_]?top|to[-_]?top"
    r"|skip(?:[-_]?link)?|cookie|related|ads?|advert)(?:$|[-_])",
    re.IGNORECASE,
)
CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Without <main>/<article>, a block that is mostly links is site navigation whatever its
# class (trafilatura and readability judge boilerplate by link density too). Inline links
# in a paragraph stay far below this share.
LINK_LIST_TAGS = frozenset({"div", "ul", "ol", "dl", "table", "section", "p", "td"})
LINK_LIST_MIN_LINKS = 3
LINK_LIST_DENSITY = 0.7
# Blocks of which two in one long table cell make its row page layout (is_layout_row).
LAYOUT_BLOCKS = ("p", "div", "ul", "ol", "dl", "blockquote")
LAYOUT_CELL_CHARS = 200
# Minimal CSS reading: selectors of rules that hide, in the page's own <style> blocks.
CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
CSS_AT_BLOCK = re.compile(r"@[^{]+\{(?:[^{}]*\{[^{}]*\})*[^{}]*\}")
CSS_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
CSS_HIDES = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
CSS_LAST_CLASS = re.compile(r"(?:^|[\s>+~])[a-z0-9]*\.([A-Za-z0-9_-]+)$", re.IGNORECASE)

WHITESPACE = re.compile(r"\s+")
# A Japanese (wide) character: kana, CJK ideographs and punctuation, full-width forms.
WIDE = r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]"
WIDE_LINEBREAK_WIDE = re.compile(rf"(?<={WIDE})[ \t\r\f\v]*\n\s*(?={WIDE})")

# Sentence ends: Japanese 。！？ at once; ASCII ! ? before a space, a closer, a wide char or
# the end; '.' before a space not followed by a lower-case letter (so "e.g. the" holds).
# Closing brackets and quotes stay with the sentence they close.
JA_ENDS = "。！？"
ASCII_ENDS = "!?"
CLOSERS = "」』）)]］】〕〉》”’\"'"
TINY_SENTENCE = 4  # "1." or "Dr." alone is not a sentence: glued to the next one
WIDE_CHAR = re.compile(WIDE)


def collapse(text: str) -> str:
    """Whitespace collapsed to single spaces; a line break between two wide chars removed."""
    return WHITESPACE.sub(" ", WIDE_LINEBREAK_WIDE.sub("", text)).strip()


def _sentence_end(text: str, i: int) -> int | None:
    """Index just past the sentence ending at text[i] (closers included), or None."""
    n, ch = len(text), text[i]
    if ch in JA_ENDS or ch in ASCII_ENDS:
        j = i + 1
        while j < n and (text[j] in JA_ENDS or text[j] in ASCII_ENDS):
            j += 1
        k = j
        while k < n and text[k] in CLOSERS:
            k += 1
        if ch in JA_ENDS or k == n or text[k].isspace() or k > j or WIDE_CHAR.match(text[k]):
            return k
        return None
    if ch == ".":
        k = i + 1
        while k < n and text[k] in CLOSERS:
            k += 1
        if k < n and text[k].isspace():
            rest = text[k:].lstrip()
            if rest and not ("a" <= rest[0] <= "z"):
                return k
    return None


def split_sentences(text: str) -> list[str]:
    """One string per sentence, never splitting inside one (brackets stay with theirs)."""
    parts: list[str] = []
    start = i = 0
    while i < len(text):
        end = _sentence_end(text, i)
        if end is None:
            i += 1
            continue
        piece = text[start:end].strip()
        if piece:
            if parts and len(parts[-1]) < TINY_SENTENCE and parts[-1][-1] not in JA_ENDS:
                parts[-1] = parts[-1] + " " + piece
            else:
                parts.append(piece)
        start = i = end
    tail = text[start:].strip()
    if tail:
        if parts and len(parts[-1]) < TINY_SENTENCE and parts[-1][-1] not in JA_ENDS:
            parts[-1] = parts[-1] + " " + tail
        else:
            parts.append(tail)
    return parts or [text]


def _hidden_classes(soup: BeautifulSoup) -> frozenset[str]:
    classes = set()
    for style in soup.find_all("style"):
        css = CSS_AT_BLOCK.sub("", CSS_COMMENT.sub("", style.get_text()))
        for selectors, body in CSS_RULE.findall(css):
            if not CSS_HIDES.search(body):
                continue
            for selector in selectors.split(","):
                selector = selector.strip()
                if ":" in selector:
                    continue  # :hover / ::after rules are states, not the default
                match = CSS_LAST_CLASS.search(selector)
                if match:
                    classes.add(match.group(1))
    return frozenset(classes)


def is_link_list(el: Tag) -> bool:
    """A block that is mostly links (a menu, a table of contents, related pages): at least
    LINK_LIST_MIN_LINKS links holding at least LINK_LIST_DENSITY of its text."""
    links = el.find_all("a", href=True)
    if len(links) < LINK_LIST_MIN_LINKS:
        return False
    text = len(collapse(el.get_text(" ")))
    linked = sum(len(collapse(a.get_text(" "))) for a in links)
    return text > 0 and linked >= LINK_LIST_DENSITY * text


def is_layout_row(tr: Tag) -> bool:
    """A table row that lays out a page, not data: a cell holds a heading, a table of its
    own, or several paragraphs or lists of some length (a data cell may hold two short
    <p>). Its cells are blocks, not one " | "-joined line."""
    for cell in tr.find_all(["td", "th"], recursive=False):
        if cell.find([*HEADINGS, "table"]) is not None:
            return True
        if len(cell.find_all(LAYOUT_BLOCKS)) >= 2 and len(collapse(cell.get_text(" "))) >= LAYOUT_CELL_CHARS:
            return True
    return False


class _Extractor:
    def __init__(
        self, hidden_classes: frozenset[str], fallback: bool, split_over: int, link_density: bool = True
    ) -> None:
        self.hidden_classes = hidden_classes
        self.fallback = fallback
        self.split_over = split_over
        self.link_density = link_density
        self.lines: list[str] = []
        self.buf: list[str] = []

    # -- what to drop -------------------------------------------------------------
    def is_hidden(self, el: Tag) -> bool:
        attrs = el.attrs
        if "hidden" in attrs or str(attrs.get("aria-hidden", "")).lower() == "true":
            return True
        if INLINE_HIDDEN_STYLE.search(str(attrs.get("style", ""))):
            return True
        if str(attrs.get("role", "")).lower() == "tooltip":
            return True
        classes: list[str] = list(el.get("class") or [])
        if any(TOOLTIP_CLASS.match(c) or c in self.hidden_classes for c in classes) and not any(
            SHOWN_AT_BREAKPOINT.match(c) for c in classes  # "d-none d-md-block": shown on a desktop
        ):
            return True
        return self.is_breadcrumb(el)

    @staticmethod
    def is_breadcrumb(el: Tag) -> bool:
        marks = " ".join([*(el.get("class") or []), str(el.get("id", "")), str(el.get("aria-label", "")),
                          str(el.get("itemtype", ""))])
        return bool(BREADCRUMB.search(marks)) or "BreadcrumbList" in marks

    def is_dropped(self, el: Tag) -> bool:
        if self.is_hidden(el):
            return True
        if el.name in CHROME_WITH_HEADING:
            # Inside <main>, or an article's own header: kept when it holds a heading. In a
            # page without <main>, a header outside any article is the site's (logo <h1>...).
            if self.fallback and el.find_parent(SECTIONING) is None:
                return True
            return el.find(HEADINGS) is None
        if el.name in DROP_TAGS:
            return True
        if self.fallback and el.name not in ("body", "html"):
            marks = [*(el.get("class") or []), str(el.get("id", ""))]
            if any(BOILERPLATE_CLASS.search(CAMEL_BOUNDARY.sub("-", m)) for m in marks if m):
                return el.find(HEADINGS) is None
            if self.link_density and el.name in LINK_LIST_TAGS and is_link_list(el):
                return True
        return False

    # -- walking ------------------------------------------------------------------
    def flush(self) -> None:
        text = collapse("".join(self.buf))
        self.buf.clear()
        if not text:
            return
        if self.split_over and len(text) > self.split_over:
            self.lines.extend(split_sentences(text))
        else:
            self.lines.append(text)

    def walk(self, node: Tag) -> None:
        for child in node.children:
            if isinstance(child, NavigableString):
                if not isinstance(child, SKIPPED_STRINGS):
                    self.buf.append(str(child))
                continue
            if not isinstance(child, Tag) or self.is_dropped(child):
                continue
            name = child.name
            if name == "br":
                self.flush()
            elif name == "tr" and not is_layout_row(child):
                self.flush()
                self.row(child)
            elif name == "tr":  # a page laid out with a table: each cell is a block of its own
                self.flush()
                self.walk(child)
                self.flush()
            elif name in BLOCK_TAGS:
                self.flush()
                self.walk(child)
                self.flush()
            elif name in ("td", "th"):  # a cell outside any row: a block of its own
                self.flush()
                self.walk(child)
                self.flush()
            else:
                self.walk(child)

    def row(self, tr: Tag) -> None:
        cells = []
        for cell in tr.find_all(["td", "th"], recursive=False):
            if self.is_dropped(cell):
                continue
            sub = _Extractor(self.hidden_classes, self.fallback, 0, self.link_density)
            sub.walk(cell)
            sub.flush()
            text = " ".join(sub.lines)
            if text:
                cells.append(text)
        if cells:
            self.lines.append(CELL_SEPARATOR.join(cells))


def _content_root(soup: BeautifulSoup) -> tuple[Tag, bool]:
    """(root, fallback): <main>, [role=main], a single <article>, else the body."""
    root = soup.find("main") or soup.find(attrs={"role": "main"})  # type: ignore[call-overload]
    if root is None:
        articles = soup.find_all("article")
        if len(articles) == 1:
            root = articles[0]
    if root is not None:
        return root, False
    return (soup.body or soup), True


def _text_of(el: Tag, extractor: _Extractor) -> str:
    sub = _Extractor(extractor.hidden_classes, extractor.fallback, 0, extractor.link_density)
    sub.walk(el)
    sub.flush()
    return " ".join(sub.lines)


@dataclass(frozen=True)
class LinkProfile:
    """The links of a page's main text, link lists included (which `extract` drops from
    a page without <main>), against the length of that text."""

    text_chars: int  # characters of the main text, the title line left out
    links: tuple[tuple[str, int], ...]  # (href as written, characters of its text), in page order
    base: str | None = None  # the page's <base href>, when it has one


@dataclass(frozen=True)
class PageText:
    """What one parse of a page gives: its title and lines, its canonical link, its links."""

    title: str
    lines: list[str]
    canonical: str | None  # href of <link rel="canonical">, as written
    profile: LinkProfile


class _LinkCounter(_Extractor):
    """The extractor that keeps link lists, noting every link it keeps and its text."""

    def __init__(self, hidden_classes: frozenset[str], fallback: bool) -> None:
        super().__init__(hidden_classes, fallback, 0, link_density=False)
        self.links: list[tuple[str, int]] = []

    def walk(self, node: Tag) -> None:
        for child in node.children:
            if isinstance(child, Tag) and child.name == "a" and child.get("href") is not None \
                    and not self.is_dropped(child):
                self.links.append((str(child.get("href")), len(collapse(child.get_text(" ")))))
        super().walk(node)


def _canonical(soup: BeautifulSoup) -> str | None:
    for tag in soup.find_all("link", href=True):
        rel: object = tag.get("rel") or []
        rels = rel.split() if isinstance(rel, str) else list(rel) if isinstance(rel, (list, tuple)) else []
        if any(str(r).lower() == "canonical" for r in rels):
            href = str(tag.get("href", "")).strip()
            return href or None
    return None


def _parse(html: str, split_over_chars: int) -> tuple[BeautifulSoup, _Extractor, Tag, str]:
    """(soup, the extractor that read the lines, content root, title) of a page."""
    soup = BeautifulSoup(html, "html.parser")
    hidden = _hidden_classes(soup)
    root, fallback = _content_root(soup)
    extractor = _Extractor(hidden, fallback, split_over_chars)
    extractor.walk(root)
    extractor.flush()
    if fallback and not nonempty(extractor.lines):
        # a page that is nothing but links (a chapter's list of questions) keeps them
        extractor = _Extractor(hidden, fallback, split_over_chars, link_density=False)
        extractor.walk(root)
        extractor.flush()
    title = ""
    for h1 in root.find_all("h1"):
        if not any(extractor.is_dropped(p) for p in [h1, *h1.parents] if isinstance(p, Tag) and p is not soup):
            title = _text_of(h1, extractor)
            if title:
                break
    if not title and soup.title is not None:
        title = collapse(soup.title.get_text())
    return soup, extractor, root, title


def read_page(html: str, *, split_over_chars: int = DEFAULT_SPLIT_OVER) -> PageText:
    """Title, lines, canonical link and link profile of an HTML page, from one parse."""
    soup, extractor, root, title = _parse(html, split_over_chars)
    counter = _LinkCounter(extractor.hidden_classes, extractor.fallback)
    counter.walk(root)
    counter.flush()
    chars = sum(len(line) for line in counter.lines)
    if title and title in counter.lines:
        chars -= len(title)
    base = soup.find("base", href=True)
    profile = LinkProfile(text_chars=max(chars, 0), links=tuple(counter.links),
                          base=str(base["href"]) if isinstance(base, Tag) else None)
    return PageText(title=title, lines=extractor.lines, canonical=_canonical(soup), profile=profile)


def extract(html: str, *, split_over_chars: int = DEFAULT_SPLIT_OVER) -> tuple[str, list[str]]:
    """(title, lines) of an HTML page. Title: the main content's <h1>, else <title>."""
    _, extractor, _, title = _parse(html, split_over_chars)
    return title, extractor.lines


def nonempty(lines: Iterable[str]) -> bool:
    """True when there is at least one line of text."""
    return any(line.strip() for line in lines)


LETTER = re.compile(r"[^\W\d_]")  # a letter of any script (\w without digits and "_")


def has_letters(lines: Iterable[str]) -> bool:
    """True when some line holds a letter: text of digits and symbols only is no page."""
    return any(LETTER.search(line) for line in lines)
