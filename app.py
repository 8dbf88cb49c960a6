"""The chat for patients and families: `streamlit run app.py`.

Each question is answered on its own (no chat history reaches the model); the answer shows
the guideline's own words as quoted passages with their page, fetch date and version. On a
first start with an empty store, the bundled sample guideline is scraped from a loopback
server and indexed (guiderag/bootstrap.py). GUIDERAG_DB points the app at another store.

Safety of the page: every text that comes from a user or a scraped page is escaped for
HTML and, character by character, for Markdown, and is only ever placed inside HTML
that this module writes itself (no blank line, so Streamlit's Markdown never parses it).
"""
from __future__ import annotations

import hashlib
import html
import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import streamlit as st

from chatbot.answer import Answer, ShownPassage
from guiderag.bootstrap import StoreStatus, ensure_corpus, needs_bootstrap, store_status
from guiderag.errors import GuiderageError, InputError, ModelError, QuestionError
from guiderag.settings import Settings

_log = logging.getLogger("guiderag.app")
# --- words shown to the user (Japanese first) -----------------------------------------
TEXT = {
    "page_title": "ガイドライン質問チャット",
    "title": "ガイドラインに聞く",
    "intro": (
        "病気や治療について、ガイドラインに書かれていることをそのままお示しします。"
        "ガイドラインに書かれていないことにはお答えしません。"
        "（例：「胸腺腫瘍の治療法は？」）"
    ),
    "placeholder": "ご質問を入力してください",
    "empty_question": "ご質問が入力されていません。知りたいことを文章で入力してください。",
    "bad_question": "このご質問は読み取れませんでした。知りたいことを文章で入力してください。",
    "thinking": "ガイドラインを確認しています…",
    "lead_governed": "ガイドラインには次のように書かれています。",
    "lead_sources": "根拠となるガイドラインの原文",
    "summary_label": "要約（AIが生成）",
    "summary_note": (
        "AIが原文をもとに作った要約です。誤りを含むことがあります。"
        "正確な内容は下の原文でご確認ください。"
    ),
    "unsupported_note": "⚠ の部分は、ガイドラインの原文で確認できませんでした。",
    "not_covered_badge": "ガイドラインに記載がありません",
    "source": "出典",
    "lines": "{lines}行目",
    "fetched": "取得日：{date}",
    "version": "版：{version}",
    "whole_page": "このページ全体を読む",
    "whole_page_note": "取得したときの内容です。引用した行に色を付けています。",
    "audit": "記録番号 {audit_id}",
    "model_error": (
        "申し訳ありません。AIモデルに接続できなかったため、お答えできませんでした。"
        "しばらくしてからもう一度お試しいただくか、左の「回答のしかた」で"
        "「原文の抜粋」をお選びください。"
    ),
    "model_fallback": "AIモデルに接続できなかったため、AIを使わずにお答えしています。",
    "app_error": (
        "申し訳ありません。システムの不具合でお答えできませんでした。"
        "時間をおいてもう一度お試しください。続く場合は管理者にお知らせください。"
    ),
    "details": "管理者向けの詳細：",
    "incident": "発生時刻：{when}（続くときは、この時刻を添えて管理者にお知らせください）",
    "setup_running": "初めての起動です。同梱のサンプルガイドラインを準備しています…",
    "setup_done": "準備ができました（{pages}ページ）。",
    "setup_failed": "ガイドラインの準備に失敗しました。",
    "no_guideline": (
        "ガイドラインがまだ読み込まれていません。管理者の方は `guiderag scrape` で"
        "ガイドラインを読み込んでから、このページを開き直してください。"
    ),
    "settings_error": "設定に誤りがあるため起動できませんでした。",
    "sidebar_guideline": "読み込み中のガイドライン",
    "sidebar_site": "サイト",
    "sidebar_sample": "同梱のサンプルガイドライン",
    "sidebar_sample_note": (
        "デモ用のサンプルです。出典のリンク先のサイトは実在しません。"
        "ページの本文は、出典の下の「このページ全体を読む」で読めます。"
    ),
    "sidebar_pages": "ページ数",
    "sidebar_scraped": "最終取得",
    "sidebar_mode": "回答のしかた",
    "sidebar_mode_extract_only": (
        "原文の抜粋のみ（AIモデルが設定されていないため、AIによる回答は使えません）"
    ),
    "sidebar_clear": "会話を消去",
    "disclaimer": (
        "このチャットは医療の助言や診断を行うものではありません。"
        "ガイドラインの記載をそのままお示しするものです。"
        "ご自身の治療については、必ず担当の医療チームにご相談ください。"
        "会話はこの画面を閉じると消えます。"
    ),
}
MODE_LABELS = {
    "extract": "原文の抜粋（AIを使いません）",
    "lines": "AIが該当する行を選ぶ",
    "generate": "AIによる要約＋原文",
}
MODEL_MODES = ("lines", "generate")

