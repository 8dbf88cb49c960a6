"""`guiderag bench`: retrieval speed on generated Japanese corpora (prints numbers; not a test).

For each corpus size: pages of about 2,000 characters are generated from a vocabulary of
MeCab-analysable words (written here, combined into compounds and katakana names, drawn
with Zipf-like frequencies; fixed seed, so every run sees the same text). Then:

- index build throughput (analysis + matrices + saving) in characters per second, beside
  MeCab's raw throughput on the same text, one core (the faster of walking parseToNode's
  nodes and parse() with the default output);
- query latency of `ours` (p50, p95; one process, one thread) and of the protocol's
  refit-per-query (on a sample of the queries when it is slow: `protocol_queries` says
  how many);
- peak resident memory of this process (and of index worker processes).
"""
from __future__ import annotations

import itertools
import os
import random
import resource
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from guiderag.guideline import DEFAULT_GUIDELINE
from guiderag.scopes import PROTOCOL, RetrievalConfig
from guiderag.store import PageVersion

from .analyzer import tagger
from .protocol_text import protocol_nouns
from .build import build_data
from .index import make_analyzer
from .persist import load_data, save_data
from .pipeline_ours import OursRetriever
from .pipeline_protocol import ProtocolRetriever, page_text

SEED = 20261129
PAGE_CHARS = 2000
# The protocol's refit is timed until this many seconds are spent (at least 3 queries).
PROTOCOL_SECONDS = 30.0
PROTOCOL_MIN_QUERIES = 3

# A small hand-written vocabulary; compounds and katakana names extend it to thousands.
NOUNS = (
    "肺 胸 癌 薬 血液 細胞 組織 検査 治療 手術 放射線 副作用 症状 診断 病気 患者 家族 医師 看護師 病院 "
    "外来 入院 退院 食事 運動 睡眠 痛み 発熱 咳 息切れ 吐き気 食欲 体重 体力 呼吸 心臓 肝臓 腎臓 "
    "骨 脳 皮膚 神経 免疫 感染 予防 再発 転移 進行 病期 生存 効果 有効性 安全性 方法 結果 目的 "
    "時期 期間 回数 量 費用 制度 保険 相談 支援 情報 説明 同意 選択 判断 希望 不安 生活 仕事 "
    "遺伝子 変異 分子 標的 抗体 受容体 蛋白質 炎症 腫瘍 結節 影 画像 写真 造影 内視鏡 気管支 "
    "胸膜 胸水 リンパ節 血管 静脈 点滴 注射 錠剤 用量 休薬 減量 中止 継続 併用 単独 臨床 試験 "
    "研究 論文 指針 推奨 根拠 専門 施設 地域 在宅 介護 緩和 ケア 栄養 口内炎 脱毛 下痢 便秘 "
    "発疹 貧血 出血 疲労 倦怠感 しびれ むくみ 間質性 肺炎 喫煙 禁煙 飲酒 年齢 性別 体質"
).split()
VERBS = (
    "行う 受ける 調べる 選ぶ 決める 続ける 止める 使う 飲む 休む 話す 聞く 伝える 考える 相談する "
    "確認する 検討する 説明する 実施する 投与する 評価する 観察する 記録する 報告する 予約する"
).split()
ADJECTIVES = "強い 弱い 多い 少ない 早い 遅い 新しい 難しい 易しい 重い 軽い 高い 低い".split()
KANA = "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモラリルレロ"
DRUG_ENDINGS = ("マブ", "ニブ", "チン", "ゾール", "シン", "ド")
TEMPLATES = (
    "{n1}の{n2}について、{n3}を{v}ことがあります。",
    "{n1}では{n2}と{n3}を{v}ことが{a}です。",
    "{n1}の{n2}が{a}場合は、{n3}に{v}ください。",
    "{n1}を{v}前に、{n2}や{n3}を確認します。",
    "{n1}は{n2}の{n3}として{v}ことが推奨されます。",
    "{n1}と{n2}の関係は、{n3}によって{a}なります。",
)


@dataclass
class Corpus:
    pages: list[PageVersion]
    queries: list[str]
    chars: int


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    """Base words, two-word compounds and katakana drug-like names."""
    words = list(NOUNS)
    seen = set(words)
    while len(words) < size:
        if rng.random() < 0.7:
            word = rng.choice(NOUNS) + rng.choice(NOUNS)
        else:
            word = "".join(rng.choice(KANA) for _ in range(rng.randint(2, 4))) + rng.choice(DRUG_ENDINGS)
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def _zipf_picker(rng: random.Random, words: Sequence[str]) -> Callable[[int], list[str]]:
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) ** 1.05 for rank in range(len(words))))
    order = list(words)
    rng.shuffle(order)

    def pick(k: int) -> list[str]:
        return rng.choices(order, cum_weights=cumulative, k=k)

    return pick


