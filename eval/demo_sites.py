"""Our own demo guidebook sites for measuring the coverage decision on guidelines it was
never tuned on (eval/sites/README.md): a markup file in, a static site out.

Each site is a folder of eval/sites/: `guide.txt` (the content, in the markup below) and
`questions.jsonl` (patient-worded questions in the format of
../shared/bench/patient-gastric: id, question, kind, category, gold_page, answers). The
content is fictional demo text written for guiderag, not medical advice.

Markup of guide.txt, one item a line:
    # comment                    (a hash and a space)
    site: TITLE / org: NAME / layout: table|html5 / root: FOLDER
    = CHAPTER_ID TITLE           a chapter (a folder of its own)
    == PAGE_ID TITLE             a question page of that chapter
    ### HEADING                  a section heading
    - ITEM                       a list item (consecutive ones form one list)
    | CELL | CELL                a table row (the first row of a table is its header)
    anything else                a paragraph

Two layouts, each with the noise of a real site (menus, related-question boxes, chapter
pages that only list links, `?from=toc` / `?utm_source=` / `#section` spellings of a page,
off-site, mailto and javascript: links, hidden text): `table`, an older society site laid
out in tables without <main> (like patient-gastric), and `html5`, a newer one with
<main>, <article>, <nav> and a canonical link on every page.
"""
from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from guiderag.errors import InputError

SITES_DIR = Path(__file__).with_name("sites")
TABLE, HTML5 = "table", "html5"


@dataclass
class Block:
    kind: str  # "p" | "ul" | "table" | "h"
    items: list[str] = field(default_factory=list)  # p/h: one; ul: items; table: rows (cells joined by \t)


@dataclass
class Page:
    id: str
    title: str
    chapter: str
    blocks: list[Block] = field(default_factory=list)

    def path(self, root: str) -> str:
        return f"{root}/{self.chapter}/{self.id}.html"

    def text(self) -> str:
        """The page's words, as one string (to check that a gold answer is on the page)."""
        out = [self.title]
        for b in self.blocks:
            out += [item.replace("\t", " ") for item in b.items]
        return "\n".join(out)


@dataclass
class Chapter:
    id: str
    title: str
    pages: list[Page] = field(default_factory=list)


@dataclass
class Guide:
    name: str
    site: str
    org: str
    layout: str
    root: str
    chapters: list[Chapter]

    @property
    def pages(self) -> list[Page]:
        return [p for c in self.chapters for p in c.pages]

    @property
    def toc_path(self) -> str:
        return f"{self.root}/index.html"


def parse_guide(text: str, name: str = "") -> Guide:
    """The Guide of a guide.txt (InputError with the line number on a malformed line)."""
    head: dict[str, str] = {}
    chapters: list[Chapter] = []
    page: Page | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("# "):
            continue
        if line.startswith("== "):
            if not chapters:
                raise InputError(f"{name} line {number}: a page before any chapter")
            pid, _, title = line[3:].partition(" ")
            page = Page(pid, title.strip(), chapters[-1].id)
            chapters[-1].pages.append(page)
        elif line.startswith("= "):
            cid, _, title = line[2:].partition(" ")
            chapters.append(Chapter(cid, title.strip()))
            page = None
        elif page is None:
            key, sep, value = line.partition(":")
            if not sep:
                raise InputError(f"{name} line {number}: text outside a page: {line[:40]!r}")
            head[key.strip()] = value.strip()
        elif line.startswith("### "):
            page.blocks.append(Block("h", [line[4:].strip()]))
        elif line.startswith("- "):
            if page.blocks and page.blocks[-1].kind == "ul":
                page.blocks[-1].items.append(line[2:].strip())
            else:
                page.blocks.append(Block("ul", [line[2:].strip()]))
        elif line.startswith("|"):
            row = "\t".join(c.strip() for c in line.strip("|").split("|"))
            if page.blocks and page.blocks[-1].kind == "table":
                page.blocks[-1].items.append(row)
            else:
                page.blocks.append(Block("table", [row]))
        else:
            page.blocks.append(Block("p", [line]))
    missing = [k for k in ("site", "org", "layout", "root") if k not in head]
    if missing:
        raise InputError(f"{name}: missing header field(s) {', '.join(missing)}")
    if head["layout"] not in (TABLE, HTML5):
        raise InputError(f"{name}: layout must be {TABLE} or {HTML5}, not {head['layout']!r}")
    return Guide(name, head["site"], head["org"], head["layout"], head["root"], chapters)


def site_names() -> list[str]:
    """The demo sites shipped under eval/sites/."""
    return sorted(p.parent.name for p in SITES_DIR.glob("*/guide.txt"))