# Characters that Markdown, Streamlit's directives (:red[...], :emoji:) or LaTeX ($) could
# give a meaning to: written as numeric character references, they are only ever text.
_MARKDOWN_SPECIAL = set("\\`*_{}[]()<>#+-.!|~$:=&\"'^%@")

CSS = """
<style>
.grag-block, .grag-block * { overflow-wrap: anywhere; word-break: break-word; }
.grag-block { line-height: 1.75; font-size: 1rem; max-width: 100%; }
.grag-block p { margin: 0 0 0.5rem 0; }
.grag-lead { font-weight: 600; margin-bottom: 0.5rem; }
.grag-question { white-space: normal; }
.grag-passage { margin: 0 0 1rem 0; }
.grag-quote { margin: 0; padding: 0.6rem 0.9rem; border-left: 4px solid #2e7d5b;
  background: #f3f8f5; border-radius: 0 6px 6px 0; color: #1d2b24; }
.grag-quote .grag-line { display: block; margin: 0.15rem 0; }
.grag-gap { color: #7a8794; }
.grag-source { font-size: 0.85rem; color: #4a5560; margin-top: 0.35rem; }
.grag-source a { color: #1a5fb4; text-decoration: underline; }
.grag-meta { display: inline-block; margin-right: 0.8rem; }
.grag-summary { border: 2px solid #b7791f; background: #fffaf0; border-radius: 8px;
  padding: 0.6rem 0.9rem; margin-bottom: 1rem; }
.grag-summary-label { display: inline-block; font-weight: 700; font-size: 0.85rem;
  color: #7b4a00; background: #fde7b0; border-radius: 4px; padding: 0.05rem 0.5rem;
  margin-bottom: 0.4rem; }
.grag-unsupported { background: #fde2e1; text-decoration: underline dotted #b42318; }
.grag-note { font-size: 0.85rem; color: #5f4b32; }
.grag-notcovered { border: 2px dashed #7a8794; background: #f4f6f8; border-radius: 8px;
  padding: 0.7rem 0.9rem; color: #27313b; }
.grag-badge { display: inline-block; font-weight: 700; font-size: 0.85rem; color: #ffffff;
  background: #5b6770; border-radius: 4px; padding: 0.05rem 0.5rem; margin-bottom: 0.5rem; }
.grag-escalation { font-weight: 600; }
.grag-warning { border-left: 4px solid #b7791f; background: #fff8e6; padding: 0.4rem 0.7rem;
  margin-bottom: 0.7rem; font-size: 0.9rem; }
.grag-audit { font-size: 0.75rem; color: #7a8794; }
.grag-page { margin-top: 0.3rem; font-size: 0.9rem; }
.grag-page summary { cursor: pointer; color: #1a5fb4; }
.grag-pagetext { margin-top: 0.4rem; padding: 0.5rem 0.8rem; border: 1px solid #d5dbe1;
  border-radius: 6px; max-height: 24rem; overflow-y: auto; }
.grag-pagetext .grag-pline { display: block; margin: 0.1rem 0; }
.grag-pagetext .grag-cited { background: #e3f1ea; }
.grag-pagenote { display: block; font-size: 0.8rem; color: #5b6770; margin-bottom: 0.3rem; }
.grag-sidebar dt { font-size: 0.8rem; color: #5b6770; }
.grag-sidebar dd { margin: 0 0 0.5rem 0; }
</style>
"""


