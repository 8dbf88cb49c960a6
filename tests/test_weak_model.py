"""A weak or slow model never reaches the patient unchecked (the scripted OpenAI stub).

Every reply the published weak-model failures look like (a line repeated thirty times, the
prompt echoed, the reference pasted back, a runaway reply, another language, a stream cut
short) is answered with the verbatim extract answer, and ask --json and the audit row say
what the model did. Each rule is shown to be what stops it: switched off, the same reply
would be shown. Lines mode: 「行: なし」 declines, a reply naming no valid line falls back,
an over-long selection keeps its highest-ranked lines. Junk model keywords never cost an
answer the question's own words give. The sample guideline, the real index and the real
`openai` client against a loopback stub throughout.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from guiderag.chatbot.config import BotConfig
from guiderag import retrieval
from guiderag.chatbot import Chatbot, replies
from guiderag.chatbot import generate as gen
from guiderag.chatbot.answer import ANSWERED, DECLINED, FELL_BACK, NOT_ASKED
from guiderag.chatbot.audit import AuditLog
from guiderag.chatbot.lines import LINES_SYSTEM_PROMPT, number_reference
from guiderag.cli import main
from guiderag.settings import Settings
from guiderag.store import Store
from guiderag.scopes import RetrievalConfig, StoreConfig
from openai_stub import OpenAIStub, Reply
from storekit import assert_verbatim, copy_store

THYMIC = "胸腺腫瘍にはどのような治療法がありますか？"
SHORT_THYMIC = "胸腺腫の治療法は？"
OUT_OF_SCOPE = "骨折したときのギプスの巻き方を教えてください"
GOOD_SUMMARY = ("胸腺腫瘍の治療の中心は手術です。手術で取り切れなかった場合には放射線治療を行うことがあり、"
                "進行した場合には薬物療法を行います。")


@pytest.fixture(scope="module")
def sample_db(scraped_sample) -> Path:
    """The sample guideline scraped once per session (conftest.scraped_sample)."""
    return scraped_sample


@pytest.fixture(scope="module")
def sample_retriever(sample_db):
    return retrieval.load_retriever(RetrievalConfig(), StoreConfig(db=sample_db))


@pytest.fixture()
def db(sample_db, tmp_path, no_settings_env) -> Path:
    return copy_store(sample_db, tmp_path / "guide.db")


def settings_for(stub: OpenAIStub, db: Path, **overrides) -> Settings:
    values = dict(db=db, openai_base_url=stub.base_url, openai_api_key="k", answer_model="stub-answer",
                  model_retries=0, model_timeout_s=5.0, progress=False)
    values.update(overrides)
    return Settings.load(env={}, **values)


def ask(stub: OpenAIStub, db: Path, retriever, question: str, mode: str, **overrides):
    with Chatbot(BotConfig.of(settings_for(stub, db, **overrides)), retriever=retriever) as bot:
        return bot.ask(question, mode)


def audit_row(db: Path, audit_id: int) -> dict:
    with Store(db, create=False) as store:
        row = AuditLog(store.conn).get(audit_id)
    assert row is not None
    return row


def extract_answer(db: Path, retriever, question: str):
    with Chatbot(BotConfig.of(Settings.load(env={}, db=db)), retriever=retriever) as bot:
        return bot.ask(question, "extract")


def reference_text(db: Path, retriever, question: str) -> str:
    return retriever.search(question).reference_text


# --- generate: degenerate replies are never shown ---------------------------------------------
def degenerate_replies(reference: str) -> dict[str, str]:
    """The failures seen from Gemma 3 270M, and their relatives."""
    line = "胸腺腫の治療法は、病期（正岡分類）"
    return {
        "repeated": (line + "\n") * 31,
        "loop": line * 31,  # no line break, no sentence end: one runaway line
        "echo": "参考情報: " + reference[:300] + "\n質問: 胸腺腫瘍の治療はどのくらいか？",
        "instructions": gen.system_prompt(500) + "胸腺腫瘍の治療は手術です。",
        "pasted": reference[:900],
        "too_long": "。".join(f"胸腺腫瘍の治療について第{i}の点を述べると手術が中心になります" for i in range(60)) + "。",
        "english": "The main treatment of thymic tumours is surgery; radiotherapy may follow.",
        "chinese": "胸腺肿瘤的治疗以手术为中心。无法完全切除时，术后进行放射治疗，晚期则进行药物治疗。",
        "foreign_word": "胸腺腫瘍の治療の中心は手術です。 penyakitmodel",
    }


CODES = {"repeated": "repeated", "loop": "repeated", "echo": "echo", "instructions": "echo",
         "pasted": "pasted", "too_long": "too_long", "english": "language", "chinese": "language",
         "foreign_word": "language"}


@pytest.mark.parametrize("kind", list(CODES))
def test_a_degenerate_summary_falls_back_to_the_verbatim_answer(db, sample_retriever, kind):
    reply = degenerate_replies(reference_text(db, sample_retriever, THYMIC))[kind]
    with OpenAIStub([reply]) as stub:
        answer = ask(stub, db, sample_retriever, THYMIC, "generate")
    assert answer.mode == "extract" and answer.governed and answer.summary is None
    assert answer.answer == extract_answer(db, sample_retriever, THYMIC).answer
    assert_verbatim(db, answer)
    use = answer.model_use["answer"]
    assert use["outcome"] == FELL_BACK and use["failure"] == "reply" and use["shown"] == "extract"
    assert use["code"] == CODES[kind], use
    assert answer.error and "answered with extract instead" in answer.error
    row = audit_row(db, answer.audit_id)
    assert row["requested_mode"] == "generate" and row["mode"] == "extract" and row["summary"] is None
    assert json.loads(row["model_use"])["answer"]["reason"] == use["reason"]
    assert json.loads(row["model_replies"])["answer"] in reply  # what the model said, for review


@pytest.mark.parametrize("kind", list(CODES))
def test_switched_off_the_checks_would_show_the_degenerate_summary(db, sample_retriever, monkeypatch, kind):
    """The mechanism, not luck, keeps these from the patient."""
    monkeypatch.setattr(replies, "generated_problem", lambda *a, **k: None)
    monkeypatch.setattr(replies, "stop_reading", lambda **k: (lambda text: None))
    reply = degenerate_replies(reference_text(db, sample_retriever, THYMIC))[kind]
    with OpenAIStub([reply]) as stub:
        answer = ask(stub, db, sample_retriever, THYMIC, "generate")
    assert answer.mode == "generate" and answer.summary == reply.strip()


@pytest.mark.parametrize("finish", ["length", None])
def test_a_reply_cut_off_is_not_shown(db, sample_retriever, finish):
    with OpenAIStub([Reply(GOOD_SUMMARY, finish_reason=finish)]) as stub:
        answer = ask(stub, db, sample_retriever, THYMIC, "generate")
    assert answer.mode == "extract" and answer.model_use["answer"]["code"] == "cut_off"
    if finish is None:  # a stream that just ended: the llama.cpp interruption, named
        assert "--interrupt_requests False" in answer.model_use["answer"]["reason"]


@pytest.mark.parametrize("summary", [
    GOOD_SUMMARY,
    "胸腺腫瘍の治療法は、病期や腫瘍の種類、体の状態を考えて決めます。\n・手術：治療の中心です。\n・放射線治療：手術の後に行うことがあります。",
    "胸腺がんでは、分子標的薬のレンバチニブが使われることがあります。CT検査やPET検査で広がりを調べます。",
])
def test_a_sound_summary_is_shown(db, sample_retriever, summary):
    with OpenAIStub([summary]) as stub:
        answer = ask(stub, db, sample_retriever, THYMIC, "generate")
    assert answer.mode == "generate" and answer.summary == summary
    assert answer.model_use["answer"]["outcome"] == ANSWERED and answer.model_use["answer"]["shown"] == "generate"


def test_a_runaway_stream_is_stopped_early(db, sample_retriever):
    """A loop is cut off after a few repetitions, not read to max_tokens."""
    loop = "胸腺腫の治療法は、病期（正岡分類）\n" * 200  # 200 chunks of 0.05 s: 10 s when read whole
    with OpenAIStub([Reply(loop, chunk_chars=19, chunk_delay_s=0.05)]) as stub:
        t0 = time.monotonic()
        answer = ask(stub, db, sample_retriever, THYMIC, "generate", model_timeout_s=30.0)
        elapsed = time.monotonic() - t0
        time.sleep(0.3)
        assert stub.cut_streams == 1
    assert answer.mode == "extract" and answer.model_use["answer"]["stopped_reading"]
    assert elapsed < 5, elapsed
    assert len(answer.model_replies["answer"]) < len(loop) / 4


def test_a_slow_stream_is_bounded_by_the_model_timeout(db, sample_retriever):
    """The client's timeout bounds each read; the whole stream is bounded too."""
    slow = GOOD_SUMMARY * 3
    with OpenAIStub([Reply(slow, chunk_chars=2, chunk_delay_s=0.1)]) as stub:
        t0 = time.monotonic()
        answer = ask(stub, db, sample_retriever, THYMIC, "generate", model_timeout_s=1.0,
                     fallback_to_extract=True)
        assert time.monotonic() - t0 < 4
    assert answer.mode == "extract" and "did not answer within 1 s" in answer.model_use["answer"]["reason"]
    assert answer.model_use["answer"]["failure"] == "call"