def load_guide(name: str) -> Guide:
    path = SITES_DIR / name / "guide.txt"
    if not path.is_file():
        raise InputError(f"no demo site {name!r} (have: {', '.join(site_names())})")
    return parse_guide(path.read_text(encoding="utf-8"), name)


def questions_path(name: str) -> Path:
    return SITES_DIR / name / "questions.jsonl"


def load_questions(name: str) -> list[dict]:
    """The site's questions.jsonl rows (patient-gastric's format)."""
    rows = []
    for line in questions_path(name).read_text(encoding="utf-8").splitlines():
        if line.strip():
            rows.append(json.loads(line))
    return rows


# -- rendering -------------------------------------------------------------------------

def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _blocks_html(blocks: list[Block], section_ids: bool) -> str:
    out: list[str] = []
    n = 0
    for b in blocks:
        if b.kind == "h":
            n += 1
            anchor = f' id="section{n}"' if section_ids else ""
            out.append(f"<h2{anchor}>{_e(b.items[0])}</h2>")
        elif b.kind == "p":
            out.append(f"<p>{_e(b.items[0])}</p>")
        elif b.kind == "ul":
            out.append("<ul>" + "".join(f"<li>{_e(i)}</li>" for i in b.items) + "</ul>")
        else:
            rows = [r.split("\t") for r in b.items]
            head = "<tr>" + "".join(f"<th>{_e(c)}</th>" for c in rows[0]) + "</tr>"
            body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
            out.append(f'<table class="data" border="1" cellspacing="0">{head}{body}</table>')
    return "\n".join(out)


def _related(guide: Guide, page: Page) -> list[Page]:
    """Two neighbours of a page in reading order (the related-questions box)."""
    pages = guide.pages
    i = pages.index(page)
    return [pages[j] for j in (i - 1, i + 1) if 0 <= j < len(pages)]


class _Table:
    """The older society site: table layout, no <main>, a side menu (patient-gastric-like)."""

    def __init__(self, guide: Guide) -> None:
        self.g = guide

    def frame(self, title: str, body: str, depth: int, crumbs: str) -> str:
        up = "../" * depth
        g = self.g
        menu = "".join(f'<li><a href="{up}{g.root}/{c.id}/index.html">{_e(c.title)}</a></li>' for c in g.chapters)
        return f"""<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN">
<html lang="ja">
<head>
<meta http-equiv="Content-Type" content="text/html; charset=utf-8">
<title>{_e(title)}｜{_e(g.site)}</title>
<link rel="stylesheet" href="{up}css/style.css" type="text/css">
<script type="text/javascript" src="{up}js/menu.js"></script>
<style type="text/css">.hidden-note {{ display: none; }} #menu li {{ list-style: none; }}</style>
</head>
<body>
<div id="header"><table width="100%"><tr><td><a href="{up}index.html">{_e(g.org)}</a></td>
<td align="right">文字の大きさ <a href="javascript:void(0)">標準</a> <a href="javascript:void(0)">拡大</a> ｜ <a href="{up}sitemap.html">サイトマップ</a></td></tr></table></div>
<div id="gnavi"><a href="{up}index.html">ホーム</a> ｜ <a href="{up}{g.root}/index.html">Q&amp;A目次</a> ｜ <a href="{up}about.html">このサイトについて</a> ｜ <a href="{up}contact.html">お問い合わせ</a></div>
<div class="topicpath">{crumbs}</div>
<table id="frame" width="100%" cellpadding="0" cellspacing="0"><tr>
<td id="side" valign="top" width="190"><div id="menu"><p class="menu-title">Q&amp;A目次</p><ul>{menu}</ul>
<p class="menu-title">リンク</p><ul><li><a href="https://www.example.net/">関連団体（外部）</a></li><li><a href="mailto:desk@example.jp">ご意見箱</a></li></ul></div></td>
<td id="content" valign="top">
{body}
<p class="disclaimer">このサイトは評価用に作成した架空のデモです。掲載内容は医療上の助言ではありません。</p>
<p class="totop"><a href="#">▲ページの先頭へ</a></p>
</td></tr></table>
<div id="footer"><p><a href="{up}privacy.html">個人情報保護方針</a> ｜ <a href="{up}contact.html">お問い合わせ</a></p>
<address>Copyright (C) {_e(g.org)}</address></div>
</body>
</html>
"""

    def page(self, page: Page) -> str:
        g = self.g
        chapter = next(c for c in g.chapters if c.id == page.chapter)
        related = "".join(f'<li><a href="../{r.chapter}/{r.id}.html">{_e(r.title)}</a></li>'
                          for r in _related(g, page))
        body = (f'<h1 class="q">{_e(page.title)}</h1>\n{_blocks_html(page.blocks, section_ids=False)}\n'
                f'<p class="hidden-note">用語の説明は用語集のページをご覧ください。</p>\n'
                f'<div class="related"><h3>あわせて読みたいQ&amp;A</h3><ul>{related}</ul></div>')
        crumbs = (f'<a href="../../index.html">ホーム</a> &gt; <a href="../index.html">Q&amp;A目次</a> &gt; '
                  f'<a href="index.html">{_e(chapter.title)}</a> &gt; {_e(page.title)}')
        return self.frame(page.title, body, 2, crumbs)

    def chapter(self, chapter: Chapter) -> str:
        items = "".join(f'<li><a href="{p.id}.html">{_e(p.title)}</a></li>' for p in chapter.pages)
        chapters = self.g.chapters
        i = chapters.index(chapter)
        steps = "".join(f'<a href="../{c.id}/index.html">{label}：{_e(c.title)}</a> '
                        for label, j in (("前の章", i - 1), ("次の章", i + 1)) if 0 <= j < len(chapters)
                        for c in [chapters[j]])
        body = f"<h1>{_e(chapter.title)}</h1>\n<ul class=\"qlist\">{items}</ul>\n<p class=\"steps\">{steps}</p>"
        crumbs = f'<a href="../../index.html">ホーム</a> &gt; <a href="../index.html">Q&amp;A目次</a> &gt; {_e(chapter.title)}'
        return self.frame(chapter.title, body, 2, crumbs)

    def toc(self) -> str:
        g = self.g
        parts = [f"<h1>{_e(g.site)}</h1>",
                 "<p>知りたい項目をクリックしてください。各章の見出しから章ごとの一覧も開けます。</p>",
                 '<p><a href="https://www.example.net/guideline/">医療者向けの情報（外部サイト）</a> ｜ '
                 '<a href="mailto:desk@example.jp">ご意見</a> ｜ <a href="javascript:window.print()">印刷</a></p>']
        for c in g.chapters:
            items = "".join(f'<li><a href="{c.id}/{p.id}.html">{_e(p.title)}</a></li>' for p in c.pages)
            first = c.pages[0]
            parts.append(f'<h2><a href="{c.id}/index.html">{_e(c.title)}</a></h2><ol>{items}</ol>'
                         f'<p class="more"><a href="{c.id}/{first.id}.html?from=toc">この章を読む</a></p>')
        crumbs = '<a href="../index.html">ホーム</a> &gt; Q&amp;A目次'
        return self.frame("Q&A目次", "\n".join(parts), 1, crumbs)