# --- escaping and HTML building (pure functions, imported by the tests) ------------------
def escape_text(text: str) -> str:
    """Text made inert for both HTML and Markdown: every special character is a reference."""
    out = []
    for ch in str(text):
        if ch in _MARKDOWN_SPECIAL:
            out.append(f"&#{ord(ch)};")
        elif ch in "\r\n":
            out.append(" ")  # callers split lines themselves; a blank line would end the block
        else:
            out.append(ch)
    return "".join(out)


def safe_url(url: str) -> str | None:
    """The URL if it is http(s) with a host, else None (no javascript:, data: ... links)."""
    try:
        parts = urlsplit(str(url).strip())
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return str(url).strip()


def link(url: str, label: str) -> str:
    """An <a> opening in a new tab, or the plain label when the URL is not http(s)."""
    target = safe_url(url)
    if target is None:
        return escape_text(label)
    return (
        f'<a href="{html.escape(target, quote=True)}" target="_blank" '
        f'rel="noopener noreferrer">{escape_text(label)}</a>'
    )


def block(inner: str, css_class: str = "") -> str:
    """Wrap our own HTML in one <div> on one line (Markdown leaves such a block alone)."""
    html_text = f'<div class="grag-block {css_class}">{inner}</div>'
    assert "\n" not in html_text
    return html_text


def paragraphs(text: str, css_class: str = "") -> str:
    """Each non-empty line of `text` as an escaped <p>."""
    cls = f' class="{css_class}"' if css_class else ""
    return "".join(f"<p{cls}>{escape_text(line)}</p>" for line in str(text).splitlines() if line.strip())


def format_date(iso: str | None, tz_name: str, *, with_time: bool = False) -> str:
    """ISO-8601 UTC -> 2026年11月29日 (in the display time zone); the raw text if unparsable."""
    if not iso:
        return "—"
    try:
        moment = datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        return str(iso)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        moment = moment.astimezone(ZoneInfo(tz_name))
    except (ZoneInfoNotFoundError, ValueError):
        moment = moment.astimezone(timezone.utc)
    text = f"{moment.year}年{moment.month}月{moment.day}日"
    if with_time:
        text += f" {moment.hour:02d}:{moment.minute:02d}"
    return text


def format_lines(lines: Sequence[int]) -> str:
    """[3, 4, 5, 9] -> '3〜5, 9'."""
    numbers = sorted(set(int(n) for n in lines))
    runs: list[str] = []
    start = prev = None
    for n in numbers + [None]:  # type: ignore[list-item]
        if n is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            runs.append(str(start) if start == prev else f"{start}〜{prev}")
        start = prev = n
    return ", ".join(runs)


def group_passages(passages: Sequence[ShownPassage]) -> list[list[ShownPassage]]:
    """Runs of lines from the same page version, together, in order of first appearance."""
    groups: dict[tuple[str, int], list[ShownPassage]] = {}
    for passage in passages:
        groups.setdefault((passage.url, passage.version), []).append(passage)
    return list(groups.values())


