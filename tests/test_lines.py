"""LINES mode pieces: numbering the reference, parsing model replies, rebuilding from stored lines."""
from __future__ import annotations

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from guiderag.chatbot.lines import number_reference, parse_line_numbers, picks_for
from guiderag.chatbot.shown import render
from chatbot_helpers import make_store, passage


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("3, 5-7", [3, 5, 6, 7]),
        ("行: 2,4", [2, 4]),
        ("３，５〜７", [3, 5, 6, 7]),  # full-width digits and comma, wave dash
        ("12~14", [12, 13, 14]),
        ("１２～１４", [12, 13, 14]),  # full-width tilde
        ("12〜14", [12, 13, 14]),
        ("12行目から14行目が該当します。", [12, 13, 14]),
        ("該当するのは 4 行目と 9 行目です。", [4, 9]),
        ("Lines: 4 and 9", [4, 9]),
        ("行:\n2, 3", [2, 3]),
        ("14-12", [12, 13, 14]),  # reversed range
        ("7, 3, 7, 5", [7, 3, 5]),  # order of first mention, once each
    ],
)
def test_parse_accepts_the_ways_models_write_numbers(reply, expected):
    assert parse_line_numbers(reply, 20) == expected


@pytest.mark.parametrize(
    "reply",
    [
        "行: なし",
        "文章中に十分な情報がありません",
        "I cannot help with that.",
        "",
        "0, 21, 99",  # out of range
        "5-40",  # a range running out of the reference is dropped whole
        "Q21 は 2024年 に 1.5mg",  # numbers that are not line numbers
    ],
)
def test_parse_yields_nothing_valid(reply):
    assert parse_line_numbers(reply, 20) == []


def test_parse_keeps_valid_numbers_among_invalid_ones():
    assert parse_line_numbers("0, 3, 25, 4-30, 6", 20) == [3, 6]


def test_label_limits_parsing_to_the_selection_line():
    reply = "参考情報の2024年版によると\n行: 3, 4\n理由: 7行目は関係ありません"
    assert parse_line_numbers(reply, 20) == [3, 4]


def test_numbering_is_global_skips_blank_and_repeated_lines(tmp_path):
    with make_store(tmp_path / "g.db", {
        "http://g.test/a": ("A", "一行目", "", "三行目"),
        "http://g.test/b": ("B", "別ページ"),
    }) as store:
        a, b = store.get_page("http://g.test/a"), store.get_page("http://g.test/b")
        ref = number_reference([passage(a), passage(b), passage(a, [1])])
        assert len(ref) == 3
        assert ref.text == "【A】\n1: 一行目\n2: 三行目\n【B】\n3: 別ページ"
        assert [(nl.page.url, nl.line) for nl in ref.lines] == [
            ("http://g.test/a", 1), ("http://g.test/a", 3), ("http://g.test/b", 1)]
        assert ref.get(0) is None and ref.get(4) is None


def test_answer_is_rebuilt_from_stored_lines_only(tmp_path):
    with make_store(tmp_path / "g.db") as store:
        pages = store.current_pages()
        ref = number_reference([passage(p) for p in pages])
        numbers = parse_line_numbers("行: 4-5 （手術と放射線治療の行です）", len(ref))
        text, shown = render(picks_for(ref, numbers), 500)
        stored = {line for p in pages for line in p.lines}
        assert all(line in stored for line in text.split("\n"))
        assert "手術で取りきれない場合は、放射線治療を行うことがあります。" in text
        assert "手術と放射線治療の行です" not in text
        for sp in shown:
            page = store.get_version(sp.url, sp.version)
            assert sp.text.split("\n") == [page.line(n) for n in sp.lines]


@hsettings(max_examples=60, deadline=None)
@given(reply=st.text(alphabet=st.sampled_from(list("0123456789０１２３-~〜～,、 行目からとQ年.\n:")), max_size=40))
def test_any_reply_yields_only_stored_lines(tmp_path_factory, reply):
    store = make_store(tmp_path_factory.mktemp("lines") / "g.db")
    with store:
        pages = store.current_pages()
        ref = number_reference([passage(p) for p in pages])
        numbers = parse_line_numbers(reply, len(ref))
        assert all(1 <= n <= len(ref) for n in numbers)
        assert len(numbers) == len(set(numbers))
        text, _ = render(picks_for(ref, numbers), 500)
        stored = {line for p in pages for line in p.lines}
        assert all(line in stored for line in text.split("\n") if text)
