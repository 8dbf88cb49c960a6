"""The index on disk: .npz + JSON, versioned folders, atomic swap, damage detection, rebuild."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import scipy.sparse as sp

from guiderag import retrieval
from guiderag.errors import IndexCorruptError, IndexWriteError
from guiderag.cli import main
from guiderag.retrieval.persist import load_data, save_data
from guiderag.retrieval import passages
from guiderag.retrieval.lines import LineData
from retrieval_corpus import BASE, LUNG, PAGES, settings_for, write_pages


@pytest.fixture
def settings(tmp_path):
    write_pages(tmp_path / "g.db")
    return settings_for(tmp_path / "g.db")


def _current(settings):
    return settings.guideline_scope("default").index_dir / (settings.guideline_scope("default").index_dir / "CURRENT").read_text(encoding="utf-8").strip()


def test_build_writes_npz_json_and_text_only(settings):
    info = retrieval.build_index(settings.retrieval, settings.storage)
    assert info.pages == 4 and info.passages >= 4 and info.terms > 0
    folder = _current(settings)
    assert folder == info.path
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted(["manifest.json", "vocab.json", "arrays.npz", "terms.npz", "bigrams.npz",
                            "lines.npz", "lines.txt"])
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["corpus_version"] == info.corpus_version
    assert manifest["format"] == "guiderag-index/7"
    assert [p[0] for p in manifest["pages"]] == sorted(BASE + n for n in PAGES)
    # readable without pickle
    with np.load(folder / "arrays.npz", allow_pickle=False) as arrays:
        assert arrays["passage_page"].shape == (info.passages,)
        spans = int(arrays["n_spans"][0])
    # one matrix per channel: the passages' rows, the pages', the line spans'
    assert sp.load_npz(folder / "terms.npz").shape[0] == info.passages + info.pages + spans
    with np.load(folder / "lines.npz", allow_pickle=False) as lines:
        # every page's title and lines: one text each
        assert lines["gives"].shape == (sum(1 + len(PAGES[n]) for n in PAGES),)


def test_an_index_of_the_previous_format_is_rebuilt_not_read(settings, capsys):
    retrieval.build_index(settings.retrieval, settings.storage)
    folder = _current(settings)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest["format"] = "guiderag-index/6"  # what a guiderag before the stored line analyses wrote
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(IndexCorruptError, match="has format 'guiderag-index/6', expected guiderag-index/7"):
        load_data(settings.guideline_scope("default").index_dir)
    retriever = retrieval.load_retriever(settings.retrieval, settings.storage)
    assert "rebuilding" in capsys.readouterr().err
    assert _current(settings) != folder
    assert retriever.search("胸腺腫の手術").governed


def test_load_reuses_a_valid_index(settings, capsys):
    retrieval.build_index(settings.retrieval, settings.storage)
    folder = _current(settings)
    retriever = retrieval.load_retriever(settings.retrieval, settings.storage)
    assert retriever.data.path == folder
    assert "rebuilding" not in capsys.readouterr().err
    assert _current(settings) == folder


def test_missing_index_is_built_on_load(settings, capsys):
    retriever = retrieval.load_retriever(settings.retrieval, settings.storage)
    assert "rebuilding" in capsys.readouterr().err
    assert (settings.guideline_scope("default").index_dir / "CURRENT").exists()
    assert retriever.search("胸腺腫の手術").governed


def test_rescrape_rebuilds_automatically(settings, capsys):
    retrieval.build_index(settings.retrieval, settings.storage)
    old = _current(settings)
    changed = dict(PAGES)
    changed["q1.html"] = LUNG + ("肺がんの検診では、胸部エックス線検査と喀痰細胞診を行います。",)
    write_pages(settings.storage.db, changed)
    retriever = retrieval.load_retriever(settings.retrieval, settings.storage)
    assert "was built from corpus" in capsys.readouterr().err
    assert _current(settings) != old
    result = retriever.search("喀痰細胞診とは何ですか")
    assert result.governed and result.candidates[0].url == BASE + "q1.html"
    # the newest previous version is kept for readers still loading it, older ones go
    retrieval.build_index(settings.retrieval, settings.storage)
    retrieval.build_index(settings.retrieval, settings.storage)
    assert len(list(settings.guideline_scope("default").index_dir.glob("v-*"))) == 2


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda f: (f / "terms.npz").write_bytes(b"not a zip file"), "checksum"),
        (lambda f: (f / "lines.txt").write_text("damaged", encoding="utf-8"), "checksum"),
        (lambda f: (f / "vocab.json").unlink(), "missing vocab.json"),
        (lambda f: (f / "manifest.json").write_text("{", encoding="utf-8"), "cannot be read"),
    ],
)
def test_damaged_index_gives_a_clear_message_and_is_rebuilt(settings, capsys, damage, message):
    retrieval.build_index(settings.retrieval, settings.storage)
    damage(_current(settings))
    with pytest.raises(IndexCorruptError, match=message) as info:
        load_data(settings.guideline_scope("default").index_dir)
    assert "guiderag index" in str(info.value)
    retriever = retrieval.load_retriever(settings.retrieval, settings.storage)
    err = capsys.readouterr().err
    assert message in err and "rebuilding" in err
    assert retriever.search("胸腺腫の手術").governed
    load_data(settings.guideline_scope("default").index_dir)  # the rebuilt one is sound


def test_current_pointer_problems(settings):
    with pytest.raises(IndexCorruptError, match="does not exist yet"):
        load_data(settings.guideline_scope("default").index_dir)
    retrieval.build_index(settings.retrieval, settings.storage)
    (settings.guideline_scope("default").index_dir / "CURRENT").write_text("../../etc\n", encoding="utf-8")
    with pytest.raises(IndexCorruptError, match="not an index version"):
        load_data(settings.guideline_scope("default").index_dir)


def test_a_failed_build_leaves_the_previous_index_in_use(settings, monkeypatch, capsys):
    retrieval.build_index(settings.retrieval, settings.storage)
    before = _current(settings)
    calls = {"n": 0}
    real = sp.save_npz

    def failing(path, matrix, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        return real(path, matrix, **kw)

    monkeypatch.setattr(sp, "save_npz", failing)
    with pytest.raises(IndexWriteError, match="disk full.*previous index is unchanged"):
        retrieval.build_index(settings.retrieval, settings.storage)
    assert _current(settings) == before
    assert not list(settings.guideline_scope("default").index_dir.glob("tmp-*"))  # the half-built folder is gone
    # a stale index that cannot be replaced: answers come from one built in memory
    write_pages(settings.storage.db, {**PAGES, "q1.html": LUNG + ("肺がんの検診では喀痰細胞診を行います。",)})
    calls["n"] = 0
    retriever = retrieval.load_retriever(settings.retrieval, settings.storage)
    assert "index built in memory" in capsys.readouterr().err
    assert retriever.search("喀痰細胞診").governed
    monkeypatch.undo()
    assert _current(settings) == before
    load_data(settings.guideline_scope("default").index_dir)


def test_other_analyzer_or_passage_parameters_force_a_rebuild(settings, capsys, monkeypatch):
    retrieval.build_index(settings.retrieval, settings.storage)
    monkeypatch.setattr(passages, "PASSAGE_CHARS", 120)  # a guiderag with other passages
    retrieval.load_retriever(settings.retrieval, settings.storage)
    assert "other analyzer or passage settings" in capsys.readouterr().err


def test_save_and_load_round_trip(settings):
    retrieval.build_index(settings.retrieval, settings.storage)
    data = load_data(settings.guideline_scope("default").index_dir)
    folder = save_data(data, settings.guideline_scope("default").index_dir)
    again = load_data(settings.guideline_scope("default").index_dir)
    assert again.path == folder
    assert again.term_vocab == data.term_vocab
    assert (again.terms != data.terms).nnz == 0 and (again.bigrams != data.bigrams).nnz == 0
    for name in again.lines.ARRAYS:
        assert np.array_equal(getattr(again.lines, name), getattr(data.lines, name))
    assert again.lines.flat == data.lines.flat and again.lines.extra_terms == data.lines.extra_terms
    assert np.array_equal(again.term_idf, data.term_idf)


def test_an_index_whose_passages_leave_page_order_is_refused(settings):
    """The search reads each page's passages as one run (retrieval.pipeline_ours._candidates)."""
    retrieval.build_index(settings.retrieval, settings.storage)
    folder = settings.guideline_scope("default").index_dir
    data = load_data(folder)
    assert data.n_pages > 1 and (np.diff(data.passage_page) >= 0).all()
    save_data(dataclasses.replace(data, passage_page=data.passage_page[::-1].copy()), folder)
    with pytest.raises(IndexCorruptError, match="passages out of page order"):
        load_data(folder)