def generate_corpus(n_pages: int, n_queries: int, seed: int = SEED) -> Corpus:
    """Deterministic pages of about PAGE_CHARS characters, and questions about them."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 4000 + 4 * n_pages)
    pick = _zipf_picker(rng, vocab)
    pages: list[PageVersion] = []
    chars = 0
    for i in range(n_pages):
        topic = pick(2)
        title = f"Q{i + 1} {topic[0]}の{topic[1]}について"
        lines = [title]
        size = len(title)
        section = 0
        while size < PAGE_CHARS:
            if len(lines) % 6 == 1:
                section += 1
                heading = f"{section}. {rng.choice(topic)}と{pick(1)[0]}"
                lines.append(heading)
                size += len(heading)
            sentences = []
            for _ in range(rng.randint(1, 3)):
                n = pick(3)
                if rng.random() < 0.5:
                    n[rng.randrange(3)] = rng.choice(topic)
                sentences.append(
                    rng.choice(TEMPLATES).format(
                        n1=n[0], n2=n[1], n3=n[2], v=rng.choice(VERBS), a=rng.choice(ADJECTIVES)
                    )
                )
            line = "".join(sentences)
            lines.append(line)
            size += len(line)
        chars += size + len(title)
        pages.append(
            PageVersion(
                page_id=i + 1, url=f"https://bench.invalid/guide/q{i + 1}.html", title=title,
                version=1, fetched_at="2026-01-01T00:00:00Z", content_hash=f"sha256:{i}",
                lines=tuple(lines),
            )
        )
    queries: list[str] = []
    forms = ("{a}の{b}について教えてください。", "{a}で{b}はどうなりますか？", "{a}と{b}の関係は？")
    for _ in range(n_queries):
        if rng.random() < 0.8:
            page = rng.choice(pages)
            words = [w for w in _words_of(page.lines[rng.randrange(1, len(page.lines))]) if len(w) > 1]
            a, b = (rng.sample(words, 2) if len(words) >= 2 else (page.title, page.title[:4]))
        else:  # out of scope: words never used by the generator
            a, b = rng.choice(("糖尿病", "骨折", "虫歯", "花粉症")), rng.choice(("眼鏡", "旅行", "料理"))
        queries.append(rng.choice(forms).format(a=a, b=b))
    return Corpus(pages=pages, queries=queries, chars=chars)


def _words_of(line: str) -> list[str]:
    return [w for w in NOUNS if w in line]


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (index workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def mecab_chars_per_s(texts: Sequence[str]) -> tuple[float, float]:
    """MeCab's raw throughput, (wall, CPU) chars/s, one core: the faster of two ways of
    getting MeCab's analysis of every text into Python, so the baseline is the least a
    Python program must pay: walking parseToNode's nodes (every node's surface and
    features read), and one parse() call per text with the dictionary's default output."""
    t = tagger()

    def walk() -> None:
        for text in texts:
            node = t.parseToNode(text)
            while node is not None:
                _ = node.surface, node.feature
                node = node.next

    def parse() -> None:
        for text in texts:
            t.parse(text)

    chars = sum(len(text) for text in texts)
    best_wall = best_cpu = 0.0
    for way in (walk, parse):
        started, cpu = time.perf_counter(), _cpu_s()
        way()
        wall, cpu = time.perf_counter() - started, _cpu_s() - cpu
        best_wall = max(best_wall, chars / max(1e-9, wall))
        best_cpu = max(best_cpu, chars / max(1e-9, cpu))
    return best_wall, best_cpu


def _percentile(values: Sequence[float], q: float) -> float:
    """Linear percentile, q in [0, 1]; NaN for no values."""
    return float(np.percentile(values, 100.0 * q)) if len(values) else float("nan")


def _rss_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0  # Linux: kilobytes


