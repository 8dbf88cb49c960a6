"""Write a guidebook-like static site from articles, and serve a folder on 127.0.0.1.

The site imitates what a scraper meets on a real guideline site: a table-of-contents
page with one link per content page, and noise around the content: a header, a global
nav, a breadcrumb, an aside of related links, a footer, scripts and styles, an about
page and a privacy page, an off-site link, a mailto link and a tracking-parameter
duplicate of a content link. Only the <main> of each article page is content.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

SITE_NAME = "やさしい百科ガイドブック"
TOC_PATH = "guide/index.html"
ARTICLE_DIR = "guide/articles"
ABOUT_PATH = "guide/about.html"
PRIVACY_PATH = "guide/privacy.html"
RELATED_LINKS = 3  # links in each article's aside

_STYLE = """body{font-family:sans-serif;margin:0}header,footer{background:#eef;padding:8px}
nav a{margin-right:1em}main{padding:16px;max-width:48em}aside{float:right;width:14em}
.breadcrumb{font-size:small}"""
_SCRIPT = """window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments);}
gtag('js',new Date());document.addEventListener('DOMContentLoaded',function(){
var b=document.querySelector('.cookie');if(b){b.style.display='block';}});"""


@dataclass(frozen=True)
class SitePage:
    """One content page of the site: its path (relative to the site root), title, paragraphs."""

    path: str
    title: str
    paragraphs: tuple[str, ...]


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _frame(title: str, body: str, crumbs: Sequence[tuple[str, str]], depth: int) -> str:
    """Wrap a page body in the shared noise: head, header, nav, breadcrumb, footer."""
    up = "../" * depth
    crumb_html = " &gt; ".join(
        f'<a href="{_e(href)}">{_e(label)}</a>' if href else _e(label) for label, href in crumbs
    )
    return f"""<!DOCTYPE html>
<html lang="ja">
<head>
<meta charset="utf-8">
<title>{_e(title)} | {_e(SITE_NAME)}</title>
<link rel="stylesheet" href="{up}../assets/site.css">
<style>{_STYLE}</style>
<script src="{up}../assets/site.js"></script>
<script>{_SCRIPT}</script>
</head>
<body>
<header><div class="logo">{_e(SITE_NAME)}</div>
<form class="search" action="#"><input type="text" name="q" placeholder="サイト内検索"></form></header>
<nav class="global"><a href="{up}index.html">目次</a><a href="{up}about.html">このサイトについて</a>
<a href="{up}privacy.html">個人情報の取り扱い</a><a href="https://www.example.org/">関連団体（外部サイト）</a></nav>
<div class="breadcrumb">{crumb_html}</div>
{body}
<footer><p>ご意見・お問い合わせ：<a href="mailto:info@example.org">info@example.org</a></p>
<p><a href="{up}about.html">このサイトについて</a> ｜ <a href="{up}privacy.html">個人情報の取り扱い</a></p>
<p>© 2026 {_e(SITE_NAME)} 編集委員会</p></footer>
<div class="cookie" style="display:none">このサイトはクッキーを使用します。<button>同意する</button></div>
<script>console.log("page view");</script>
</body>
</html>
"""


def _article_html(page: SitePage, related: Sequence[SitePage]) -> str:
    aside = "\n".join(
        f'<li><a href="{_e(Path(r.path).name)}">{_e(r.title)}</a></li>' for r in related
    )
    paras = "\n".join(f"<p>{_e(p)}</p>" for p in page.paragraphs)
    body = f"""<aside class="related"><h2>関連ページ</h2><ul>
{aside}
</ul></aside>
<main>
<h1>{_e(page.title)}</h1>
{paras}
</main>"""
    crumbs = [("トップ", "../index.html"), ("目次", "../index.html"), (page.title, "")]
    return _frame(page.title, body, crumbs, depth=1)


def _toc_html(pages: Sequence[SitePage]) -> str:
    items = []
    for i, page in enumerate(pages):
        rel = f"articles/{Path(page.path).name}"
        items.append(f'<li><a href="{_e(rel)}">{_e(page.title)}</a></li>')
        if i == 0:
            # The same page again, as a newsletter link with tracking parameters.
            items.append(
                f'<li class="pickup"><a href="{_e(rel)}?utm_source=newsletter&amp;utm_medium=email">'
                f"今月のおすすめ：{_e(page.title)}</a></li>"
            )
    body = f"""<main>
<h1>目次</h1>
<p>各項目のページで、それぞれの内容をわかりやすく説明しています。</p>
<ul class="toc">
{chr(10).join(items)}
</ul>
<p>外部の情報は<a href="https://www.example.org/links.html">関連リンク集（外部サイト）</a>をご覧ください。</p>
</main>"""
    return _frame("目次", body, [("トップ", "index.html"), ("目次", "")], depth=0)


def _plain_html(title: str, paragraphs: Sequence[str]) -> str:
    body = "<main>\n<h1>" + _e(title) + "</h1>\n" + "\n".join(f"<p>{_e(p)}</p>" for p in paragraphs) + "\n</main>"
    return _frame(title, body, [("トップ", "index.html"), (title, "")], depth=0)


def write_site(pages: Sequence[SitePage], out_dir: Path) -> str:
    """Write the site under `out_dir`; return the TOC path relative to `out_dir`.

    Page paths must lie under `guide/articles/`. Existing files are overwritten; pages
    from an earlier build that are not in `pages` are removed, so the site is exactly
    what was asked for.
    """
    out_dir = Path(out_dir)
    article_dir = out_dir / ARTICLE_DIR
    article_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "assets").mkdir(parents=True, exist_ok=True)
    wanted = set()
    for i, page in enumerate(pages):
        if not page.path.startswith(ARTICLE_DIR + "/"):
            raise ValueError(f"site page path must be under {ARTICLE_DIR}/: {page.path}")
        related = [pages[(i + k) % len(pages)] for k in range(1, RELATED_LINKS + 1) if len(pages) > k]
        target = out_dir / page.path
        target.write_text(_article_html(page, related), encoding="utf-8")
        wanted.add(target.name)
    for stale in article_dir.glob("*.html"):
        if stale.name not in wanted:
            stale.unlink()
    (out_dir / TOC_PATH).write_text(_toc_html(pages), encoding="utf-8")
    (out_dir / ABOUT_PATH).write_text(
        _plain_html(
            "このサイトについて",
            [
                "このサイトは、編集委員会が作成した解説を、どなたにも読みやすい形でお届けするものです。",
                "掲載内容は定期的に見直しています。最終更新日は各ページの末尾をご覧ください。",
            ],
        ),
        encoding="utf-8",
    )
    (out_dir / PRIVACY_PATH).write_text(
        _plain_html(
            "個人情報の取り扱い",
            [
                "当サイトでは、アクセス状況の把握のためにクッキーを利用することがあります。",
                "お問い合わせでいただいた個人情報は、回答の目的以外には使用しません。",
            ],
        ),
        encoding="utf-8",
    )
    (out_dir / "assets" / "site.css").write_text(_STYLE, encoding="utf-8")
    (out_dir / "assets" / "site.js").write_text(_SCRIPT, encoding="utf-8")
    return TOC_PATH