def test_index_command(settings, monkeypatch, capsys):
    monkeypatch.setenv("GUIDERAG_SYNONYMS", str(settings.retrieval.synonyms))
    assert main(["index", "--db", str(settings.storage.db), "--no-progress"]) == 0
    assert "indexed 4 pages" in capsys.readouterr().err
    assert (settings.guideline_scope("default").index_dir / "CURRENT").exists()


def test_index_command_on_an_empty_store_exits_2(tmp_path, capsys):
    db = tmp_path / "empty.db"
    write_pages(db, {})
    assert main(["index", "--db", str(db), "--no-progress"]) == 2
    assert "scrape" in capsys.readouterr().err


def _by_term(data):
    """The index's matrices with columns in term order, so builds whose vocabularies were
    numbered differently compare equal when they hold the same values."""
    out = {}
    for kind, vocab in (("terms", data.term_vocab), ("bigrams", data.bigram_vocab)):
        order = np.argsort(np.array(sorted(vocab, key=vocab.get), dtype=object))
        out[kind] = sorted(vocab)
        for level in ("passages", "spans", "pages"):
            m = data.level(kind, level)[:, order].tocsr()
            m.sum_duplicates()
            out[f"{level}_{kind}"] = m
    return out


def _line_terms(data):
    """Each stored text's line terms, as strings (builds number their terms differently)."""
    vocab = [*sorted(data.term_vocab, key=data.term_vocab.get), *data.lines.extra_terms]
    ptr, ids = data.lines.term_ptr, data.lines.term_ids
    return [sorted(vocab[j] for j in ids[ptr[i]:ptr[i + 1]]) for i in range(data.lines.n_texts)]


