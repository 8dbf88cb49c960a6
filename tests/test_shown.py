"""chatbot.shown.render pinned against a plain reference: every pick tried with each of its
options (title and context line, title only, the line alone) until one fits."""
from __future__ import annotations

from hypothesis import given, settings as hsettings, strategies as st

from guiderag.chatbot.shown import Pick, TitleLines, context_line, layout, line_key, render
from guiderag.store import PageVersion

# lines of every kind the layout treats apart: headings, list items and the sentence that
# introduces them, long and short sentences, blanks
_LINES = ("1. 治療について", "治療には次のものがあります。", "・手術", "・放射線治療", "", "副作用", "薬を使います。",
          "体調に合わせて治療を続けます。治療の間は体重と食事の量を毎日記録してください。", "■ 費用", "相談できます。")


def _render_plain(picks: list[Pick], budget: int) -> tuple[str, list]:
    """render as first written: no pick is passed over before its options are tried."""
    chosen: dict[tuple[str, int, int], Pick] = {}
    titles = TitleLines()
    used = 0
    for pick in picks:
        if chosen and used >= budget:
            break
        if pick.key in chosen or not pick.page.line(pick.line).strip():
            continue
        page = pick.page
        extras: list[int] = []
        t = titles(page)
        if t:
            extras.append(t)
        c = context_line(page, pick.line)
        if c is not None and c != t:
            extras.append(c)
        placed = False
        for extra in ([extras, extras[:1], []] if extras else [[]]):
            keys = list(dict.fromkeys(line_key(page, n) for n in [*extra, pick.line]))
            cost = sum(len(page.line(k[2])) + 1 for k in keys if k not in chosen)
            if used + cost <= budget + 1:
                for k in keys:
                    chosen.setdefault(k, Pick(page, k[2], pick.score))
                used += cost
                placed = True
                break
        if not placed and not chosen:
            chosen[pick.key] = pick
            break
    return layout(chosen.values())


def _page(k: int, lines: list[str]) -> PageVersion:
    return PageVersion(page_id=k, url=f"https://example.invalid/p{k}.html", title=lines[0] or "表題",
                       version=1, fetched_at="2026-01-01T00:00:00Z", content_hash=f"sha256:{k}",
                       lines=tuple(lines))


@hsettings(max_examples=400, deadline=None)
@given(
    pages=st.lists(st.lists(st.sampled_from(_LINES), min_size=1, max_size=12), min_size=1, max_size=3),
    picks=st.lists(st.tuples(st.integers(0, 2), st.integers(1, 12), st.floats(0, 1)), min_size=1, max_size=25),
    budget=st.integers(1, 300),
)
def test_render_matches_the_plain_layout(pages, picks, budget):
    made = [_page(k, lines) for k, lines in enumerate(pages)]
    chosen = [Pick(made[p % len(made)], 1 + (n - 1) % len(made[p % len(made)].lines), s) for p, n, s in picks]
    assert render(chosen, budget) == _render_plain(chosen, budget)


def test_a_line_that_fits_exactly_is_shown_after_one_that_does_not():
    page = _page(0, ["表題", "あいうえお", "かきくけこさしすせそ", "たち"])
    # the title line (2 + 1) and line 2 (5 + 1) use 9 of 11; line 3 (10 + 1) cannot fit, line 4
    # (2 + 1, the last line needing no newline: 11 + 1 allowed) fits exactly
    text, _ = render([Pick(page, 2), Pick(page, 3), Pick(page, 4)], 11)
    assert text == "表題\nあいうえお\nたち"
