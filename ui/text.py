"""The words and the style of the chat page: Japanese first, in one place."""
from __future__ import annotations

from guiderag.settings import EXTRACT, GENERATE, LINES

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
    # The progress line while an answer runs ({seconds}: elapsed; {chars}: reply received).
    "stage_loading": "ガイドラインの索引を読み込んでいます…",
    "stage_searching": "ガイドラインを確認しています…",
    "stage_keywords": "AIが質問の要点を読み取っています…",
    "stage_queued": "AIが他の方の質問に回答中です。順番をお待ちください…",
    "stage_answering": "AIが回答を作っています…",
    "stage_received": "（{chars}文字）",
    "stage_elapsed": "{seconds}秒経過",
    "stage_note": "AIの文章は、ガイドラインの原文と照らし合わせて確かめてからお見せします。",
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
    "pdf_page": "{document}（PDF）p.{page}",
    "fetched": "取得日：{date}",
    "version": "版：{version}",
    "whole_page": "このページ全体を読む",
    "whole_pdf_page": "PDFのp.{page}全体を読む",
    "whole_page_note": "取得したときの内容です。引用した行に色を付けています。",
    "audit": "記録番号 {audit_id}",
    "model_error": (
        "申し訳ありません。AIモデルに接続できなかったため、お答えできませんでした。"
        "しばらくしてからもう一度お試しいただくか、左の「回答のしかた」で"
        "「原文の抜粋」をお選びください。"
    ),
    "model_fallback": "AIモデルに接続できなかったため、AIを使わずにお答えしています。",
    "model_unusable": "AIの回答をそのままお見せできなかったため、AIを使わずに、ガイドラインの原文からお答えしています。",
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
    "sidebar_clear": "新しい質問をはじめる",
    "sidebar_guidelines": "読み込み中のガイドライン（{count}件）",
    "sidebar_choose": "答えるガイドライン",
    "choose_auto": "質問に合わせて自動で選ぶ",
    "answered_from": "回答したガイドライン：{title}",
    "warn_diverged": (
        "「{title}」は、公開中のガイドラインと内容が食い違っています（{when}の確認）。"
        "管理者が更新するまで、古い内容をお示しすることがあります。"
    ),
    "warn_stale": (
        "「{title}」の最終取得から{hours}時間以上たっています。"
        "公開中のガイドラインと異なることがあります。"
    ),
    "warn_check_failed": (
        "「{title}」が公開中のガイドラインと同じかどうか、確認できませんでした（{when}）。"
    ),
    "disclaimer": (
        "このチャットは医療の助言や診断を行うものではありません。"
        "ガイドラインの記載をそのままお示しするものです。"
        "ご自身の治療については、必ず担当の医療チームにご相談ください。"
        "会話はこの画面を閉じると消えます。"
    ),
}
MODE_LABELS = {
    EXTRACT: "原文の抜粋（AIを使いません）",
    LINES: "AIが該当する行を選ぶ",
    GENERATE: "AIによる要約＋原文",
}

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
.grag-progress { border-left: 4px solid #1a5fb4; background: #eef4fb; padding: 0.4rem 0.7rem;
  font-size: 0.95rem; }
.grag-progress .grag-elapsed { font-weight: 600; margin-left: 0.5rem; }
.grag-progress .grag-note { display: block; font-size: 0.8rem; color: #4a5560; }
.grag-page { margin-top: 0.3rem; font-size: 0.9rem; }
.grag-page summary { cursor: pointer; color: #1a5fb4; }
.grag-pagetext { margin-top: 0.4rem; padding: 0.5rem 0.8rem; border: 1px solid #d5dbe1;
  border-radius: 6px; max-height: 24rem; overflow-y: auto; }
.grag-pagetext .grag-pline { display: block; margin: 0.1rem 0; }
.grag-pagetext .grag-cited { background: #e3f1ea; }
.grag-pagenote { display: block; font-size: 0.8rem; color: #5b6770; margin-bottom: 0.3rem; }
.grag-guideline { font-size: 0.85rem; color: #4a5560; margin-bottom: 0.4rem; }
.grag-context { font-size: 0.85rem; color: #5b6770; margin: 0 0 0.4rem 0; }
.grag-sidebar dt { font-size: 0.8rem; color: #5b6770; }
.grag-sidebar dd { margin: 0 0 0.5rem 0; }
</style>
"""