def passage_html(runs: Sequence[ShownPassage], tz_name: str, page_lines: Sequence[str] | None = None) -> str:
    """One page's quoted lines (runs apart marked by ⋯), then its title link, line numbers,
    fetch date and version; with `page_lines` (the stored lines of that page version), a
    closed disclosure holding the whole page as it was fetched, the quoted lines marked:
    the reader sees the context, even when the site has changed since or is offline."""
    first = runs[0]
    quoted: list[str] = []
    for i, run in enumerate(runs):
        if i:
            quoted.append('<span class="grag-line grag-gap">⋯</span>')
        lines = [line for line in str(run.text).splitlines() if line.strip()] or [run.text]
        quoted.extend(f'<span class="grag-line">{escape_text(line)}</span>' for line in lines)
    numbers = [n for run in runs for n in run.lines]
    where = f"{TEXT['source']}：{link(first.url, first.title or first.url)}"
    if numbers:
        where += escape_text(f"（{TEXT['lines'].format(lines=format_lines(numbers))}）")
    fetched = TEXT["fetched"].format(date=format_date(first.fetched_at, tz_name))
    version = TEXT["version"].format(version=first.version)
    source = (
        f'<span class="grag-meta">{where}</span>'
        f'<span class="grag-meta">{escape_text(fetched)}</span>'
        f'<span class="grag-meta">{escape_text(version)}</span>'
    )
    whole = whole_page_html(page_lines, set(numbers)) if page_lines else ""
    return (
        f'<div class="grag-passage"><div class="grag-quote">{"".join(quoted)}</div>'
        f'<div class="grag-source">{source}</div>{whole}</div>'
    )


def whole_page_html(page_lines: Sequence[str], cited: set[int]) -> str:
    """The stored page, one line per row, inside a closed <details>; cited lines marked."""
    rows = "".join(
        f'<span class="grag-pline{" grag-cited" if number in cited else ""}">{escape_text(line)}</span>'
        for number, line in enumerate(page_lines, start=1)
        if line.strip()
    )
    return (
        f'<details class="grag-page"><summary>{escape_text(TEXT["whole_page"])}</summary>'
        f'<div class="grag-pagetext"><span class="grag-pagenote">{escape_text(TEXT["whole_page_note"])}</span>'
        f"{rows}</div></details>"
    )


def marked_summary(summary: str, unsupported: Iterable[str]) -> str:
    """The summary, escaped, with each unsupported part highlighted and flagged with ⚠."""
    flags = sorted({u.strip() for u in unsupported if u and u.strip()}, key=len, reverse=True)
    out: list[str] = []
    for line in str(summary).splitlines():
        if not line.strip():
            continue
        spans: list[tuple[int, int]] = []
        for flag in flags:
            start = line.find(flag)
            while start != -1:
                end = start + len(flag)
                if all(end <= a or start >= b for a, b in spans):
                    spans.append((start, end))
                start = line.find(flag, end)
        spans.sort()
        pos, parts = 0, []
        for a, b in spans:
            parts.append(escape_text(line[pos:a]))
            parts.append(
                f'<mark class="grag-unsupported" title="原文で確認できません">'
                f"{escape_text(line[a:b])} ⚠</mark>"
            )
            pos = b
        parts.append(escape_text(line[pos:]))
        out.append("<p>" + "".join(parts) + "</p>")
    return "".join(out)


def answer_html(
    answer: Answer, settings: Settings, pages: Mapping[tuple[str, int], Sequence[str]] | None = None
) -> str:
    """The whole assistant message for one Answer, as one block of our own HTML; `pages`
    holds the stored lines of the cited page versions, by (url, version)."""
    tz = settings.display_timezone
    parts: list[str] = []
    # Notes for the user (a long question was cut; the model failed and extract answered).
    notes = [str(n) for n in getattr(answer, "notes", None) or [] if str(n).strip()]
    if answer.error:
        notes.append(TEXT["model_fallback"])
    warning = "".join(f'<div class="grag-warning">{escape_text(n)}</div>' for n in notes)
    parts.append(warning)
    if not answer.governed:
        escalation = answer.escalation or settings.escalation_text
        inner = (
            warning
            + f'<div class="grag-badge">{escape_text(TEXT["not_covered_badge"])}</div>'
            + paragraphs(answer.answer or settings.refusal_message)
            + paragraphs(escalation, "grag-escalation")
        )
        return block(inner, "grag-answer grag-notcovered")
    if answer.summary:
        note = escape_text(TEXT["summary_note"])
        if answer.unsupported_sentences:
            note += " " + escape_text(TEXT["unsupported_note"])
        parts.append(
            '<div class="grag-summary">'
            f'<div class="grag-summary-label">{escape_text(TEXT["summary_label"])}</div>'
            f"{marked_summary(answer.summary, answer.unsupported_sentences)}"
            f'<p class="grag-note">{note}</p></div>'
        )
        parts.append(f'<p class="grag-lead">{escape_text(TEXT["lead_sources"])}</p>')
    else:
        parts.append(f'<p class="grag-lead">{escape_text(TEXT["lead_governed"])}</p>')
    if answer.passages:
        parts.extend(
            passage_html(runs, tz, (pages or {}).get((runs[0].url, runs[0].version)))
            for runs in group_passages(answer.passages)
        )
    else:  # not expected from the chatbot, but never show nothing
        parts.append(f'<div class="grag-quote">{paragraphs(answer.answer)}</div>')
    if answer.audit_id is not None:
        parts.append(
            f'<p class="grag-audit">{escape_text(TEXT["audit"].format(audit_id=answer.audit_id))}</p>'
        )
    return block("".join(parts), "grag-answer grag-governed")


