"""retrieval.channel_sums against the plain scipy arithmetic it replaced, to the last bit.

The channel shares were once computed with scipy slices over the whole ROW LAYOUT
(`matrix[:, cols] @ weights`, then each slot with several alternatives or a compound's
words added after them); `reference_rows` below is that code, kept as the reference. The
gathers of ChannelSums (head rows at once, span rows searched for or summed at once) must
give the same float32 numbers, on a real index (MeCab, a generated corpus) with random
slots: single alternatives, several, compounds through their words, repeated columns.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from guiderag.retrieval import channel_sums, scoring
from guiderag.retrieval.bench import generate_corpus
from guiderag.retrieval.build import build_data
from guiderag.retrieval.channel_sums import ChannelSums, Columns, SlotSpec
from guiderag.retrieval.index import make_analyzer
from guiderag.retrieval.pipeline_ours import OursRetriever
from guiderag.settings import Settings


def _ones(matrix: sp.csc_matrix) -> sp.csc_matrix:
    out = matrix.copy()
    out.data = np.ones_like(out.data)
    return out


def reference_rows(matrix: sp.csc_matrix, specs: list[SlotSpec]) -> tuple[np.ndarray, np.ndarray]:
    """(shares, presence shares) of every row: the scipy code ChannelSums replaced."""
    mass = sum(x.mass for x in specs)
    lin_cols = [x.cols[0][0] for x in specs if len(x.cols) == 1 and not x.parts]
    lin_w = [x.mass * x.cols[0][1] / mass for x in specs if len(x.cols) == 1 and not x.parts]
    multi = [x for x in specs if not (len(x.cols) == 1 and not x.parts) and (x.cols or x.parts)]
    n = matrix.shape[0]
    values = np.zeros(n, dtype=np.float32)
    present = np.zeros(n, dtype=np.float32)
    if lin_cols:
        vec = np.asarray(lin_w, dtype=np.float32)
        sub = matrix[:, lin_cols]
        values += sub @ vec
        present += _ones(sub) @ vec
    for x in multi:
        part = np.float32(x.mass / mass)
        for target, ones in ((values, False), (present, True)):
            column = np.zeros(n, dtype=np.float32)
            for c, lam in x.cols:
                w = np.asarray((_ones(matrix[:, [c]]) if ones else matrix[:, [c]]).todense(), dtype=np.float32).ravel()
                column = np.maximum(column, np.float32(lam) * w)
            if x.parts:
                sub = matrix[:, x.parts]
                least = np.asarray((_ones(sub) if ones else sub).min(axis=1).todense(), dtype=np.float32).ravel()
                if x.together is not None:
                    least = least * x.together
                column = np.maximum(column, np.float32(x.parts_weight) * least)
            target += part * column
    return values, present


@pytest.fixture(scope="module")
def index():
    corpus = generate_corpus(40, 40, seed=31)
    settings = Settings.load(env={}, progress=False, index_workers=1)
    analyzer = make_analyzer(settings.retrieval)
    data = build_data(corpus.pages, "v", settings.retrieval, analyzer)
    return corpus, settings, analyzer, data


def _random_specs(rng: np.random.Generator, matrix: sp.csc_matrix, n_rows: int) -> list[SlotSpec]:
    common = np.argsort(-np.diff(matrix.indptr))[:40]  # columns with many entries: real overlaps
    specs = []
    for _ in range(int(rng.integers(1, 7))):
        kind = rng.integers(4)
        cols = [int(c) for c in rng.choice(common, size=int(rng.integers(1, 4)))]  # repeats allowed
        spec = SlotSpec(float(rng.uniform(0.2, 3.0)), [(c, float(rng.uniform(0.3, 1.0))) for c in cols])
        if kind == 0:
            spec.cols = spec.cols[:1]
        elif kind == 1:
            spec.cols = []  # found through its words only
        if kind in (1, 2):
            spec.parts = [int(c) for c in rng.choice(common, size=2, replace=False)]
            spec.parts_weight = float(rng.uniform(0.3, 0.9))
            if rng.random() < 0.7:
                spec.together = rng.random(n_rows) < 0.5
        specs.append(spec)
    return specs


@pytest.mark.parametrize("channel", ["terms", "bigrams"])
def test_channel_sums_are_the_scipy_sums(index, channel: str, monkeypatch) -> None:
    """Head rows, span rows searched for a few at a time, and every span row at once: the
    reference's float32 numbers, exactly."""
    _, _, _, data = index
    matrix = data.terms if channel == "terms" else data.bigrams
    head = data.n_passages + data.n_pages
    rng = np.random.default_rng(5)
    checked = nonzero = 0
    for _ in range(60):
        specs = _random_specs(rng, matrix, matrix.shape[0])
        want, want_present = reference_rows(matrix, specs)
        sums = ChannelSums(Columns(matrix, data.n_passages, data.n_pages), specs)
        got, got_present = sums.head_rows(True)
        assert np.array_equal(got, want[:head]) and np.array_equal(got_present, want_present[:head])
        few = rng.choice(data.n_spans, size=12)  # unsorted, repeats: as a passage's ranges give them
        monkeypatch.setattr(channel_sums, "SPAN_DENSE_SHARE", 0)  # searched for, column by column
        assert not sums.dense_better(len(few))
        assert np.array_equal(sums.spans(few), want[head:][few])
        monkeypatch.setattr(channel_sums, "SPAN_DENSE_SHARE", 10**6)
        assert sums.dense_better(len(few))
        assert np.array_equal(sums.all_spans(), want[head:])
        assert np.array_equal(sums.spans(few), want[head:][few])  # from the dense sums now
        checked += 1
        nonzero += int((want > 0).sum())
    assert checked == 60 and nonzero > 1000


