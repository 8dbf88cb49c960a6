"""Text as lines: blocks in reading order, no boilerplate, hidden or tooltip text; stable."""
from __future__ import annotations

from guiderag.scraper.textlines import CELL_SEPARATOR, collapse, extract, split_sentences
from sitekit import html_page

NOISY = html_page("Q3 治療法 | デモ病院", """
<header class="site-header"><div class="site-name">HEADERTEXT ガイドブック</div>
  <form class="site-search"><input name="q"><button>SEARCHBUTTON</button></form></header>
<nav class="global-nav"><ul><li><a href="/">NAVHOME</a></li><li><a href="/about.html">NAVABOUT</a></li></ul></nav>
<ol class="breadcrumb"><li><a href="/">CRUMBHOME</a></li><li>CRUMBHERE</li></ol>
<div class="layout">
<main id="main">
  <article>
    <header><p class="chapter">第2章</p><h1>Q3 治療法にはどのようなものがありますか？</h1></header>
    <nav aria-label="このページの目次"><a href="#a">PAGETOC</a></nav>
    <p>治療法は、<span class="glossary">病期<span class="tooltip" role="tooltip" hidden>TOOLTIPDEF がんの広がり</span></span>や
       体の状態によって決まります。</p>
    <p>薬物療法では<span class="term">分子標的薬<span class="glossary-def">GLOSSDEF 特定の分子を狙う薬</span></span>を使います。</p>
    <p>手術<span aria-hidden="true">ARIAHIDDEN</span>は<span style="display: none">DISPLAYNONE</span>根治を目指す治療です。
       <span style="color:red; visibility:hidden">VISHIDDEN</span></p>
    <h2>主な治療</h2>
    <ul>
      <li>手術
        <ul><li>胸腔鏡手術</li><li>開胸手術</li></ul>
      </li>
      <li>放射線治療</li>
    </ul>
    <table><caption>病期と治療</caption>
      <thead><tr><th>病期</th><th>主な治療</th></tr></thead>
      <tbody><tr><td>I期</td><td><p>手術</p><p>定位放射線治療</p></td></tr>
             <tr><td>IV期</td><td>薬物療法</td></tr></tbody>
    </table>
    <dl><dt>ＥＧＦＲ遺伝子変異</dt><dd>分子標的薬が効きやすい変異です。</dd></dl>
    <div class="sr-only">SRONLY</div>
    <template><p>TEMPLATETEXT</p></template>
    <noscript>NOSCRIPTTEXT</noscript>
    <script>document.write("SCRIPTTEXT")</script><style>.x{color:red}</style>
    <footer class="article-meta">ARTICLEFOOTER 最終更新</footer>
  </article>
  <aside class="related">ASIDETEXT 関連ページ</aside>
</main>
<aside class="sidebar">SIDEBARTEXT</aside>
</div>
<footer class="site-footer">FOOTERTEXT Copyright</footer>
""")

NOISE = ["HEADERTEXT", "SEARCHBUTTON", "NAVHOME", "NAVABOUT", "CRUMBHOME", "CRUMBHERE", "PAGETOC",
         "TOOLTIPDEF", "GLOSSDEF", "ARIAHIDDEN", "DISPLAYNONE", "VISHIDDEN", "SRONLY", "TEMPLATETEXT",
         "NOSCRIPTTEXT", "SCRIPTTEXT", "color:red", "ARTICLEFOOTER", "ASIDETEXT", "SIDEBARTEXT", "FOOTERTEXT"]


def test_boilerplate_hidden_and_tooltip_text_never_reaches_a_line() -> None:
    _title, lines = extract(NOISY)
    text = "\n".join(lines)
    for noise in NOISE:
        assert noise not in text, noise


def test_one_line_per_block_in_reading_order() -> None:
    title, lines = extract(NOISY)
    assert title == "Q3 治療法にはどのようなものがありますか？"
    assert lines == [
        "第2章",
        "Q3 治療法にはどのようなものがありますか？",
        "治療法は、病期や体の状態によって決まります。",  # source line break between kana: removed
        "薬物療法では分子標的薬を使います。",
        "手術は根治を目指す治療です。",
        "主な治療",
        "手術",
        "胸腔鏡手術",
        "開胸手術",
        "放射線治療",
        "病期と治療",
        f"病期{CELL_SEPARATOR}主な治療",
        f"I期{CELL_SEPARATOR}手術 定位放射線治療",
        f"IV期{CELL_SEPARATOR}薬物療法",
        "ＥＧＦＲ遺伝子変異",  # verbatim: no NFKC on stored lines
        "分子標的薬が効きやすい変異です。",
    ]


def test_same_text_gives_the_same_lines() -> None:
    assert extract(NOISY) == extract(NOISY)
    # Markup and indentation changes that do not change the text do not change the lines.
    reformatted = NOISY.replace("<li>放射線治療</li>", "<li>\n      放射線治療\n    </li>")
    assert extract(reformatted) == extract(NOISY)