def question_html(question: str) -> str:
    """The user's question, shown literally."""
    return block(paragraphs(question) or escape_text(question), "grag-question")


def incident(settings: Settings) -> str:
    """When it happened, for staff to find the audit row and the server log line. The
    error itself (model endpoint, paths) goes to the log, not to the patient's screen."""
    now = datetime.now(timezone.utc).isoformat()
    when = format_date(now, settings.display_timezone, with_time=True)
    return block(f'<p class="grag-audit">{escape_text(TEXT["incident"].format(when=when))}</p>', "grag-incident")


def error_details(exc: BaseException) -> str:
    """A maintainer-facing one-liner (escaped), shown under the Japanese message."""
    return block(
        f'<p class="grag-audit">{escape_text(TEXT["details"])}'
        f"{escape_text(type(exc).__name__)}: {escape_text(str(exc)[:500])}</p>",
        "grag-error-details",
    )


def is_sample_site(url: str | None, settings: Settings) -> bool:
    """True for the bundled sample: its stable placeholder host, or a loopback server."""
    if not url:
        return False
    host = (urlsplit(url).hostname or "").lower()
    sample_host = (urlsplit(settings.sample_site_url).hostname or "").lower()
    return host == sample_host or host in ("127.0.0.1", "localhost", "::1")


def site_label(status: StoreStatus, settings: Settings) -> str:
    """The loaded guideline's site for the sidebar (its host, or 'the bundled sample')."""
    if not status.toc_url:
        return "—"
    if is_sample_site(status.toc_url, settings):
        return TEXT["sidebar_sample"]
    return urlsplit(status.toc_url).hostname or status.toc_url


def sidebar_html(status: StoreStatus, settings: Settings) -> str:
    """Which guideline is loaded: its site (a link unless it is the sample), pages, last scrape."""
    label = site_label(status, settings)
    if status.toc_url and not is_sample_site(status.toc_url, settings):
        site_html = link(status.toc_url, label)
    else:
        site_html = escape_text(label)
    rows = [
        (TEXT["sidebar_site"], site_html),
        (TEXT["sidebar_pages"], escape_text(f"{status.pages}")),
        (
            TEXT["sidebar_scraped"],
            escape_text(format_date(status.last_scraped, settings.display_timezone, with_time=True)),
        ),
    ]
    items = "".join(f"<dt>{escape_text(k)}</dt><dd>{v}</dd>" for k, v in rows)
    return block(f"<dl>{items}</dl>", "grag-sidebar")


def available_modes(settings: Settings) -> list[str]:
    """extract always; lines and generate only when an answer model is configured."""
    return ["extract", *MODEL_MODES] if settings.model_configured else ["extract"]