def test_a_decline_is_not_covered_and_says_so(db, sample_retriever):
    with OpenAIStub([gen.INSUFFICIENT_SENTENCE]) as stub:
        answer = ask(stub, db, sample_retriever, THYMIC, "generate")
    assert not answer.governed and answer.summary is None
    assert answer.model_use["answer"]["outcome"] == DECLINED and answer.model_use["answer"]["shown"] == "refusal"


# --- lines ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("reply", ["行: なし", "行：なし", "なし", "該当なし"])
def test_lines_none_is_not_covered(db, sample_retriever, reply):
    with OpenAIStub([reply]) as stub:
        answer = ask(stub, db, sample_retriever, THYMIC, "lines")
    assert not answer.governed and answer.model_use["answer"]["outcome"] == DECLINED


@pytest.mark.parametrize("reply", [
    "行: 0, 9999",  # out of range
    "手術が中心です。",  # prose, no number
    "参考情報:\n【Q31 胸腺腫瘍にはどのような治療法がありますか？】\n3: 治療法",  # the echo Gemma 3 270M gives
    LINES_SYSTEM_PROMPT,  # the instructions back, with their example 「行: 3, 5-7」
])
def test_lines_with_no_valid_selection_falls_back_to_extract(db, sample_retriever, reply):
    with OpenAIStub([reply]) as stub:
        answer = ask(stub, db, sample_retriever, THYMIC, "lines")
    assert answer.mode == "extract" and answer.governed
    assert answer.answer == extract_answer(db, sample_retriever, THYMIC).answer
    use = answer.model_use["answer"]
    assert use["outcome"] == FELL_BACK and use["failure"] == "reply" and use["code"] in ("no_line", "echo")