@pytest.mark.parametrize("path", ["table", "ranges", "searched"])
def test_every_path_to_the_span_factor_gives_the_same_scores(index, monkeypatch, path: str) -> None:
    """Every passage's best span from the sparse table of every span's shares (asked for
    every passage, or for spans enough), from the spans searched for one by one, or from
    every span summed and read range by range: the same scores, exactly, in query_scores
    and in the hits of the search."""
    corpus, settings, analyzer, data = index
    retriever = OursRetriever(settings.retrieval, corpus.pages, data, analyzer, guideline="default")
    thresholds = retriever._thresholds()
    baseline = {}
    for question in corpus.queries:
        query = retriever.query(question)[0]
        hits = retriever.scorer.query_hits(query, thresholds, 0.01)
        baseline[question] = (retriever.query_scores(query)[0], hits.rows, hits.scores)
    if path == "table":  # always every passage's best span at once
        monkeypatch.setattr(scoring, "ALL_RANGES_SHARE", 10**9)
    else:
        monkeypatch.setattr(scoring, "ALL_RANGES_SHARE", 0)
        monkeypatch.setattr(scoring._Mix, "dense_better", lambda self, n: False)
        if path == "ranges":  # every span summed, each range's maximum read apart
            monkeypatch.setattr(scoring._Mix, "span", lambda self, rows: self.all_spans()[rows])
        else:  # each wanted span searched for in the query's columns
            monkeypatch.setattr(channel_sums, "SPAN_DENSE_SHARE", 0)
    other = OursRetriever(settings.retrieval, corpus.pages, data, analyzer, guideline="default")
    scored = 0
    for question in corpus.queries:
        query = other.query(question)[0]
        every, rows, scores = baseline[question]
        hits = other.scorer.query_hits(query, thresholds, 0.01)
        assert np.array_equal(other.query_scores(query)[0], every), question
        assert np.array_equal(hits.rows, rows) and np.array_equal(hits.scores, scores), question
        scored += int((every > 0).sum())
    assert scored > 100


def test_the_numpy_fallback_adds_a_column_as_scipys_loop_does(index, monkeypatch) -> None:
    """add_column without scipy's C loop (a scipy that lacks it): the same float32 numbers,
    column after column, as the loop the sums use."""
    _, _, _, data = index
    matrix = data.terms
    rng = np.random.default_rng(11)
    cols = [int(c) for c in rng.choice(np.argsort(-np.diff(matrix.indptr))[:30], size=8)]
    weights = rng.uniform(0.01, 2.0, size=len(cols)).astype(np.float32)
    outs = []
    for loop in (channel_sums._csc_matvec, None):
        monkeypatch.setattr(channel_sums, "_csc_matvec", loop)
        out = np.zeros(matrix.shape[0], dtype=np.float32)
        for c, w in zip(cols, weights):
            a, b = matrix.indptr[c], matrix.indptr[c + 1]
            channel_sums.add_column(out, matrix.indices[a:b], matrix.data[a:b], w)
        outs.append(out)
    assert channel_sums._csc_matvec is None and (outs[0] > 0).sum() > 100
    assert np.array_equal(outs[0], outs[1])
    assert np.array_equal(outs[0], (matrix[:, cols] @ weights).astype(np.float32))


def test_a_columns_levels_are_where_its_rows_lie(index) -> None:
    """Columns.bounds and page_bounds: each column's entries in the head rows, the page rows
    and the span rows are those whose row lies in the level (evidence reads the page rows)."""
    _, _, _, data = index
    for matrix in (data.terms, data.bigrams):
        columns = Columns(matrix, data.n_passages, data.n_pages)
        levels = {"head": slice(0, data.n_passages + data.n_pages), "pages": data.rows("pages"), "spans": data.rows("spans")}
        seen = 0
        for c in np.argsort(-np.diff(matrix.indptr))[:50].tolist() + [0, matrix.shape[1] - 1]:
            rows = matrix.indices[matrix.indptr[c]:matrix.indptr[c + 1]]
            found = {"pages": columns.page_bounds(c), "head": columns.bounds(c, True), "spans": columns.bounds(c, False)}
            for name, (a, b) in found.items():
                level = levels[name]
                assert np.array_equal(matrix.indices[a:b], rows[(rows >= level.start) & (rows < level.stop)])
                seen += b - a
        assert seen > 1000
