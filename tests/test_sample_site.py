"""The bundled sample guideline site, served for real over loopback HTTP.

These tests pin what the scraper and the protocol check rely on: every declared content
page is served, the traps of a real site are present (boilerplate, hidden glossary text,
legacy encodings, non-content links), and the site never mentions the out-of-scope topic.
"""
from __future__ import annotations

import re
import unicodedata
import urllib.robotparser
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit, urlunsplit

import pytest
import requests
from bs4 import BeautifulSoup

from guiderag.errors import InputError
from guiderag.resources import SAMPLE_TOC_PATH, data_path, sample_site_dir

DATA_DIR = data_path()
SAMPLE_SITE_DIR = sample_site_dir()
from guiderag.scraper.sample import declared_content_paths, sample_content_urls, serve_sample_site

DISCLAIMER = "このサイトはデモ用に作成した架空の内容です。医療上の助言ではありません。"
SJIS_PAGE = "guide/ch2/q06.html"
EUCJP_PAGE = "guide/ch5/q17.html"
# The protocol check expects questions on this topic to be refused: the site must not know it.
OUT_OF_SCOPE_WORDS = ("神経膠腫", "グリオーマ", "glioma", "小児", "脳腫瘍")


def _charset(raw: bytes) -> str:
    """The charset a page declares in its <meta> (the sample site always declares one)."""
    head = raw[:2048].decode("ascii", errors="replace")
    found = re.search(r"charset=[\"']?([A-Za-z0-9_-]+)", head)
    assert found, "every sample page declares its charset in a <meta> element"
    return found.group(1).lower().replace("-", "_")


def _soup(raw: bytes) -> BeautifulSoup:
    return BeautifulSoup(raw.decode(_charset(raw)), "html.parser")


def _visible_answer(soup: BeautifulSoup) -> str:
    """Text of the answer with tooltip definitions removed."""
    answer = soup.select_one("main article .answer")
    assert answer is not None
    for tip in answer.select(".tooltip"):
        tip.decompose()
    return answer.get_text("", strip=True)


def _strip_tracking(url: str) -> str:
    url, _ = urldefrag(url)
    parts = urlsplit(url)
    query = "&".join(q for q in parts.query.split("&") if q and not q.startswith("utm_"))
    return urlunsplit(parts._replace(query=query))


@pytest.fixture(scope="module")
def site():
    """(TOC URL, requests session) for the sample site on a loopback port."""
    with serve_sample_site() as toc_url, requests.Session() as session:
        yield toc_url, session


@pytest.fixture(scope="module")
def toc_hrefs(site):
    toc_url, session = site
    reply = session.get(toc_url, timeout=10)
    assert reply.status_code == 200
    soup = _soup(reply.content)
    return [a["href"] for a in soup.find_all("a", href=True)]


def test_declared_list_is_exactly_the_question_pages():
    paths = declared_content_paths()
    assert len(paths) == len(set(paths)) >= 30
    for path in paths:
        assert re.fullmatch(r"guide/ch\d/q\d\d\.html", path), path
        assert (SAMPLE_SITE_DIR / path).is_file(), path
    on_disk = {p.relative_to(SAMPLE_SITE_DIR).as_posix()
               for p in SAMPLE_SITE_DIR.glob("guide/ch*/q*.html")}
    assert on_disk == set(paths)


def test_every_declared_page_is_served_with_status_200(site):
    toc_url, session = site
    urls = sample_content_urls(toc_url)
    assert len(urls) == len(declared_content_paths())
    for url in sorted(urls):
        reply = session.get(url, timeout=10)
        assert reply.status_code == 200, url
        # http.server sends no charset: the scraper must find it in the page itself.
        assert reply.headers["Content-Type"] == "text/html", url


def test_every_page_carries_the_disclaimer_in_header_and_footer_not_in_main():
    pages = sorted(SAMPLE_SITE_DIR.rglob("*.html"))
    assert len(pages) > len(declared_content_paths())
    for path in pages:
        soup = _soup(path.read_bytes())
        assert DISCLAIMER in soup.find("header").get_text(), path
        assert DISCLAIMER in soup.find_all("footer")[-1].get_text(), path
        assert DISCLAIMER not in soup.find("main").get_text(), path