def test_title_falls_back_to_the_title_element() -> None:
    title, lines = extract(html_page("ページの題名", "<main><p>本文です。</p></main>"))
    assert title == "ページの題名" and lines == ["本文です。"]


def test_site_header_with_a_logo_h1_is_not_the_title_without_main() -> None:
    html = html_page("Q5 検査 | サイト", """<header><h1 class="logo">デモ病院ガイド</h1></header>
        <div class="body"><article><header><h1>Q5 検査</h1></header><p>検査の説明です。</p></article>
        <article><p>別の記事です。</p></article></div>""")
    title, lines = extract(html)
    assert title == "Q5 検査"
    assert lines == ["Q5 検査", "検査の説明です。", "別の記事です。"]


def test_body_minus_boilerplate_when_there_is_no_main() -> None:
    html = html_page("T", """<div id="header">HEADERDIV</div><div class="side-menu">MENUDIV</div>
        <div class="content"><h1>見出し</h1><p>本文の段落です。</p></div>
        <div id="footer">FOOTERDIV</div><div class="pagetop"><a href="#">TOPLINK</a></div>""")
    title, lines = extract(html)
    assert title == "見出し"
    assert lines == ["見出し", "本文の段落です。"]


def test_older_sites_chrome_names_and_link_lists_are_dropped_without_main() -> None:
    """No <main>: camelCase and Japanese-site ids (sideMenu, gNavi, localNav, subContents, side)
    and any block that is mostly links (a sidebar table of contents with no telling class)
    are site navigation; a paragraph with inline links is content."""
    menu = "".join(f'<li><a href="q{i}.html">Q{i} 肺がんの治療について</a></li>' for i in range(1, 6))
    html = html_page("T", f"""<div id="gNavi"><a href="/">トップ</a></div>
        <div class="sideMenu">SIDEMENU</div><div id="localNav">LOCALNAV</div><div id="side">SIDE</div>
        <div id="subContents">SUBCONTENTS</div>
        <div id="wrap"><div class="box"><h3>目次</h3><ul>{menu}</ul></div>
        <div id="contents"><h1>Q3 手術について</h1>
        <p>手術の方法は<a href="g.html">用語集</a>と<a href="h.html">解説</a>と<a href="i.html">図</a>を参考にしてください。詳しくは担当医に相談しましょう。</p>
        <div class="side-note">コラム：手術前の禁煙が大切です。</div></div></div>""")
    title, lines = extract(html)
    assert title == "Q3 手術について"
    assert lines == [
        "Q3 手術について",
        "手術の方法は用語集と解説と図を参考にしてください。詳しくは担当医に相談しましょう。",
        "コラム：手術前の禁煙が大切です。",
    ]


def test_a_page_laid_out_with_a_table_gives_one_line_per_block() -> None:
    """Older sites lay pages out in a table: a cell with headings and paragraphs is blocks,
    not one " | "-joined line; the menu cell is links and goes; a data table stays rows."""
    menu = "".join(f'<li><a href="q{i}.html">Q{i} 肺がんの治療について</a></li>' for i in range(1, 6))
    html = html_page("T", f"""<table width="800"><tr><td class="left"><ul>{menu}</ul></td>
        <td><h1>Q1 手術の方法</h1><p>本文の一つ目です。</p><p>本文の二つ目です。</p>
        <table><tr><th>種類</th><th>特徴</th></tr><tr><td>胸腔鏡</td><td>傷が小さい</td></tr></table>
        </td></tr></table>""")
    title, lines = extract(html)
    assert title == "Q1 手術の方法"
    assert lines == ["Q1 手術の方法", "本文の一つ目です。", "本文の二つ目です。", "種類 | 特徴", "胸腔鏡 | 傷が小さい"]
    # no heading, but long paragraphs: layout too
    long = "".join(f"<p>{'本文です。' * 20}{i}</p>" for i in range(3))
    _, lines = extract(html_page("T", f'<table><tr><td class="left"><ul>{menu}</ul></td><td>{long}</td></tr></table>'))
    assert lines == [f"{'本文です。' * 20}{i}" for i in range(3)]


def test_a_page_of_nothing_but_links_keeps_them() -> None:
    """A chapter page listing its questions is content too: all links, nothing dropped."""
    menu = "".join(f'<li><a href="q{i}.html">Q{i} 治療の選び方 その{i}</a></li>' for i in range(1, 5))
    title, lines = extract(html_page("第2章", f"<div><h1>第2章 治療</h1><ul>{menu}</ul></div>"))
    assert lines == ["第2章 治療", *(f"Q{i} 治療の選び方 その{i}" for i in range(1, 5))]


