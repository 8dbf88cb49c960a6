"""The chat's HTML: every text from a user or a scraped page escaped, inside our own markup.

Pure functions (no Streamlit): every text that comes from a user or a scraped page is
escaped for HTML and, character by character, for Markdown, and is only ever placed inside
HTML that this module writes itself, on one line (no blank line, so Streamlit's Markdown
never parses it).
"""
from __future__ import annotations

import html
from datetime import datetime, timezone
from typing import Iterable, Mapping, Sequence
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from guiderag.chatbot.answer import Answer, ShownPassage
from guiderag.chatbot.conversation import context_line
from guiderag.ranges import number_ranges
from guiderag.redact import redact
from guiderag.resources import SAMPLE_SITE_URL, SAMPLE_TOC_PATH
from guiderag.settings import EXTRACT, MODEL_MODES, Settings

from .bootstrap import GuidelineStatus, StoreStatus
from .text import TEXT

# Characters that Markdown, Streamlit's directives (:red[...], :emoji:) or LaTeX ($) could
# give a meaning to: written as numeric character references, they are only ever text.
_MARKDOWN_SPECIAL = set("\\`*_{}[]()<>#+-.!|~$:=&\"'^%@")

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


def group_passages(passages: Sequence[ShownPassage]) -> list[list[ShownPassage]]:
    """Runs of lines from the same page version (of a PDF: the same PDF page), together,
    in order of first appearance."""
    groups: dict[tuple[str, int], list[ShownPassage]] = {}
    for passage in passages:
        groups.setdefault((passage.link, passage.version), []).append(passage)
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
    where = f"{TEXT['source']}：{link(first.link, first.title or first.url)}"
    detail = []
    if first.pdf_page is not None:  # 第3章 検査・診断と病期（PDF）p.5
        detail.append(TEXT["pdf_page"].format(document=first.document_title or "PDF", page=first.pdf_page))
    if numbers:
        detail.append(TEXT["lines"].format(lines=number_ranges(numbers, "〜")))
    if detail:
        where += escape_text(f"（{'、'.join(detail)}）")
    fetched = TEXT["fetched"].format(date=format_date(first.fetched_at, tz_name))
    version = TEXT["version"].format(version=first.version)
    source = (
        f'<span class="grag-meta">{where}</span>'
        f'<span class="grag-meta">{escape_text(fetched)}</span>'
        f'<span class="grag-meta">{escape_text(version)}</span>'
    )
    summary = TEXT["whole_pdf_page"].format(page=first.pdf_page) if first.pdf_page is not None else None
    whole = whole_page_html(page_lines, set(numbers), summary) if page_lines else ""
    return (
        f'<div class="grag-passage"><div class="grag-quote">{"".join(quoted)}</div>'
        f'<div class="grag-source">{source}</div>{whole}</div>'
    )