def test_parallel_chunked_build_equals_the_serial_build(monkeypatch):
    """Worker processes, chunks of pages and vocabulary merging change nothing: the same
    matrices, value for value, as one process analysing page by page."""
    from guiderag.retrieval import build as index
    from guiderag.retrieval.bench import generate_corpus
    from guiderag.settings import Settings

    pages = generate_corpus(30, 1).pages
    base = Settings().replace(progress=False)
    analyzer = index.make_analyzer(base.retrieval)
    serial = index.build_data(pages, "v", dataclasses.replace(base.retrieval, index_workers=1), analyzer)
    monkeypatch.setattr(index, "_PARALLEL_MIN_CHARS", 0)
    monkeypatch.setattr(index, "_CHUNK_PAGES", 3)  # several chunks per worker
    parallel = index.build_data(pages, "v", dataclasses.replace(base.retrieval, index_workers=2), analyzer)
    a, b = _by_term(serial), _by_term(parallel)
    assert a["terms"] == b["terms"] and a["bigrams"] == b["bigrams"]
    for key in a:
        if key not in ("terms", "bigrams"):
            assert a[key].shape == b[key].shape and (a[key] != b[key]).nnz == 0, key
    for name in ("passage_page", "passage_heading", "passage_first", "passage_last",
                 "passage_span_first", "passage_span_end"):
        assert np.array_equal(getattr(serial, name), getattr(parallel, name)), name
    assert serial.chars == parallel.chars > 30 * 1500
    # the line analyses made in the workers are the same as made in one process
    assert _line_terms(serial) == _line_terms(parallel)
    for name in ("text_first", "gives", "context", "flat_ptr"):
        assert np.array_equal(getattr(serial.lines, name), getattr(parallel.lines, name)), name
    assert serial.lines.flat == parallel.lines.flat


def test_chunk_rows_count_like_numpy_unique_per_row():
    """The build's row counting (rows of text ranges) against the obvious reference."""
    from guiderag.retrieval.build import _count_rows

    rng = np.random.default_rng(7)
    texts = [rng.integers(0, 40, size=rng.integers(0, 12)) for _ in range(9)]
    ends = list(np.cumsum([len(t) for t in texts]))
    flat = np.concatenate(texts).astype(np.int32)
    rows = [[(0, 1), (3, 6)], [(0, 9), (0, 0)], [(2, 2), (0, 0)], [(8, 9), (0, 0)], [(4, 5), (5, 7)]]  # (0, 0): none
    ids, counts, lengths = _count_rows(flat, np.asarray([0, *ends]), np.asarray(rows), 40)
    start = 0
    for r, ranges in enumerate(rows):
        want = np.concatenate([np.empty(0, np.int64)] + [texts[i] for a, b in ranges for i in range(a, b)])
        uniq, n = np.unique(want, return_counts=True)
        got = slice(start, start + lengths[r])
        assert np.array_equal(ids[got], uniq) and np.array_equal(counts[got], n), r
        start += lengths[r]
    assert start == len(ids)


