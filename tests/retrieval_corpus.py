"""A small guideline-like corpus (written for these tests) stored in a real Store."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from guiderag.settings import Settings
from guiderag.store import FetchedPage, Store

BASE = "http://127.0.0.1/guide/"

LUNG = (
    "Q1 肺がんとはどのような病気ですか",
    "肺がんは、気管支や肺胞の細胞ががん化してできる病気です。",
    "進行すると、がん細胞が周りの組織に広がったり、血液やリンパの流れにのって転移したりします。",
    "主な原因として喫煙が知られていますが、たばこを吸わない人にも起こります。",
)
DRUGS = (
    "Q2 薬物療法の副作用にはどのようなものがありますか",
    "副作用について",
    "薬物療法では、吐き気、脱毛、口内炎などの副作用があらわれることがあります。",
    "EGFR遺伝子変異がある場合には、オシメルチニブなどの分子標的薬を使うことがあります。",
    "PD-L1の発現を調べてから、免疫チェックポイント阻害薬を選ぶこともあります。",
    "副作用がつらいときは、我慢せずに担当の医師や看護師に早めに伝えてください。",
)
THYMUS = (
    "Q3 胸腺腫はどのように治療しますか",
    "胸腺腫は、胸の中央にある胸腺という臓器にできる腫瘍です。",
    "治療の基本は手術で、腫瘍を胸腺ごと切り取ります。",
    "手術が難しい場合には、放射線治療を行うことがあります。",
)
# A long page whose answer sits far from its top.
HOSPITAL = (
    "Q4 治療を受ける病院はどのように選べばよいですか",
    "病院選びの考え方",
    "治療を受ける病院は、通いやすさや設備、専門の医師がいるかどうかなどを考えて選びます。",
    "地域の拠点病院では、多くの患者さんを診ている専門チームが治療にあたります。",
    "自宅から遠い病院を選ぶと、通院のたびに体力を使うことも考えておきましょう。",
    "家族の付き添いがしやすいかどうかも、大切な判断の材料になります。",
    "入院中の面会の時間や駐車場の有無なども、事前に確かめておくと安心です。",
    "費用について",
    "高額療養費制度を使うと、ひと月に支払う医療費の上限が決まります。",
    "申請の方法は、加入している健康保険の窓口で教えてもらえます。",
    "仕事を休む場合には、傷病手当金を受け取れることがあります。",
    "別の医師の意見を聞く",
    "診断や治療方針について、主治医以外の医師の意見を聞くことができます。",
    "セカンドオピニオンを受けるときは、紹介状と検査結果の資料を主治医に用意してもらいます。",
    "意見を聞いたあとは、もう一度主治医と話し合って治療を決めます。",
)
PAGES = {"q1.html": LUNG, "q2.html": DRUGS, "q3.html": THYMUS, "q4.html": HOSPITAL}


def fetched(name: str, lines: Sequence[str]) -> FetchedPage:
    return FetchedPage(url=BASE + name, title=lines[0], lines=tuple(lines))


def write_pages(db: Path, pages: dict[str, Sequence[str]] | None = None) -> None:
    """Commit one scrape run holding exactly `pages` (default: the corpus above)."""
    pages = PAGES if pages is None else pages
    with Store(db) as store:
        run = store.begin_run(BASE + "index.html")
        items = [fetched(name, lines) for name, lines in pages.items()]
        store.commit_run(run, items, content_urls=[p.url for p in items])


def settings_for(db: Path, **overrides) -> Settings:
    """Settings with a store at `db`, no progress bar and no synonym file unless given."""
    overrides.setdefault("synonyms", None)
    synonyms = overrides.pop("synonyms")
    settings = Settings.load(env={}, db=db, progress=False, **overrides)
    if synonyms is None:
        # an empty synonym file: tests do not depend on data/synonyms.tsv
        empty = db.with_name(db.name + ".synonyms.tsv")
        empty.write_text("# none\n", encoding="utf-8")
        synonyms = empty
    return settings.replace(synonyms=Path(synonyms))