def test_question_pages_have_a_q_title_and_a_substantial_answer():
    for rel in declared_content_paths():
        soup = _soup((SAMPLE_SITE_DIR / rel).read_bytes())
        title = soup.find("h1").get_text(" ", strip=True)
        assert re.fullmatch(r"Q\d+ .+[？?]|Q\d+ .+ください", title), (rel, title)
        answer = _visible_answer(soup)
        assert 600 <= len(answer) <= 2000, (rel, len(answer))


def test_shift_jis_page_is_really_shift_jis(site):
    toc_url, session = site
    raw = session.get(urljoin(toc_url, "/" + SJIS_PAGE), timeout=10).content
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")
    assert b'<meta charset="Shift_JIS">' in raw
    text = raw.decode("shift_jis")  # strict
    assert "気管支鏡検査" in text and DISCLAIMER in text
    assert text.encode("shift_jis") == raw


def test_euc_jp_page_is_really_euc_jp(site):
    toc_url, session = site
    raw = session.get(urljoin(toc_url, "/" + EUCJP_PAGE), timeout=10).content
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")
    assert b"charset=EUC-JP" in raw
    text = raw.decode("euc_jp")  # strict
    assert "定位放射線治療" in text and DISCLAIMER in text
    assert text.encode("euc_jp") == raw
    with pytest.raises(UnicodeDecodeError):
        raw.decode("shift_jis")


def test_toc_links_to_every_declared_page(site, toc_hrefs):
    toc_url, _ = site
    linked = {_strip_tracking(urljoin(toc_url, href)) for href in toc_hrefs}
    missing = sample_content_urls(toc_url) - linked
    assert not missing


def test_toc_has_the_non_content_links_a_real_site_has(site, toc_hrefs):
    toc_url, session = site
    hrefs = toc_hrefs
    assert any(h.startswith("mailto:") for h in hrefs)
    assert any(h.startswith("javascript:") for h in hrefs)
    assert any(h.startswith("https://www.example.org/") for h in hrefs)
    assert any(h.endswith(".pdf") for h in hrefs)
    assert any("utm_source=" in h for h in hrefs)
    assert any(h.startswith("./") for h in hrefs) and any(h.startswith("../") for h in hrefs)
    for target in ("/about.html", "/privacy.html", "/contact.html", "/news/2026-info.html"):
        assert target in hrefs
    # A fragment link to a page that is also linked plainly.
    fragments = [h for h in hrefs if "#" in h and not h.startswith("#") and ".html#" in h]
    assert any(h.split("#")[0] in hrefs for h in fragments)
    # Every on-site link works, so only classification (not 404s) keeps them out.
    for href in hrefs:
        url = urldefrag(urljoin(toc_url, href))[0]
        if urlsplit(url).netloc == urlsplit(toc_url).netloc:
            assert session.get(url, timeout=10).status_code == 200, href
    pdf = session.get(urljoin(toc_url, "files/leaflet.pdf"), timeout=10)
    assert pdf.headers["Content-Type"] == "application/pdf"
    assert pdf.content.startswith(b"%PDF-") and pdf.content.rstrip().endswith(b"%%EOF")


def test_robots_txt_disallows_the_linked_draft(site, toc_hrefs):
    toc_url, session = site
    robots = urllib.robotparser.RobotFileParser()
    robots.parse(session.get(urljoin(toc_url, "/robots.txt"), timeout=10).text.splitlines())
    drafts = [urljoin(toc_url, h) for h in toc_hrefs if "drafts/" in h]
    assert drafts
    for url in drafts:
        assert not robots.can_fetch("guiderag", url)
        assert url not in sample_content_urls(toc_url)
    assert all(robots.can_fetch("guiderag", u) for u in sample_content_urls(toc_url))


