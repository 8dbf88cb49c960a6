"""URL normalisation and classification of the links of a table-of-contents page.

Every rule is a named, precompiled pattern behind a one-line predicate (as in courlan),
so a maintainer can read why a link was kept or dropped, and the reason lands in the URL
workbook. Normalisation makes one entry per page however it is spelt: `./q1.html`,
`../guide/q1.html`, `Q1.html#top`, `q1.html?utm_source=x`, `HTTP://Host:80/guide/`,
`/guide/index.html` and `/guide/` all collapse to one canonical URL.
"""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode, urljoin, urlsplit, urlunsplit

# --- categories (the workbook's `category` column) ----------------------------------
CONTENT = "content"
SCHEME = "not-web"  # mailto:, javascript:, tel:, data:...
OFFSITE = "off-site"
NOT_HTML = "not-html"
NAVIGATION = "navigation"
OUTSIDE_GUIDE = "outside-guide"
DISALLOWED = "robots-disallowed"
DUPLICATE = "duplicate"
INDEX = "index"  # learnt by fetching: a page whose main text is a list of links to guide pages
# A form to print and fill in, or a print edition of pages: by its link text, or learnt by
# fetching a PDF whose tables are mostly blank fields (scraper.postfetch.form_reason).
PRINTABLE = "printable"
CATEGORIES = (CONTENT, SCHEME, OFFSITE, NOT_HTML, NAVIGATION, OUTSIDE_GUIDE, DISALLOWED, DUPLICATE, INDEX, PRINTABLE)

DEFAULT_PORTS = {"http": 80, "https": 443}
WWW_PREFIX = re.compile(r"^www\d?\.", re.IGNORECASE)

# --- named patterns ---------------------------------------------------------------------
# Query parameters that only track where a visitor came from: never part of a page's identity.
TRACKING_PARAM = re.compile(
    r"^(?:utm_[a-z_]+|fbclid|gclid|dclid|gbraid|wbraid|msclkid|yclid|mc_cid|mc_eid|_ga|_gl"
    r"|igshid|ref_src|spm|srsltid|oly_anon_id|oly_enc_id|vero_id|_hsenc|_hsmi|mkt_tok)\Z",
    re.IGNORECASE,
)
# Directory index documents: `/guide/index.html` is the page `/guide/`.
DEFAULT_INDEX = re.compile(r"(?:^|/)(?:index|default)\.(?:html?|php|asp|aspx|jsp)\Z", re.IGNORECASE)
# A last path segment that names an HTML page (or no extension at all).
HTML_EXTENSION = re.compile(r"\.(?:html?|xhtml|shtml|php\d?|aspx?|jspx?|cfm|cgi|pl)\Z", re.IGNORECASE)
HAS_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,8}\Z")
# A document the scraper reads besides HTML pages: a PDF (scraper.pdf).
PDF_EXTENSION = re.compile(r"\.pdf\Z", re.IGNORECASE)
# Site pages that are not part of the guideline: about, privacy, contact, sitemap, search,
# login... matched against the last path segment (without extension) and the query.
SITE_PAGE_SEGMENT = re.compile(
    r"^(?:about(?:[-_]?us)?|about[-_]?(?:this[-_]?)?site|privacy(?:[-_]?policy)?|policy|policies"
    r"|site[-_]?policy|terms(?:[-_]?of[-_]?(?:use|service))?|tos|disclaimer|legal|copyright|cookies?"
    r"|contact(?:[-_]?us)?|inquiry|enquiry|otoiawase|toiawase|feedback|sitemap|site[-_]?map"
    r"|search|login|log[-_]?in|logout|log[-_]?out|signin|sign[-_]?in|signup|sign[-_]?up|register"
    r"|account|mypage|cart|accessibility|kiyaku|riyou[-_]?kiyaku|menseki|kojin[-_]?joho"
    r"|links?|news|rss|feed|atom|print|share|tag|tags|category|categories|author|archives?)\Z",
    re.IGNORECASE,
)
SITE_PAGE_QUERY = re.compile(r"(?:^|&)(?:s|q|query|search|keyword|login|action=(?:login|logout|search|print))(?:=|&|\Z)", re.IGNORECASE)
# The same, said in the link text (for sites whose URLs are opaque ids). Only phrases that
# name site chrome and nothing else: a guide page may well be titled 検索 or 著作権.
SITE_PAGE_TEXT = re.compile(
    r"^(?:このサイトについて|当サイトについて|サイトについて|サイトの使い方|運営者情報|運営について"
    r"|プライバシーポリシー|個人情報(?:保護方針|の取り扱い|の取扱い)|サイトポリシー|利用規約|免責事項"
    r"|お問い?合わせ|お問い合わせ先|サイトマップ|ログイン|ログアウト|新規登録|リンク集|ページの先頭へ|トップページへ?"
    r"|about us|about this site|privacy policy|contact us|site ?map|log ?in|log ?out|sign ?in"
    r"|sign ?up|terms of use|terms of service|back to top)\Z",
    re.IGNORECASE,
)