# --- history -------------------------------------------------------------------------------
@dataclass
class Turn:
    """One question and what was shown for it (kept in st.session_state, this session only)."""

    question: str
    answer: Answer | None = None
    error_kind: str | None = None  # "model" | "question" | "app"
    error_detail: str = ""
    # the stored lines of each cited page version, by (url, version)
    pages: dict[tuple[str, int], tuple[str, ...]] = field(default_factory=dict)


def render_turn(turn: Turn, settings: Settings) -> None:
    with st.chat_message("user"):
        st.markdown(question_html(turn.question), unsafe_allow_html=True)
    with st.chat_message("assistant"):
        render_reply(turn, settings)


def render_reply(turn: Turn, settings: Settings) -> None:
    if turn.error_kind == "model":
        st.error(TEXT["model_error"])
    elif turn.error_kind == "question":
        st.warning(TEXT["bad_question"])
    elif turn.error_kind == "app":
        st.error(TEXT["app_error"])
    if turn.error_detail:
        st.markdown(turn.error_detail, unsafe_allow_html=True)
    if turn.answer is not None:
        st.markdown(answer_html(turn.answer, settings, turn.pages), unsafe_allow_html=True)


# --- resources -----------------------------------------------------------------------------
def _settings_key(settings: Settings) -> str:
    """A cache key for everything that shapes the retriever (a digest: no secret kept)."""
    return hashlib.sha256(repr(settings).encode("utf-8")).hexdigest()


@st.cache_resource(show_spinner=False, max_entries=4)
def _retriever(settings_key: str, last_run_id: int | None, _settings: Settings) -> Any:
    """The retrieval index, loaded once per process and store state (not per question)."""
    import retrieval

    return retrieval.load_retriever(_settings)


@st.cache_resource(show_spinner=False)
def _ask_lock() -> threading.Lock:
    """One answer at a time per process. Streamlit runs each browser session in its own
    thread, and retrieval's MeCab tagger is one per process: used from two threads at once
    it returns wrong tokens (measured: 154 of 12,000 analyses differed), which would make
    wrong answers or refusals. Extract answers take milliseconds; model modes queue."""
    return threading.Lock()


@st.cache_resource(show_spinner=False)
def _loaded() -> set:
    """(settings key, run id) of the retrievers this process has loaded."""
    return set()


def get_retriever(settings: Settings, status: StoreStatus) -> Any:
    key = (_settings_key(settings), status.last_run_id)
    retriever = _retriever(*key, settings)
    _loaded().add(key)
    return retriever


def retriever_loaded(settings: Settings, status: StoreStatus) -> bool:
    """False before the first question of a process (or after a new scrape): loading the
    index then takes a moment, worth a spinner even in extract mode."""
    return (_settings_key(settings), status.last_run_id) in _loaded()


def ask(question: str, mode: str, settings: Settings, status: StoreStatus) -> Turn:
    """Answer one question on its own (no history goes to the model) and record the turn."""
    from chatbot import Chatbot

    turn = Turn(question=question)
    try:
        with _ask_lock():
            # Inside the lock: loading may rebuild a stale index, which analyzes text too.
            retriever = get_retriever(settings, status)
            with Chatbot(settings, retriever=retriever) as bot:
                turn.answer = bot.ask(question, mode)
            turn.pages = cited_pages(turn.answer, retriever.pages)
    except QuestionError:
        turn.error_kind = "question"
    except ModelError as exc:  # includes ModelNotConfiguredError
        turn.error_kind = "model"
        turn.error_detail = incident(settings)
        _log.warning("model error answering %r: %s", question, exc)
    except GuiderageError as exc:
        turn.error_kind = "app"
        turn.error_detail = incident(settings)
        _log.error("error answering %r: %s", question, exc)
    except Exception:  # a bug must not crash the patient's page; log it for us
        turn.error_kind = "app"
        turn.error_detail = incident(settings)
        _log.exception("answering %r failed", question)
    return turn


def cited_pages(answer: Answer, pages: Sequence[Any]) -> dict[tuple[str, int], tuple[str, ...]]:
    """The stored lines of the page versions an answer cites (for "read the whole page")."""
    wanted = {(p.url, p.version) for p in answer.passages}
    return {(p.url, p.version): tuple(p.lines) for p in pages if (p.url, p.version) in wanted}