def test_link_lists_inside_main_are_kept() -> None:
    """With <main>, its content is trusted: a list of links there is the page's own."""
    menu = "".join(f'<li><a href="q{i}.html">Q{i} 関連</a></li>' for i in range(1, 5))
    _, lines = extract(html_page("T", f"<main><h1>見出し</h1><p>本文です。</p><ul>{menu}</ul></main>"))
    assert lines == ["見出し", "本文です。", *(f"Q{i} 関連" for i in range(1, 5))]


def test_classes_hidden_by_the_pages_own_style_sheet_are_dropped() -> None:
    html = html_page("T", "<main><p>副作用<span class='gl-pop'>CSSHIDDEN</span>に注意します。</p></main>",
                     head="<style>.gl-pop{display:none}.gl:hover .gl-pop{display:block}</style>")
    assert extract(html)[1] == ["副作用に注意します。"]


def test_responsive_utility_classes_hide_only_what_no_screen_shows() -> None:
    html = html_page("T", '<main><p class="d-none">NEVER</p><p class="d-none d-md-block">広い画面の本文です。</p></main>')
    assert extract(html)[1] == ["広い画面の本文です。"]


def test_br_splits_lines_and_ruby_readings_are_dropped() -> None:
    html = html_page("T", "<main><p>一行目<br>二行目</p><p><ruby>肺<rt>はい</rt></ruby>の病気です。</p></main>")
    assert extract(html)[1] == ["一行目", "二行目", "肺の病気です。"]


def test_long_blocks_become_one_line_per_sentence() -> None:
    sentences = ["肺がんの治療は、がんの種類や病期、体の状態を考えて決めます。",
                 "担当医は「手術」「放射線治療」「薬物療法」のどれが合うかを説明します（詳しくは次の章）。",
                 "わからないことは遠慮せずに聞きましょう！",
                 "Ask your doctor about EGFR tests, e.g. before treatment. It helps.",
                 "本当にそうでしょうか？"]
    para = "".join(sentences[:3]) + sentences[3] + sentences[4]
    html = html_page("T", f"<main><p>{para}</p><p>短い段落です。ここは分けません。</p></main>")
    _title, lines = extract(html, split_over_chars=60)
    assert lines == [sentences[0], sentences[1], sentences[2], "Ask your doctor about EGFR tests, e.g. before treatment.",
                     "It helps.本当にそうでしょうか？", "短い段落です。ここは分けません。"]
    # 0 disables splitting.
    assert extract(html, split_over_chars=0)[1][0] == para


def test_split_keeps_closing_brackets_with_their_sentence() -> None:
    assert split_sentences("「治療を始めます。」と言われました。（注意してください。）次です。") == [
        "「治療を始めます。」", "と言われました。", "（注意してください。）", "次です。"]
    assert split_sentences("用量は2.5 mgです。Dr. Tanaka said so.") == ["用量は2.5 mgです。", "Dr. Tanaka said so."]


def test_collapse_only_touches_whitespace() -> None:
    assert collapse("  肺がん\n  の治療  EGFR  \t 陽性 ") == "肺がんの治療 EGFR 陽性"
    assert collapse("ＰＤ－Ｌ１　検査") == "ＰＤ－Ｌ１ 検査"


def test_empty_page_has_no_lines() -> None:
    assert extract(html_page("空", "<nav>メニューだけ</nav><main>  </main>"))[1] == []


def test_sample_pages_have_no_tooltip_or_navigation_text() -> None:
    from guiderag.scraper import sample
    from bs4 import BeautifulSoup

    from guiderag.resources import sample_site_dir

    SAMPLE_SITE_DIR = sample_site_dir()
    from guiderag.scraper.charset import decode_html

    checked = 0
    for path in sample.declared_content_paths():
        html, _codec = decode_html((SAMPLE_SITE_DIR / path).read_bytes())
        _title, lines = extract(html)
        text = "\n".join(lines)
        soup = BeautifulSoup(html, "html.parser")
        noise = [el.get_text(" ", strip=True) for el in soup.select(
            "[role=tooltip], [aria-hidden=true], [hidden], .tooltip, nav, .breadcrumb, footer, aside")]
        for snippet in noise:
            # Any distinctive stretch of boilerplate (not a one-word label shared with the text).
            if len(snippet) >= 12:
                assert snippet not in text, (path, snippet)
        checked += 1
    assert checked >= 30


from hypothesis import given, settings as hsettings, strategies as st  # noqa: E402

_ALPHABET = st.sampled_from(list("肺がんの治療ですEGFRmg2.5 「」（）。！？!?.\"' \n"))


@hsettings(max_examples=300, deadline=None)
@given(st.text(_ALPHABET, max_size=80))
def test_splitting_loses_nothing_and_cuts_only_after_a_sentence_end(text: str) -> None:
    parts = split_sentences(collapse(text))
    assert "".join(parts).replace(" ", "") == collapse(text).replace(" ", "")
    for part in parts[:-1]:
        assert part.rstrip("」』）)]］】〕〉》”’\"'")[-1:] in "。！？!?.", (text, parts)
    assert split_sentences(collapse(text)) == parts  # deterministic