# Link text that names a PDF as a form to print and fill in, or as a print edition (of
# pages read anyway): 受診メモ（印刷用）, 記入用シート, printer-friendly version.
PRINTABLE_TEXT = re.compile(r"印刷用|印刷版|プリント用|記入用|printable|printer[- ]friendly|print version",
                            re.IGNORECASE)


def normalize_url(href: str, base: str | None = None, *, drop_index: bool = False) -> str:
    """The canonical spelling of `href` (resolved against `base`), without fragment or tracking.

    Lower-case scheme and host, no default port, dot segments resolved, percent-escapes in
    upper case, tracking parameters dropped, the rest of the query kept in a stable (sorted)
    order; with `drop_index`, `dir/index.html` becomes `dir/` (see `page_key`). Non-web URLs
    (mailto:...) are returned resolved but otherwise untouched.
    """
    href = (href or "").strip()
    url = urljoin(base, href) if base else href
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        return url
    host = (parts.hostname or "").lower().rstrip(".")
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host  # user:password@ is dropped: credentials are never part of a page's identity
    if port is not None and port != DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    path = _normalize_path(parts.path, drop_index)
    query = _normalize_query(parts.query)
    return urlunsplit((scheme, netloc, path, query, ""))


def page_key(url: str) -> str:
    """The identity of a page: its normalised URL with the default index document dropped.

    `/guide/` and `/guide/index.html` are one page, but only the spelling a site links can
    be trusted to fetch (not every server maps `/guide/` to `index.html`), so URLs are kept
    as linked and compared by key.
    """
    return normalize_url(url, drop_index=True)


def document_key(url: str) -> str:
    """The page key without its query string: the spellings `q1.html`, `q1.html?from=toc`
    and `q1.html#s2` share it. Whether they serve one document is for the fetched pages
    to say (scraper.postfetch)."""
    parts = urlsplit(page_key(url))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def _normalize_path(path: str, drop_index: bool) -> str:
    if not path:
        return "/"
    trailing = path.endswith("/") or path.endswith("/.") or path.endswith("/..")
    clean = posixpath.normpath(path)
    if clean.startswith("//"):
        clean = "/" + clean.lstrip("/")
    if clean == ".":
        clean = "/"
    if trailing and not clean.endswith("/"):
        clean += "/"
    if drop_index:
        clean = DEFAULT_INDEX.sub(lambda m: "/" if m.group(0).startswith("/") else "", clean) or "/"
    clean = quote(clean, safe="/:@!$&'()*+,;=-._~%")
    return re.sub(r"%[0-9a-fA-F]{2}", lambda m: m.group(0).upper(), clean)


def _normalize_query(query: str) -> str:
    if not query:
        return ""
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if not TRACKING_PARAM.match(k)]
    return urlencode(sorted(pairs), doseq=False)


def site_of(url: str) -> str:
    """scheme://host[:port] of a normalised URL."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def guide_path(toc_url: str) -> str:
    """The guide's path: the directory of the TOC page (`/guide/` for `/guide/index.html`)."""
    path = urlsplit(page_key(toc_url)).path
    return path if path.endswith("/") else path.rsplit("/", 1)[0] + "/"


# --- one-line predicates -----------------------------------------------------------------
def is_web_url(url: str) -> bool:
    return urlsplit(url).scheme.lower() in DEFAULT_PORTS


def is_same_site(url: str, other: str) -> bool:
    return _host_port(url) == _host_port(other)


def _host_port(url: str) -> tuple[str, int | None]:
    """Host without a leading www., and the port only when it is not the scheme's default:
    http://example.org and https://www.example.org are one site (an https upgrade is not
    leaving it), http://127.0.0.1:8000 and :8001 are two."""
    parts = urlsplit(normalize_url(url))
    host = WWW_PREFIX.sub("", parts.hostname or "")
    port = parts.port
    return host, None if port in (None, *DEFAULT_PORTS.values()) else port