def whole_page_html(page_lines: Sequence[str], cited: set[int], summary: str | None = None) -> str:
    """The stored page (of a PDF: the cited PDF page's lines, the others blank), one line
    per row, inside a closed <details>; cited lines marked."""
    rows = "".join(
        f'<span class="grag-pline{" grag-cited" if number in cited else ""}">{escape_text(line)}</span>'
        for number, line in enumerate(page_lines, start=1)
        if line.strip()
    )
    return (
        f'<details class="grag-page"><summary>{escape_text(summary or TEXT["whole_page"])}</summary>'
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
    tz = settings.chat.display_timezone
    parts: list[str] = []
    # Notes for the user (a long question was cut; the model failed and extract answered).
    notes = [str(n) for n in answer.notes if str(n).strip()]
    if answer.error:
        unusable = answer.model_use.get("answer", {}).get("failure") == "reply"
        notes.append(TEXT["model_unusable"] if unusable else TEXT["model_fallback"])
    # How a follow-up was read (chatbot.conversation): one quiet line above the answer or
    # the refusal, so that a patient sees a misreading.
    read_as = context_line(answer.context)
    warning = (f'<p class="grag-context">{escape_text(read_as)}</p>' if read_as else "") + "".join(
        f'<div class="grag-warning">{escape_text(n)}</div>' for n in notes)
    parts.append(warning)
    if not answer.governed:
        escalation = answer.escalation or settings.answer.escalation_text
        inner = (
            warning
            + f'<div class="grag-badge">{escape_text(TEXT["not_covered_badge"])}</div>'
            + paragraphs(answer.answer or settings.answer.refusal_message)
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
    which = answered_from(answer)
    if which:
        parts.append(f'<p class="grag-guideline">{escape_text(which)}</p>')
    if answer.passages:
        parts.extend(
            passage_html(runs, tz, (pages or {}).get((runs[0].link, runs[0].version)))
            for runs in group_passages(answer.passages)
        )
    else:  # not expected from the chatbot, but never show nothing
        parts.append(f'<div class="grag-quote">{paragraphs(answer.answer)}</div>')
    if answer.audit_id is not None:
        parts.append(
            f'<p class="grag-audit">{escape_text(TEXT["audit"].format(audit_id=answer.audit_id))}</p>'
        )
    return block("".join(parts), "grag-answer grag-governed")


def progress_html(stage: str, seconds: float, chars: int = 0) -> str:
    """The line shown while an answer runs: what is happening, and for how long."""
    label = TEXT.get(f"stage_{stage}", TEXT["thinking"])
    if stage == "answering" and chars:
        label += TEXT["stage_received"].format(chars=chars)
    inner = (
        f'<span class="grag-stage">{escape_text(label)}</span>'
        f'<span class="grag-elapsed">{escape_text(TEXT["stage_elapsed"].format(seconds=int(seconds)))}</span>'
    )
    if stage in ("keywords", "queued", "answering"):
        inner += f'<span class="grag-note">{escape_text(TEXT["stage_note"])}</span>'
    return block(inner, "grag-progress")


def answered_from(answer: Answer) -> str:
    """"回答したガイドライン：…" when the store holds several guidelines (routing chose one),
    else "" (one guideline: nothing to say)."""
    routing = answer.routing or {}
    guideline = answer.guideline
    if routing.get("method") in (None, "only") or not guideline:
        return ""
    return TEXT["answered_from"].format(title=guideline.get("title") or guideline.get("id"))


def question_html(question: str) -> str:
    """The user's question, shown literally."""
    return block(paragraphs(question) or escape_text(question), "grag-question")


def incident(settings: Settings) -> str:
    """When it happened, for staff to find the audit row and the server log line. The
    error itself (model endpoint, paths) goes to the log, not to the patient's screen."""
    now = datetime.now(timezone.utc).isoformat()
    when = format_date(now, settings.chat.display_timezone, with_time=True)
    return block(f'<p class="grag-audit">{escape_text(TEXT["incident"].format(when=when))}</p>', "grag-incident")


def error_details(exc: BaseException) -> str:
    """A maintainer-facing one-liner (escaped), shown under the Japanese message."""
    return block(
        f'<p class="grag-audit">{escape_text(TEXT["details"])}'
        f"{escape_text(type(exc).__name__)}: {escape_text(redact(str(exc))[:500])}</p>",
        "grag-error-details",
    )


def is_sample_site(url: str | None, settings: Settings) -> bool:
    """True for the bundled sample only: its table of contents under the stable placeholder
    site it is stored under (`scrape --sample` and the first run). Any other store, one
    scraped from a loopback server included, is a real guideline and named by its host."""
    if not url:
        return False
    parts, sample = urlsplit(url), urlsplit(SAMPLE_SITE_URL)
    return ((parts.hostname or "").lower() == (sample.hostname or "").lower()
            and parts.port == sample.port and parts.path == "/" + SAMPLE_TOC_PATH.lstrip("/"))


def site_label(status: StoreStatus, settings: Settings) -> str:
    """The loaded guideline's site for the sidebar (its host, or 'the bundled sample')."""
    if not status.toc_url:
        return "—"
    if is_sample_site(status.toc_url, settings):
        return TEXT["sidebar_sample"]
    return urlsplit(status.toc_url).hostname or status.toc_url


def guidelines_html(status: StoreStatus, settings: Settings) -> str:
    """Several guidelines: each one's title, site (a link unless it is the sample), pages
    and last scrape."""
    items = []
    for g in status.guidelines:
        if g.toc_url and not is_sample_site(g.toc_url, settings):
            site = link(g.toc_url, urlsplit(g.toc_url).hostname or g.toc_url)
        else:
            site = escape_text(TEXT["sidebar_sample"] if g.toc_url else "—")
        scraped = format_date(g.last_scraped, settings.chat.display_timezone, with_time=True)
        items.append(
            f"<dt>{escape_text(g.label)}</dt><dd>{site}<br>"
            f"{escape_text(TEXT['sidebar_pages'])} {escape_text(str(g.pages))}・"
            f"{escape_text(TEXT['sidebar_scraped'])} {escape_text(scraped)}</dd>"
        )
    return block(f"<dl>{''.join(items)}</dl>", "grag-sidebar grag-guidelines")


def warning_text(g: GuidelineStatus, settings: Settings) -> str:
    """The sidebar's warning for one guideline (its last check, or its age)."""
    when = format_date(g.checked_at, settings.chat.display_timezone, with_time=True)
    key = {"diverged": "warn_diverged", "too_old": "warn_stale", "failed": "warn_check_failed"}.get(
        g.warning or "", "warn_stale")
    return TEXT[key].format(title=g.label, when=when, hours=f"{settings.storage.max_age_hours:g}")


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
            escape_text(format_date(status.last_scraped, settings.chat.display_timezone, with_time=True)),
        ),
    ]
    items = "".join(f"<dt>{escape_text(k)}</dt><dd>{v}</dd>" for k, v in rows)
    return block(f"<dl>{items}</dl>", "grag-sidebar")


def available_modes(settings: Settings) -> list[str]:
    """extract always; lines and generate only when an answer model is configured."""
    return [EXTRACT, *MODEL_MODES] if settings.model_configured else [EXTRACT]