class _Html5:
    """The newer site: <main>, <article>, <nav>, canonical links."""

    def __init__(self, guide: Guide, base: str = "") -> None:
        self.g = guide

    def frame(self, title: str, body: str, depth: int, canonical: str, crumbs: str) -> str:
        up = "../" * depth
        g = self.g
        return f"""<!DOCTYPE html>
<html lang="ja">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)} - {_e(g.site)}</title>
<link rel="canonical" href="{_e(canonical)}">
<link rel="stylesheet" href="{up}assets/main.css">
<script async src="{up}assets/analytics.js"></script>
<script type="application/ld+json">{{"@context": "https://schema.org", "@type": "FAQPage"}}</script>
</head>
<body>
<header class="site-header"><a class="brand" href="{up}index.html">{_e(g.org)}</a>
<form role="search" action="#"><input type="search" name="q" placeholder="キーワードで探す"></form>
<button class="menu-toggle" aria-expanded="false">メニュー</button></header>
<nav class="global-nav" aria-label="サイト"><a href="{up}index.html">トップ</a><a href="{up}{g.root}/index.html">よくある質問</a><a href="{up}about.html">運営について</a><a href="https://www.example.net/">関連リンク</a></nav>
<nav class="breadcrumb" aria-label="現在位置">{crumbs}</nav>
<main id="main">
{body}
</main>
<aside class="banner"><p>相談窓口のご案内は<a href="{up}contact.html">こちら</a></p></aside>
<footer class="site-footer"><p class="note">このサイトは評価用に作成した架空のデモです。掲載内容は医療上の助言ではありません。</p>
<p><a href="{up}privacy.html">プライバシーポリシー</a> <a href="mailto:info@example.jp">お問い合わせ</a></p><small>&copy; {_e(g.org)}</small></footer>
<script>document.querySelector('.menu-toggle').addEventListener('click', function () {{}});</script>
</body>
</html>
"""

    def page(self, page: Page) -> str:
        g = self.g
        chapter = next(c for c in g.chapters if c.id == page.chapter)
        related = "".join(f'<li><a href="../{r.chapter}/{r.id}.html?utm_source=related">{_e(r.title)}</a></li>'
                          for r in _related(g, page))
        body = (f'<article class="faq"><h1>{_e(page.title)}</h1>\n'
                f'<p class="updated" aria-hidden="true">最終更新：2026年10月</p>\n'
                f'{_blocks_html(page.blocks, section_ids=True)}\n</article>\n'
                f'<nav class="related" aria-label="関連する質問"><h2>関連する質問</h2><ul>{related}</ul></nav>')
        crumbs = (f'<a href="../../index.html">トップ</a> / <a href="../index.html">よくある質問</a> / '
                  f'<a href="index.html">{_e(chapter.title)}</a>')
        return self.frame(page.title, body, 2, f"/{page.path(g.root)}", crumbs)

    def chapter(self, chapter: Chapter) -> str:
        items = "".join(f'<li><a href="{p.id}.html">{_e(p.title)}</a></li>' for p in chapter.pages)
        body = f'<h1>{_e(chapter.title)}</h1><ul class="faq-list">{items}</ul>'
        crumbs = '<a href="../../index.html">トップ</a> / <a href="../index.html">よくある質問</a>'
        return self.frame(chapter.title, body, 2, f"/{self.g.root}/{chapter.id}/index.html", crumbs)

    def toc(self) -> str:
        g = self.g
        parts = [f"<h1>{_e(g.site)}</h1>", "<p>患者さんやご家族から多く寄せられる質問と、その答えをまとめました。</p>"]
        for c in g.chapters:
            items = "".join(f'<li><a href="./{c.id}/{p.id}.html">{_e(p.title)}</a></li>' for p in c.pages)
            parts.append(f'<section><h2 id="{c.id}"><a href="{c.id}/index.html">{_e(c.title)}</a></h2>'
                         f'<ul>{items}</ul><p><a href="{c.id}/{c.pages[0].id}.html#section2">続きを読む</a></p></section>')
        crumbs = '<a href="../index.html">トップ</a> / よくある質問'
        return self.frame("よくある質問", "\n".join(parts), 1, f"/{g.root}/index.html", crumbs)