def test_hidden_glossary_definitions_use_every_hiding_technique():
    kinds = set()
    mid_sentence = 0
    for rel in declared_content_paths():
        soup = _soup((SAMPLE_SITE_DIR / rel).read_bytes())
        for tip in soup.select(".glossary .tooltip"):
            style = (tip.get("style") or "").replace(" ", "")
            if tip.has_attr("hidden"):
                kinds.add("hidden")
            elif tip.get("aria-hidden") == "true":
                kinds.add("aria-hidden")
            elif "display:none" in style:
                kinds.add("display:none")
            else:
                pytest.fail(f"visible tooltip in {rel}: {tip}")
            # A definition inside a sentence: the glossary term is followed by more text.
            if isinstance(tip.parent.next_sibling, str) and tip.parent.next_sibling.strip():
                mid_sentence += 1
    assert mid_sentence >= 10
    assert kinds == {"hidden", "aria-hidden", "display:none"}


def test_thymic_chapter_covers_diagnosis_pathology_treatment_surgery():
    titles = {}
    for rel in declared_content_paths():
        if rel.startswith("guide/ch8/"):
            soup = _soup((SAMPLE_SITE_DIR / rel).read_bytes())
            titles[rel] = soup.find("h1").get_text(" ", strip=True)
    for topic in ("診断方法", "病理診断", "治療法", "手術"):
        hits = [t for t in titles.values() if "胸腺腫瘍" in t and topic in t]
        assert hits, f"no thymic-tumour page titled with {topic}: {titles}"
    everything = " ".join(_visible_answer(_soup((SAMPLE_SITE_DIR / r).read_bytes())) for r in titles)
    for term in ("胸腺腫", "胸腺がん", "WHO分類", "正岡分類", "拡大胸腺摘出術", "胸腔鏡手術", "重症筋無力症"):
        assert term in everything, term


def test_site_never_mentions_the_out_of_scope_topic():
    for path in SAMPLE_SITE_DIR.rglob("*"):
        if path.suffix in (".html", ".txt", ".css", ".md"):
            raw = path.read_bytes()
            text = raw.decode(_charset(raw)) if path.suffix == ".html" else raw.decode("utf-8")
            text = unicodedata.normalize("NFKC", text).lower()
            for word in OUT_OF_SCOPE_WORDS:
                assert word not in text, (path, word)


def test_synonym_list_format_and_vocabulary():
    path = DATA_DIR / "synonyms.tsv"
    corpus = unicodedata.normalize("NFKC", " ".join(
        _visible_answer(_soup((SAMPLE_SITE_DIR / r).read_bytes())) + _soup(
            (SAMPLE_SITE_DIR / r).read_bytes()).find("h1").get_text()
        for r in declared_content_paths()
    ))
    groups = []
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("#"), "the file starts with a header comment describing the format"
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        terms = line.split("\t")
        assert len(terms) >= 2 and all(t and t == t.strip() for t in terms), repr(line)
        groups.append(terms)
        assert unicodedata.normalize("NFKC", terms[0]) in corpus, f"canonical {terms[0]!r} not in the site"
    assert len(groups) >= 20, "a useful list covers the common patient words"
    seen = [t for g in groups for t in g]
    assert len(seen) == len(set(seen)), "a term belongs to one group only"


def test_sample_content_urls_uses_only_the_server_part_of_the_base_url():
    from_toc = sample_content_urls("http://127.0.0.1:8765/" + SAMPLE_TOC_PATH)
    from_root = sample_content_urls("http://127.0.0.1:8765")
    assert from_toc == from_root
    assert "http://127.0.0.1:8765/guide/ch8/q31.html" in from_toc
    with pytest.raises(InputError):
        sample_content_urls("guide/index.html")


def test_server_refuses_a_missing_site_and_stops_on_exit(tmp_path: Path):
    with pytest.raises(InputError, match="sample site not found"):
        with serve_sample_site(tmp_path):
            pass
    with serve_sample_site() as toc_url:
        assert requests.get(toc_url, timeout=10).status_code == 200
    with pytest.raises(requests.ConnectionError):
        requests.get(toc_url, timeout=2)