def run_size(n_pages: int, n_queries: int, config: RetrievalConfig, workdir: Path,
             log: Callable[[str], None] | None = None) -> dict:
    """One row of the benchmark."""
    say = log or (lambda msg: None)
    say(f"bench: generating {n_pages} pages")
    corpus = generate_corpus(n_pages, n_queries)
    texts = [p.title + "\n" + "\n".join(p.lines) for p in corpus.pages]
    say(f"bench: {n_pages} pages: MeCab raw throughput")
    mecab, mecab_cpu = mecab_chars_per_s(texts)
    del texts
    analyzer = make_analyzer(config)
    say(f"bench: {n_pages} pages: building the index")
    started, cpu = time.perf_counter(), _cpu_s()
    data = build_data(corpus.pages, f"bench:{n_pages}", config, analyzer)
    index_dir = workdir / f"index-{n_pages}"
    save_data(data, index_dir)
    build_s, build_cpu = time.perf_counter() - started, _cpu_s() - cpu
    chars, n_passages, n_terms = data.chars, data.n_passages, len(data.term_vocab)
    # the built index is let go before the saved one is loaded: a deployment builds in one
    # process and serves from another, never holding both copies
    del data
    started = time.perf_counter()
    loaded = load_data(index_dir)
    load_s = time.perf_counter() - started
    retriever = OursRetriever(config, corpus.pages, loaded, analyzer, guideline=DEFAULT_GUIDELINE)
    # warmed as a served library warms it (chatbot.library_cache): the tables read once per
    # process (wordfreq's, Sudachi's phrases) are not timed as one question's search
    retriever.warm()
    retriever.search(corpus.queries[0])
    say(f"bench: {n_pages} pages: {len(corpus.queries)} queries (ours)")
    ours_ms: list[float] = []
    governed = 0
    for q in corpus.queries:
        t0 = time.perf_counter()
        result = retriever.search(q)
        ours_ms.append((time.perf_counter() - t0) * 1000)
        governed += result.governed
    say(f"bench: {n_pages} pages: protocol (refit per query)")
    docs = [protocol_nouns(page_text(p)) for p in corpus.pages]
    protocol = ProtocolRetriever(replace(config, pipeline=PROTOCOL), corpus.pages, "bench", docs=docs,
                                  guideline=DEFAULT_GUIDELINE)
    proto_ms: list[float] = []
    spent = 0.0
    for q in corpus.queries:
        if len(proto_ms) >= PROTOCOL_MIN_QUERIES and spent > PROTOCOL_SECONDS:
            break
        t0 = time.perf_counter()
        protocol.search(q)
        dt = time.perf_counter() - t0
        proto_ms.append(dt * 1000)
        spent += dt
    p50 = _percentile(ours_ms, 0.5)
    proto_p50 = _percentile(proto_ms, 0.5)
    return {
        "pages": n_pages,
        "query_p50_ms": round(p50, 3),
        "query_p95_ms": round(_percentile(ours_ms, 0.95), 3),
        "protocol_query_p50_ms": round(proto_p50, 1),
        "index_chars_per_s": round(chars / build_s),
        "mecab_chars_per_s": round(mecab),
        "peak_rss_mb": round(_rss_mb(resource.RUSAGE_SELF), 1),
        # additive fields
        "queries": len(ours_ms),
        "queries_governed": governed,
        "protocol_queries": len(proto_ms),
        "protocol_sampled": len(proto_ms) < len(ours_ms),
        "protocol_query_p95_ms": round(_percentile(proto_ms, 0.95), 1),
        "speedup_vs_protocol": round(proto_p50 / p50, 1) if p50 > 0 else None,
        "chars": chars,
        "passages": n_passages,
        "terms": n_terms,
        "index_build_s": round(build_s, 2),
        "index_load_s": round(load_s, 3),
        "index_workers": config.index_workers,
        "index_vs_mecab": round((chars / build_s) / mecab, 2),
        # per CPU second (robust to other load on the machine; workers' CPU included)
        "index_cpu_chars_per_s": round(chars / max(1e-9, build_cpu)),
        "mecab_cpu_chars_per_s": round(mecab_cpu),
        "index_vs_mecab_cpu": round((chars / max(1e-9, build_cpu)) / mecab_cpu, 2),
        "load_average": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "peak_rss_children_mb": round(_rss_mb(resource.RUSAGE_CHILDREN), 1),
    }


def run(sizes: Sequence[int], n_queries: int, config: RetrievalConfig, log: Callable[[str], None] | None = None) -> dict:
    """The benchmark over every corpus size, in one process (no progress bars)."""
    with tempfile.TemporaryDirectory(prefix="guiderag-bench-") as tmp:
        runs = [run_size(n, n_queries, config, Path(tmp), log) for n in sizes]
    return {
        "runs": runs,
        "notes": [
            "query latency: one process, one thread, in-process search() including analysis",
            f"protocol: TfidfVectorizer refitted per query over cached page nouns; timed until "
            f"{PROTOCOL_SECONDS:.0f} s were spent (at least {PROTOCOL_MIN_QUERIES} queries): see protocol_queries",
            "mecab_chars_per_s: one core; index_chars_per_s uses index_workers processes; "
            "the *_cpu_* fields divide by CPU seconds instead (load_average: other work on the machine)",
            "peak_rss_mb: this process's peak so far (sizes run in increasing order)",
        ],
    }