def test_lines_copying_reference_lines_falls_back(db, sample_retriever):
    ref = number_reference(sample_retriever.search(THYMIC).passages)
    long_lines = [nl for nl in ref.lines if len(nl.text) > 30][:2]
    reply = "\n".join(f"{nl.number}. {nl.text}" for nl in long_lines)
    with OpenAIStub([reply]) as stub:
        answer = ask(stub, db, sample_retriever, THYMIC, "lines")
    assert answer.mode == "extract" and answer.model_use["answer"]["code"] == "echo"


def test_an_over_long_selection_keeps_the_highest_ranked_lines(db, sample_retriever):
    result = sample_retriever.search(THYMIC)
    ref = number_reference(result.passages)
    assert len({nl.score for nl in ref.lines}) > 1  # passages of different rank
    best = max(nl.score for nl in ref.lines)
    # Every line, the lowest-ranked named first: a model's order must not decide what is kept.
    worst_first = sorted(ref.lines, key=lambda nl: (nl.score, -nl.number))
    reply = "行: " + ", ".join(str(nl.number) for nl in worst_first)
    with OpenAIStub([reply]) as stub:
        answer = ask(stub, db, sample_retriever, THYMIC, "lines")
    assert answer.mode == "lines" and answer.governed and len(answer.answer) <= 501
    assert_verbatim(db, answer)
    use = answer.model_use["answer"]
    assert use["outcome"] == ANSWERED and use["lines_picked"] == len(ref) > use["lines_shown"] > 0
    assert "highest-ranked" in use["reason"]
    top = {(nl.page.url, nl.line) for nl in ref.lines if nl.score == best}
    picked_shown = [(p.url, n) for p in answer.passages for n in p.lines
                    if any(nl.page.url == p.url and nl.line == n for nl in ref.lines)]
    assert picked_shown and all(k in top for k in picked_shown[:3])


