"""`guiderag ask`, `guiderag audit` and `guiderag gaps` (see ../shared/CONTRACT.md)."""
from __future__ import annotations

import argparse
import json
import sys

from guiderag.ranges import number_ranges
from guiderag.settings import Settings
from guiderag.store import Store

from .answer import Answer
from .audit import AuditLog
from .config import BotConfig
from .conversation import check_history, context_line
from .library import Library

SUMMARY_LABEL = "要約（AIが生成した文章です。下の原文で確かめてください）"
SOURCES_LABEL = "出典"
UNSUPPORTED_LABEL = "⚠ 参考情報にない語を含む文"
FALLBACK_NOTE = "AIの回答を使えなかったため、AIを使わずに原文の抜粋でお答えしています。"
GUIDELINE_LABEL = "回答したガイドライン:"
NO_GUIDELINE_LABEL = "どのガイドラインにも記載がありません"


def run_ask(args: argparse.Namespace, settings: Settings) -> int:
    """Answer one question from the guideline that governs it (--guideline ID|auto):
    readable text with sources, or one JSON object with --json."""
    history = getattr(args, "history", None)
    check_history(history, settings.answer)  # exit 2 beyond the bounds, before anything is asked
    with Library(BotConfig.of(settings)) as library:
        answer = library.ask(args.question, getattr(args, "mode", None), history=history)
    for note in answer.notes:
        print(f"guiderag: note: {note}", file=sys.stderr)
    if answer.error:
        print(f"guiderag: warning: {answer.error}", file=sys.stderr)
    if getattr(args, "json", False):
        print(json.dumps(answer.to_json(), ensure_ascii=False))
    else:
        print(format_answer(answer))
    return 0


def format_answer(answer: Answer) -> str:
    """The answer as a person reads it in a terminal."""
    out: list[str] = []
    read_as = context_line(answer.context)
    if read_as:
        out.append(f"（{read_as}）")
    if answer.fell_back:
        out.append(f"（{FALLBACK_NOTE}）")
    if not answer.governed:
        out.append(answer.answer)
        if answer.escalation:
            out.append(answer.escalation)
    elif answer.summary is not None:
        out += [f"【{SUMMARY_LABEL}】", answer.summary]
        if answer.unsupported_sentences:
            out.append(f"【{UNSUPPORTED_LABEL}】")
            out += [f"  - {s}" for s in answer.unsupported_sentences]
        out.append("")
        out.append(f"【{SOURCES_LABEL}】")
        for p in answer.passages:
            out.append(f"{p.title} — {p.url} (版 {p.version}, 行 {number_ranges(p.lines)})")
            out += [f"  {line}" for line in p.text.split("\n")]
    else:
        out.append(answer.answer)
        out.append("")
        out.append(f"【{SOURCES_LABEL}】")
        for p in answer.passages:
            out.append(f"- {p.title} — {p.url} (版 {p.version}, 行 {number_ranges(p.lines)})")
    for note in answer.notes:
        out.append(f"（{note}）")
    if (answer.routing or {}).get("method") not in (None, "only"):
        # several guidelines: say which one answered (or that none governs the question)
        out.append(f"[{GUIDELINE_LABEL} {answer.guideline['title'] or answer.guideline['id']}]"
                   if answer.guideline else f"[{NO_GUIDELINE_LABEL}]")
    if answer.audit_id is not None:
        out.append(f"[記録番号 {answer.audit_id}]")
    return "\n".join(out)


def _audit_log(settings: Settings) -> tuple[Store, AuditLog]:
    store = Store(settings.store, create=False)
    return store, AuditLog(store.conn)


def run_audit(args: argparse.Namespace, settings: Settings) -> int:
    """Export the audit log (and the gaps) to an .xlsx workbook."""
    store, log = _audit_log(settings)
    try:
        rows = log.export_xlsx(args.out)
    finally:
        store.close()
    print(f"wrote {rows} audit rows to {args.out}", file=sys.stderr)
    return 0


def run_gaps(args: argparse.Namespace, settings: Settings) -> int:
    """The not-covered questions with how often each was asked, most asked first."""
    store, log = _audit_log(settings)
    try:
        gaps = log.gaps()
    finally:
        store.close()
    if getattr(args, "json", False):
        print(json.dumps({"gaps": [g.to_json() for g in gaps]}, ensure_ascii=False))
        return 0
    if not gaps:
        print("no unanswered questions recorded", file=sys.stderr)
        return 0
    width = max(len(str(g.count)) for g in gaps)
    for g in gaps:
        print(f"{g.count:>{width}}  {g.question}")
        if g.coverage_probability is not None or g.coverage_reasons:
            p = f"P(governed) {g.coverage_probability:.2f}: " if g.coverage_probability is not None else ""
            print(f"{'':>{width}}    ({p}{'; '.join(g.coverage_reasons)})")
    return 0
