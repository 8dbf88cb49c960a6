"""Two small guideline sites (our own demo text) for the tests of a store of several
guidelines: a thymic-tumour guide and a gastric-cancer guide, each a sitekit.Site with a
table of contents at /<name>/index.html. Both use the same generic vocabulary (手術,
治療, 副作用) besides their own, so routing has something to decide."""
from __future__ import annotations

from sitekit import Site, html_page, toc_html

THYMUS_PAGES = {
    "q1.html": ("Q1 胸腺腫とはどのような病気ですか？", [
        "胸腺腫は、胸の中央にある胸腺という臓器から発生する腫瘍です。",
        "胸腺腫はゆっくり大きくなることが多く、症状がないまま健康診断で見つかることもあります。",
    ]),
    "q2.html": ("Q2 胸腺腫の治療にはどのような方法がありますか？", [
        "胸腺腫の治療の中心は、腫瘍を胸腺ごと取り除く手術です。",
        "手術で取りきれない場合には、放射線治療や薬物療法を組み合わせることがあります。",
    ]),
    "q3.html": ("Q3 重症筋無力症とはどのような病気ですか？", [
        "重症筋無力症は、まぶたが下がったり、物が二重に見えたりする病気で、胸腺腫に伴って起こることがあります。",
        "重症筋無力症がある場合は、神経内科の医師と相談しながら治療を進めます。",
    ]),
}
GASTRIC_PAGES = {
    "q1.html": ("Q1 胃がんとはどのような病気ですか？", [
        "胃がんは、胃の内側をおおう粘膜の細胞ががんになることで起こります。",
        "早期の胃がんは症状がないことが多く、胃カメラの検査で見つかることがあります。",
    ]),
    "q2.html": ("Q2 胃を切除した後の食事はどうすればよいですか？", [
        "胃を切除した後は、一度にたくさん食べずに、食事を一日五回から六回に分けてゆっくり食べます。",
        "よくかんで食べることで、ダンピング症候群を起こしにくくなります。",
    ]),
    "q3.html": ("Q3 ダンピング症候群とは何ですか？", [
        "ダンピング症候群は、胃を切除した後に食べ物が急に腸へ流れ込むことで起こる症状です。",
        "食後に冷や汗やめまい、動悸が出ることがあり、食べ方の工夫で軽くなります。",
    ]),
}


def guide_site(folder: str, title: str, pages: dict[str, tuple[str, list[str]]], *, etag: bool = False) -> Site:
    """A site with /<folder>/index.html linking each page, and an about page outside the guide."""
    site = Site()
    links = [(name, heading) for name, (heading, _) in pages.items()] + [("/about.html", "このサイトについて")]
    site.page(f"/{folder}/index.html", toc_html(links, title=title), etag=etag)
    for name, (heading, lines) in pages.items():
        body = "".join(f"<p>{line}</p>" for line in lines)
        site.page(f"/{folder}/{name}", html_page(heading, f"<main><h1>{heading}</h1>{body}</main>"), etag=etag)
    site.page("/about.html", html_page("about", "<main><h1>このサイトについて</h1><p>デモです。</p></main>"))
    return site


def thymus_site(**kw: bool) -> Site:
    return guide_site("thymus", "胸腺腫瘍ガイドブック（デモ）", THYMUS_PAGES, **kw)


def gastric_site(**kw: bool) -> Site:
    return guide_site("gastric", "胃がんガイドブック（デモ）", GASTRIC_PAGES, **kw)
