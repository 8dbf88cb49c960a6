"""The audit log: one row per ask for every outcome, written before the answer is returned."""
from __future__ import annotations

import json

import pytest
from openpyxl import load_workbook

from guiderag.chatbot.config import BotConfig
from guiderag import retrieval
from guiderag.chatbot import Chatbot
from guiderag.chatbot.audit import AuditLog, normalize_question
from guiderag.errors import ModelError, QuestionError, StoreError, WorkbookError
from guiderag.store import Store
from openai_stub import OpenAIStub, Reply
from chatbot_helpers import indexed_settings

IN_SCOPE = "胸腺腫にはどのような治療法がありますか？"
OUT_OF_SCOPE = "糖尿病の食事療法を教えてください"


@pytest.fixture()
def settings(tmp_path, store_at):
    """The store on each backend (SQLite and PostgreSQL): the audit log behaves the same."""
    return indexed_settings(tmp_path, store=store_at)


@pytest.fixture()
def sqlite_settings(tmp_path):
    return indexed_settings(tmp_path)


@pytest.fixture()
def retriever(settings):
    return retrieval.load_retriever(settings.retrieval, settings.storage)


def _rows(settings):
    with Store(settings.store, create=False) as store:
        return AuditLog(store.conn).rows()


def test_governed_answer_row_records_exactly_what_was_shown(settings, retriever):
    with Chatbot(BotConfig.of(settings), retriever=retriever) as bot:
        answer = bot.ask(IN_SCOPE)
    [row] = _rows(settings)
    assert row["id"] == answer.audit_id
    assert row["question"] == IN_SCOPE and row["coverage"] == "governed"
    assert row["answer"] == answer.answer
    assert row["mode"] == row["requested_mode"] == "extract"
    assert json.loads(row["keywords"]) == answer.keywords and answer.keywords
    assert row["threshold"] == settings.retrieval.threshold and row["top_score"] == pytest.approx(answer.retrieval["top_score"])
    assert row["corpus_version"] == retriever.corpus_version
    shown = json.loads(row["shown"])
    assert shown == [{"url": p.url, "version": p.version, "lines": p.lines, "content_hash": p.content_hash}
                     for p in answer.passages]
    assert json.loads(row["answer_json"])["answer"] == answer.answer
    assert row["asked_at"].endswith("Z")


def test_not_covered_row_and_gaps_group_normalised_questions(settings, retriever):
    with Chatbot(BotConfig.of(settings), retriever=retriever) as bot:
        for q in (OUT_OF_SCOPE, "糖尿病の食事療法を教えてください ", "糖尿病の食事療法を教えてください　",
                  "ＥＧＦＲ と 糖尿病の関係は?", "EGFR と  糖尿病の関係は？", IN_SCOPE):
            bot.ask(q)
        gaps = bot.audit.gaps()
    assert [(g.question, g.count) for g in gaps] == [
        (OUT_OF_SCOPE, 3), ("EGFR と 糖尿病の関係は?", 2)]
    assert normalize_question(" ａ　 b\n") == "a b"


def test_bad_question_is_audited_as_an_error_and_raised(settings, retriever):
    with Chatbot(BotConfig.of(settings), retriever=retriever) as bot:
        with pytest.raises(QuestionError):
            bot.ask(" \u200b\x00 ")
    [row] = _rows(settings)
    assert row["coverage"] == "error" and "control or invisible" in row["error"]
    assert row["answer"] is None and json.loads(row["shown"]) == []


def test_model_failure_is_audited_before_the_error_is_raised(tmp_path):
    settings = indexed_settings(tmp_path)
    with OpenAIStub([Reply(status=500)]) as stub:
        s = settings.replace(openai_base_url=stub.base_url, openai_api_key="k", answer_model="m",
                             model_retries=0)
        with Chatbot(BotConfig.of(s)) as bot:
            with pytest.raises(ModelError, match="HTTP 500"):
                bot.ask(IN_SCOPE, "lines")
    [row] = _rows(settings)
    assert row["coverage"] == "error" and "HTTP 500" in row["error"]
    assert row["mode"] == "lines" and row["model"] == "m"
    assert row["answer"] is None and json.loads(row["keywords"])  # retrieval had run


def test_fallback_to_extract_is_recorded_with_the_error(tmp_path):
    settings = indexed_settings(tmp_path)
    with OpenAIStub([Reply(status=500)]) as stub:
        s = settings.replace(openai_base_url=stub.base_url, openai_api_key="k", answer_model="m",
                             model_retries=0, fallback_to_extract=True)
        with Chatbot(BotConfig.of(s)) as bot:
            answer = bot.ask(IN_SCOPE, "generate")
    assert answer.mode == "extract" and answer.governed and answer.summary is None
    assert "generate mode failed" in answer.error and "HTTP 500" in answer.error
    [row] = _rows(settings)
    assert (row["requested_mode"], row["mode"], row["coverage"]) == ("generate", "extract", "governed")
    assert row["answer"] == answer.answer and "HTTP 500" in row["error"]


def test_failed_audit_write_loses_no_earlier_row_and_shows_nothing(sqlite_settings):
    settings = sqlite_settings  # the failure is an SQLite trigger
    with Chatbot(BotConfig.of(settings), retriever=retrieval.load_retriever(settings.retrieval, settings.storage)) as bot:
        first = bot.ask(IN_SCOPE)
        bot.ask(OUT_OF_SCOPE)
        with bot.store.conn:  # a real SQLite failure on the next insert
            bot.store.conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON audit WHEN NEW.question LIKE '%検査%' "
                "BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
            )
        with pytest.raises(StoreError, match="answer was not shown"):
            bot.ask("肺がんの検査は？")
        assert bot.audit.count() == 2
    rows = _rows(settings)
    assert [r["id"] for r in rows] == [first.audit_id, first.audit_id + 1]


def test_export_writes_every_row_as_text_atomically(settings, retriever, tmp_path):
    with Chatbot(BotConfig.of(settings), retriever=retriever) as bot:
        bot.ask(IN_SCOPE)
        bot.ask("=HYPERLINK(\"http://evil.test\",\"click\") 糖尿病")
        bot.ask(OUT_OF_SCOPE)
        out = tmp_path / "out" / "audit.xlsx"
        assert bot.audit.export_xlsx(out) == 3
    wb = load_workbook(out)
    ws = wb["audit"]
    header = [c.value for c in ws[1]]
    assert header[:3] == ["id", "asked_at", "question"]
    q_col = header.index("question") + 1
    cell = ws.cell(row=3, column=q_col)
    assert cell.value.startswith("=HYPERLINK") and cell.data_type == "s"  # text, not a formula
    assert ws.max_row == 4
    gaps = wb["gaps"]
    assert [c.value for c in gaps[1]] == ["question", "count", "first_asked", "last_asked", "coverage_probability",
                                          "coverage_reasons"]
    assert gaps.max_row == 3
    assert sorted(p.name for p in out.parent.iterdir()) == ["audit.xlsx"]  # no temp file left


def test_export_refuses_a_non_xlsx_path_and_changes_nothing(sqlite_settings, tmp_path):
    with Store(sqlite_settings.storage.db, create=False) as store:
        log = AuditLog(store.conn)
        with pytest.raises(WorkbookError, match=".xlsx"):
            log.export_xlsx(tmp_path / "audit.csv")
        (tmp_path / "dir.xlsx").mkdir()
        with pytest.raises(WorkbookError, match="directory"):
            log.export_xlsx(tmp_path / "dir.xlsx")
    assert not (tmp_path / "audit.csv").exists()