# --- page sections -------------------------------------------------------------------------
def prepare_corpus(settings: Settings) -> None:
    """First run: build the sample guideline with a progress indicator; stop on failure."""
    if not needs_bootstrap(settings):
        return
    with st.status(TEXT["setup_running"], expanded=True) as status_box:
        bar = st.progress(0.0, text=TEXT["setup_running"])

        def report(fraction: float, message: str) -> None:
            bar.progress(min(max(fraction, 0.0), 1.0), text=message)

        try:
            with _ask_lock():  # building analyzes text with the process's one tagger
                result = ensure_corpus(settings, report)
        except GuiderageError as exc:
            status_box.update(label=TEXT["setup_failed"], state="error", expanded=True)
            st.error(TEXT["setup_failed"])
            st.markdown(error_details(exc), unsafe_allow_html=True)
            st.stop()
        status_box.update(
            label=TEXT["setup_done"].format(pages=result.pages), state="complete", expanded=False
        )


def sidebar(settings: Settings, status: StoreStatus) -> str:
    """Draw the sidebar; return the chosen answer mode."""
    with st.sidebar:
        st.subheader(TEXT["sidebar_guideline"])
        st.markdown(sidebar_html(status, settings), unsafe_allow_html=True)
        if is_sample_site(status.toc_url, settings):
            st.caption(TEXT["sidebar_sample_note"])
        st.subheader(TEXT["sidebar_mode"])
        modes = available_modes(settings)
        if len(modes) == 1:
            mode = "extract"
            st.caption(TEXT["sidebar_mode_extract_only"])
        else:
            default = settings.mode if settings.mode in modes else "extract"
            mode = st.radio(
                TEXT["sidebar_mode"],
                modes,
                index=modes.index(default),
                format_func=MODE_LABELS.__getitem__,
                key="mode",
                label_visibility="collapsed",
            )
        if st.button(TEXT["sidebar_clear"], key="clear"):
            st.session_state["history"] = []
        st.divider()
        st.caption(TEXT["disclaimer"])
    return mode


def main() -> None:
    st.set_page_config(page_title=TEXT["page_title"], page_icon="📘", layout="centered")
    st.markdown(CSS, unsafe_allow_html=True)
    try:
        settings = Settings.load()
    except InputError as exc:
        st.error(TEXT["settings_error"])
        st.markdown(error_details(exc), unsafe_allow_html=True)
        st.stop()

    st.title(TEXT["title"])
    st.caption(TEXT["intro"])
    try:
        prepare_corpus(settings)
        status = store_status(settings)
    except GuiderageError as exc:
        st.error(TEXT["app_error"])
        st.markdown(error_details(exc), unsafe_allow_html=True)
        st.stop()
    mode = sidebar(settings, status)
    if status.empty:
        st.info(TEXT["no_guideline"])
        st.stop()

    history: list[Turn] = st.session_state.setdefault("history", [])
    for turn in history:
        render_turn(turn, settings)

    # No max_chars: the chatbot answers the first part of a long question and says so.
    question = st.chat_input(TEXT["placeholder"])
    if question is None:
        return
    if not question.strip():
        with st.chat_message("assistant"):
            st.info(TEXT["empty_question"])
        return
    with st.chat_message("user"):
        st.markdown(question_html(question), unsafe_allow_html=True)
    with st.chat_message("assistant"):
        # Model time or an index to load takes seconds: show that we are working. An
        # extract answer takes milliseconds, and a spinner would only delay it (~270 ms).
        if mode in MODEL_MODES or not retriever_loaded(settings, status):
            with st.spinner(TEXT["thinking"]):
                turn = ask(question, mode, settings, status)
        else:
            turn = ask(question, mode, settings, status)
        render_reply(turn, settings)
    history.append(turn)


if __name__ == "__main__":
    main()