def is_html_by_extension(url: str) -> bool:
    last = urlsplit(url).path.rsplit("/", 1)[-1]
    return not last or bool(HTML_EXTENSION.search(last)) or not HAS_EXTENSION.search(last)


def is_pdf_by_extension(url: str) -> bool:
    return bool(PDF_EXTENSION.search(urlsplit(url).path.rsplit("/", 1)[-1]))


def is_navigation_page(url: str) -> bool:
    parts = urlsplit(url)
    last = parts.path.rstrip("/").rsplit("/", 1)[-1]
    stem = last.rsplit(".", 1)[0] if "." in last else last
    return bool(SITE_PAGE_SEGMENT.match(stem)) or bool(SITE_PAGE_QUERY.search(parts.query))


def is_navigation_text(text: str) -> bool:
    return bool(SITE_PAGE_TEXT.match(re.sub(r"\s+", " ", text or "").strip()))


def is_printable_text(text: str) -> bool:
    return bool(PRINTABLE_TEXT.search(text or ""))


def is_inside_folder(url: str, folder: str) -> bool:
    return urlsplit(url).path.startswith(folder)


def is_inside_guide(url: str, toc_url: str) -> bool:
    return is_inside_folder(url, guide_path(toc_url))


def folders_of(url: str) -> list[str]:
    """The folders above a URL's page, outermost first: /a/b/q1.html -> /, /a/, /a/b/."""
    parts = urlsplit(page_key(url)).path.split("/")[1:-1]
    return ["/" + "".join(p + "/" for p in parts[:i]) for i in range(len(parts) + 1)]


def majority_folder(links: list[str], min_links: int) -> str | None:
    """The deepest folder holding more than half of `links` (and at least `min_links` of
    them): where a table of contents kept apart from its pages (/guide/toc/ linking
    /guide/q/1.html...) has its guide. A strict majority, so two equal folders give their
    common parent, not one of them by chance. None when the links are too few."""
    if len(links) < min_links:
        return None
    counts: dict[str, int] = {}
    for url in links:
        for folder in folders_of(url):
            counts[folder] = counts.get(folder, 0) + 1
    need = max(min_links, len(links) // 2 + 1)
    best = [f for f, n in counts.items() if n >= need]
    return max(best, key=len) if best else None


@dataclass(frozen=True)
class Verdict:
    """The classifier's view of one link."""

    category: str
    reason: str

    @property
    def is_content(self) -> bool:
        return self.category == CONTENT


def classify(url: str, toc_url: str, link_text: str = "") -> Verdict:
    """Content or not, with the reason: `url` and `toc_url` already normalised.

    Robots.txt and duplicates are decided by the caller, which knows the site and the
    other links.
    """
    scheme = urlsplit(url).scheme.lower()
    if not is_web_url(url):
        what = f"{scheme}: link" if scheme else "not a web URL"
        return Verdict(SCHEME, f"{what} (not a web page)")
    if not is_same_site(url, toc_url):
        return Verdict(OFFSITE, f"off-site: {urlsplit(url).netloc} is not {urlsplit(toc_url).netloc}")
    if page_key(url) == page_key(toc_url):
        return Verdict(NAVIGATION, "the table of contents itself")
    pdf = is_pdf_by_extension(url)
    if not pdf and not is_html_by_extension(url):
        ext = urlsplit(url).path.rsplit(".", 1)[-1].lower()
        return Verdict(NOT_HTML, f"not HTML (.{ext} file)")
    if is_navigation_page(url):
        return Verdict(NAVIGATION, "navigation or site page (by its URL)")
    if is_navigation_text(link_text):
        return Verdict(NAVIGATION, f"navigation or site page (link text {link_text.strip()!r})")
    if not is_inside_guide(url, toc_url):
        return Verdict(OUTSIDE_GUIDE, f"outside the guide's path {guide_path(toc_url)}")
    if pdf and is_printable_text(link_text):  # (an HTML print view is a duplicate, learnt by fetching)
        return Verdict(PRINTABLE, f"a form to print or a print edition (link text {link_text.strip()!r}), "
                                  "not the guide's text; set include=TRUE to read it")
    if pdf:
        return Verdict(CONTENT, "guide document (PDF) linked from the table of contents")
    return Verdict(CONTENT, "guide page linked from the table of contents")