def _plain(guide: Guide, title: str, text: str) -> str:
    return (f'<!DOCTYPE html><html lang="ja"><head><meta charset="utf-8"><title>{_e(title)}</title></head>'
            f'<body><h1>{_e(title)}</h1><p>{_e(text)}</p><p><a href="{guide.toc_path}">Q&amp;A目次へ</a></p></body></html>')


def build_site(guide: Guide, out_dir: Path) -> str:
    """Write the site under out_dir; return the table of contents' path (relative)."""
    render: _Table | _Html5 = _Table(guide) if guide.layout == TABLE else _Html5(guide)
    out_dir = Path(out_dir)

    def write(rel: str, text: str) -> None:
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    for chapter in guide.chapters:
        write(f"{guide.root}/{chapter.id}/index.html", render.chapter(chapter))
        for page in chapter.pages:
            write(page.path(guide.root), render.page(page))
    write(guide.toc_path, render.toc())
    write("index.html", _plain(guide, guide.org, "患者さんとご家族のための情報サイト（架空）です。"))
    write("about.html", _plain(guide, "このサイトについて", "このサイトは評価用の架空のデモです。医療上の助言ではありません。"))
    write("privacy.html", _plain(guide, "個人情報の取り扱い", "お問い合わせで得た個人情報は、回答のためにのみ使います。"))
    write("contact.html", _plain(guide, "お問い合わせ", "ご意見はメールでお寄せください。"))
    write("sitemap.html", _plain(guide, "サイトマップ", "Q&A目次からすべてのページを開けます。"))
    for rel in ("css/style.css", "assets/main.css"):
        write(rel, "body { font-family: sans-serif; }\n")
    for rel in ("js/menu.js", "assets/analytics.js"):
        write(rel, "/* demo */\n")
    return guide.toc_path


def check_questions(guide: Guide, questions: list[dict]) -> Iterator[str]:
    """Problems of a question set against its guide: a gold page that is no page, a gold
    answer string that is not on its page, an id used twice."""
    pages = {p.path(guide.root): p for p in guide.pages}
    seen: set[str] = set()
    for q in questions:
        if q["id"] in seen:
            yield f"{q['id']}: id used twice"
        seen.add(q["id"])
        if q["kind"] != "in_scope":
            continue
        page = pages.get(q.get("gold_page") or "")
        if page is None:
            yield f"{q['id']}: gold page {q.get('gold_page')!r} is not a page of {guide.name}"
            continue
        text = page.text()
        for answer in q.get("answers") or []:
            if answer not in text:
                yield f"{q['id']}: answer {answer!r} is not on {q['gold_page']}"