def test_the_line_repeating_the_title_is_no_passage_of_its_own():
    """A Q&A page's title line ends like a sentence (Q29 ...ですか？), so it is a body
    line; every passage is headed by the title already, so it is skipped, not made into a
    passage of the title alone. A short title line stays its section's heading."""
    from guiderag.retrieval.passages import line_spans, segment
    from guiderag.store.structure import title_line as title_line_number

    lines = ("第8章 胸腺腫瘍", "Q29 胸腺腫瘍の診断方法にはどのようなものがありますか？", "画像検査",
             "胸部CT検査で腫瘍の大きさを調べます。", "MRI検査を行うこともあります。")
    title = "Q29　胸腺腫瘍の診断方法にはどのようなものがありますか？"  # as <title>: full-width space
    assert title_line_number(title, lines) == 2
    assert segment(lines, 300, 40) == [(1, 2, 2), (3, 4, 5)]
    assert segment(lines, 300, 40, skip=2) == [(3, 4, 5)]
    assert [line for _, line in line_spans(lines, 40, skip=2)] == [4, 5]
    assert title_line_number("別のページ", lines) == 0


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_the_text_cache_changes_nothing_in_the_built_index(workers, monkeypatch):
    """Each process keeps the analysis of the texts it met (as id arrays in its own
    vocabulary): a cache too small to hold a page, cleared again and again, builds the same
    index, array for array and in the same term order, as one that holds every text, on
    pages whose footers, headings and titles recur."""
    from guiderag.retrieval import build as index
    from guiderag.retrieval.bench import generate_corpus
    from guiderag.settings import Settings

    footer = "ご不明な点は主治医にご相談ください。EGFR陽性、PD-L1、８０ｍｇ、２週間ごと。"
    pages = [dataclasses.replace(p, lines=(*p.lines[:3], "1. 治療について", footer, *p.lines[3:], footer))
             for p in generate_corpus(24, 1).pages]
    config = dataclasses.replace(Settings().replace(progress=False).retrieval, index_workers=workers)
    analyzer = index.make_analyzer(config)
    monkeypatch.setattr(index, "_PARALLEL_MIN_CHARS", 0)
    monkeypatch.setattr(index, "_CHUNK_PAGES", 4)
    whole = index.build_data(pages, "v", config, analyzer)
    monkeypatch.setattr(index, "_TEXT_CACHE", 3)
    small = index.build_data(pages, "v", config, analyzer)
    assert list(whole.term_vocab) == list(small.term_vocab) and list(whole.bigram_vocab) == list(small.bigram_vocab)
    for name in ("terms", "bigrams"):
        a, b = getattr(whole, name), getattr(small, name)
        assert a.format == b.format == "csc" and a.shape == b.shape
        for part in ("indptr", "indices", "data"):
            assert np.array_equal(getattr(a, part), getattr(b, part)), (name, part)
    for name in LineData.ARRAYS:
        assert np.array_equal(getattr(whole.lines, name), getattr(small.lines, name)), name
    assert whole.lines.flat == small.lines.flat and whole.lines.extra_terms == small.lines.extra_terms
    assert whole.lines.n_texts == sum(1 + len(p.lines) for p in pages)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_build_pauses_the_cycle_collector_and_restores_it(enabled, monkeypatch):
    """The cycle collector is off while the build runs (full collections would rescan all
    it has made) and back as it was after, also when the build fails half-way."""
    import gc

    from guiderag.retrieval import build as index
    from guiderag.retrieval.bench import generate_corpus
    from guiderag.settings import Settings

    pages = generate_corpus(6, 1).pages
    config = dataclasses.replace(Settings().replace(progress=False).retrieval, index_workers=1)
    analyzer = index.make_analyzer(config)
    seen: list[bool] = []
    stack = index.stack_both

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        return stack(*args, **kwargs)

    def failing(*args, **kwargs):
        raise MemoryError("stack_both")

    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        monkeypatch.setattr(index, "stack_both", watched)
        assert index.build_data(pages, "v", config, analyzer).n_pages == 6
        assert seen == [False] and gc.isenabled() is enabled
        monkeypatch.setattr(index, "stack_both", failing)
        with pytest.raises(MemoryError):
            index.build_data(pages, "v", config, analyzer)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