def test_lines_answer_and_model_use_in_ask_json(db, capsys, monkeypatch, sample_retriever):
    ref = number_reference(sample_retriever.search(THYMIC).passages)
    [surgery] = [nl.number for nl in ref.lines if nl.text.startswith("手術：")][:1]
    with OpenAIStub([f"行: {surgery}"]) as stub:
        for k, v in {"OPENAI_BASE_URL": stub.base_url, "OPENAI_API_KEY": "k", "GUIDERAG_ANSWER_MODEL": "m",
                     "GUIDERAG_MODEL_RETRIES": "0", "GUIDERAG_PROGRESS": "0"}.items():
            monkeypatch.setenv(k, v)
        assert main(["ask", THYMIC, "--db", str(db), "--mode", "lines", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model_use"]["answer"]["outcome"] == "answered" and data["model_use"]["answer"]["shown"] == "lines"
    assert data["model_use"]["answer"]["lines_picked"] == 1 and "ms" in data["model_use"]["answer"]
    assert "keywords" not in data["model_use"]  # no keywords model configured
    row = audit_row(db, data["audit_id"])
    assert json.loads(row["model_use"]) == data["model_use"]


# --- keywords: they may only add evidence ----------------------------------------------------------
JUNK_KEYWORDS = ["胸腺腫の治療法は？ anaknya\nで購入する", "mendatang、で購入", "INST、<<SYS>>"]


@pytest.mark.parametrize("junk", JUNK_KEYWORDS)
def test_junk_model_keywords_never_refuse_what_extract_answers(db, sample_retriever, junk):
    assert extract_answer(db, sample_retriever, SHORT_THYMIC).governed
    with OpenAIStub([junk, gen.INSUFFICIENT_SENTENCE]) as stub:  # keywords, then the answer
        answer = ask(stub, db, sample_retriever, SHORT_THYMIC, "generate", keywords_model="stub-keywords")
        [kw_request, answer_request] = stub.requests
    assert kw_request["model"] == "stub-keywords"
    kw = answer.model_use["keywords"]
    if kw["outcome"] == "ignored":
        assert "its own words" in kw["reason"] or "no keyword" in kw["reason"]
    # The question reached the answer model (here it declines), not refused by retrieval.
    assert answer.model_use["answer"]["outcome"] == DECLINED
    assert answer.retrieval_result is not None and answer.retrieval_result.governed


class KeywordsLowerTheScore:
    """The real retriever, except that a search with model keywords comes back refused: a
    scoring in which junk keywords still cost evidence (fault injection for the chatbot's
    own guard, which must hold whatever retrieval does)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def search(self, question, keywords=None):
        if keywords:  # nothing found: refused by the coverage model and by the rules alike
            return self.inner.empty_result(question, list(keywords), "fault injection: the keywords found nothing")
        return self.inner.search(question, None)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("guard", [True, False])
def test_the_chatbot_ignores_keywords_that_would_refuse_what_its_own_words_answer(
    db, sample_retriever, monkeypatch, guard
):
    if not guard:
        monkeypatch.setattr(Chatbot, "_search", lambda self, q, kw, state: self.retriever.search(q, kw))
    hurt = KeywordsLowerTheScore(sample_retriever)
    with OpenAIStub([JUNK_KEYWORDS[0], gen.INSUFFICIENT_SENTENCE]) as stub:
        answer = ask(stub, db, hurt, SHORT_THYMIC, "generate", keywords_model="stub-keywords")
        calls = stub.calls
    if guard:
        assert calls == 2 and answer.model_use["answer"]["outcome"] == DECLINED  # the model was asked
        assert answer.model_use["keywords"]["outcome"] == "ignored"
        assert "its own words" in answer.model_use["keywords"]["reason"]
    else:  # switched off, the junk keywords refuse the question before the answer model
        assert calls == 1 and not answer.governed and answer.model_use["answer"]["outcome"] == NOT_ASKED


def test_out_of_scope_never_reaches_the_answer_model_and_says_so(db, sample_retriever):
    with OpenAIStub() as stub:
        answer = ask(stub, db, sample_retriever, OUT_OF_SCOPE, "lines")
        assert stub.calls == 0
    assert answer.model_use["answer"] == {"model": "stub-answer", "outcome": NOT_ASKED, "shown": "refusal",
                                          "reason": answer.model_use["answer"]["reason"]}


def test_a_failed_call_without_fallback_is_audited_with_what_the_model_did(db, sample_retriever):
    from guiderag.errors import ModelError

    with OpenAIStub([Reply(status=500)]) as stub:
        with pytest.raises(ModelError):
            ask(stub, db, sample_retriever, THYMIC, "lines")
    with Store(db, create=False) as store:
        [row] = AuditLog(store.conn).rows()
    use = json.loads(row["model_use"])["answer"]
    assert row["coverage"] == "error" and use["outcome"] == "failed" and "HTTP 500" in use["reason"]


# --- a slow model: slots --------------------------------------------------------------------------
def test_model_calls_beyond_the_slots_wait_then_fall_back(db, sample_retriever):
    """model_concurrency=1: a second ask waits for the first's call; past the queue timeout
    it is a model failure (here: fall back), and it says it was busy."""
    ref = number_reference(sample_retriever.search(THYMIC).passages)
    gate = threading.Event()  # the first call is answered once the second has given up
    with OpenAIStub(default=Reply("行: 1", gate=gate, delay_s=30)) as stub:
        results: dict[str, object] = {}
        stages: list[str] = []

        def first() -> None:
            results["first"] = ask(stub, db, sample_retriever, THYMIC, "lines", model_concurrency=1)

        t = threading.Thread(target=first)
        t.start()
        deadline = time.monotonic() + 30
        while stub.calls == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert stub.calls == 1  # the first holds the one slot now
        with Chatbot(BotConfig.of(settings_for(stub, db, model_concurrency=1, model_queue_timeout_s=0.3,
                                  fallback_to_extract=True)), retriever=sample_retriever) as bot:
            second = bot.ask(THYMIC, "lines", progress=lambda stage, chars: stages.append(stage))
        gate.set()
        t.join()
        assert stub.calls == 1  # the second never reached the server
    assert len(ref) >= 1 and results["first"].mode == "lines"  # type: ignore[attr-defined]
    assert second.mode == "extract" and "stayed busy" in second.model_use["answer"]["reason"]
    assert "queued" in stages


def test_keywords_do_not_wait_for_a_busy_model(db, sample_retriever):
    """Model keywords are optional: with the one slot busy, a question that needs no model
    answer is answered at once with its own keywords, and says the model was skipped."""
    gate = threading.Event()
    with OpenAIStub(default=Reply("行: 1", gate=gate, delay_s=30)) as stub:
        first = threading.Thread(target=lambda: ask(stub, db, sample_retriever, THYMIC, "lines",
                                                    model_concurrency=1, model_timeout_s=40.0))
        first.start()
        deadline = time.monotonic() + 10
        while stub.calls == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        answer = ask(stub, db, sample_retriever, SHORT_THYMIC, "extract", model_concurrency=1,
                     keywords_model="stub-keywords")
        still_waiting = first.is_alive()
        gate.set()
        first.join(timeout=30)
        assert stub.calls == 1  # the keywords call never went out
    assert still_waiting and answer.governed
    assert answer.answer == extract_answer(db, sample_retriever, SHORT_THYMIC).answer
    assert answer.model_use["keywords"]["outcome"] == "skipped" and "busy" in answer.model_use["keywords"]["reason"]


def test_a_failed_keywords_call_costs_only_the_keywords(db, sample_retriever):
    with OpenAIStub([Reply(status=500), "行: 1"]) as stub:  # the keywords call fails; the answer works
        answer = ask(stub, db, sample_retriever, THYMIC, "lines", keywords_model="stub-keywords")
    kw = answer.model_use["keywords"]
    assert kw["outcome"] == "failed" and "HTTP 500" in kw["reason"]
    assert answer.mode == "lines" and answer.governed and answer.model_use["answer"]["outcome"] == ANSWERED
    assert answer.keywords == sample_retriever.search(THYMIC).keywords  # the question's own
