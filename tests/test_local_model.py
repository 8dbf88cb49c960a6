"""The pipeline end to end with a real (weak) local model serving keywords and answers.

Gemma 3 270M through llama.cpp's server (tests/local_model.py) is the weak model hospitals
may run for privacy: its keywords are junk, its summaries loop, its line selections echo
the prompt. With it, on the bundled sample guideline:
- 「胸腺腫の治療法は？」, answered in extract mode, is not refused in lines or generate mode
  (model keywords may only add evidence), and ask --json says what the model did;
- the protocol's four in-scope questions keep the passages extract mode finds, its four
  out-of-scope ones are refused, every lines answer is verbatim, and no generated text
  with a repeated line is ever shown.
Timings are printed (not asserted); the quality of a 270M model is not the point.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from guiderag.chatbot.config import BotConfig
from guiderag import retrieval
from guiderag.chatbot import Chatbot
from guiderag.cli import main
from guiderag.eval.protocol_set import protocol_questions
from guiderag.settings import Settings
from local_model import REFERENCE_CHARS, model_settings
from storekit import assert_verbatim, copy_store

pytestmark = [pytest.mark.model, pytest.mark.slow]

SHORT_THYMIC = "胸腺腫の治療法は？"


@pytest.fixture(scope="module")
def sample_db(scraped_sample, tmp_path_factory) -> Path:
    """A copy of the session's sample store (conftest.scraped_sample): the asks here write audit rows."""
    return copy_store(scraped_sample, tmp_path_factory.mktemp("sample-llm") / "guide.db")


@pytest.fixture(scope="module")
def retriever(sample_db):
    offline = offline_settings(sample_db)
    return retrieval.load_retriever(offline.retrieval, offline.storage)


def offline_settings(db: Path) -> Settings:
    """No model, the same reference budget as the model runs: what extract mode finds."""
    return Settings.load(env={}, db=db, reference_chars=REFERENCE_CHARS)


def repeats(text: str) -> list[str]:
    """Lines or sentences said more than once (an independent check of what was shown)."""
    units = [u.strip() for u in re.split(r"(?<=[。！？])|\n", text or "") if len(u.strip()) >= 6]
    return sorted({u for u in units if units.count(u) > 1})


def reference_lines(answer) -> set[tuple[str, int]]:
    result = answer.retrieval_result
    return {(p.page.url, n) for p in result.passages for n in p.lines} if result is not None else set()


def check_model_answer(db: Path, answer, mode: str) -> None:
    """What must hold for any answer a model mode gives."""
    use = answer.model_use.get("answer")
    assert use is not None and use["outcome"] in ("answered", "declined", "fell_back", "not_asked"), use
    if answer.mode in ("extract", "lines") and answer.governed:
        assert_verbatim(db, answer)
    if answer.summary is not None:
        assert answer.mode == "generate" and not repeats(answer.summary), answer.summary
    if use["outcome"] == "fell_back":
        assert answer.mode == "extract" and answer.error and use["shown"] in ("extract", "refusal")


def test_thymoma_answered_in_extract_is_not_refused_with_the_model(local_model, sample_db, retriever, capsys,
                                                                 monkeypatch):
    offline = offline_settings(sample_db)
    with Chatbot(BotConfig.of(offline), retriever=retriever) as bot:
        extract = bot.ask(SHORT_THYMIC, "extract")
    assert extract.governed

    settings = model_settings(local_model, db=sample_db)
    timings = []
    for mode in ("extract", "generate"):
        t0 = time.monotonic()
        with Chatbot(BotConfig.of(settings), retriever=retriever) as bot:
            answer = bot.ask(SHORT_THYMIC, mode)
        timings.append(f"{mode} {time.monotonic() - t0:.1f} s")
        assert answer.governed, (mode, answer.model_use)
        assert "keywords" in answer.model_use
        if mode != "extract":
            check_model_answer(sample_db, answer, mode)
        assert reference_lines(extract) <= reference_lines(answer), (mode, answer.model_use)

    # lines through the command line: ask --json says what each model did.
    for key, value in local_model.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GUIDERAG_PROGRESS", "0")
    t0 = time.monotonic()
    assert main(["ask", SHORT_THYMIC, "--db", str(sample_db), "--mode", "lines", "--json"]) == 0
    timings.append(f"lines (CLI) {time.monotonic() - t0:.1f} s")
    data = json.loads(capsys.readouterr().out)
    assert data["coverage"] == "governed"
    assert data["model_use"]["keywords"]["outcome"] in ("used", "ignored")
    assert data["model_use"]["answer"]["outcome"] in ("answered", "fell_back")
    assert data["model_use"]["answer"]["shown"] in ("lines", "extract")
    print("\n" + SHORT_THYMIC + ": " + ", ".join(timings) + "; model_use: "
          + json.dumps(data["model_use"], ensure_ascii=False))


def test_the_protocol_set_with_the_local_model(local_model, sample_db, retriever):
    questions = protocol_questions()
    offline = offline_settings(sample_db)
    with Chatbot(BotConfig.of(offline), retriever=retriever) as bot:
        extract = {q.id: bot.ask(q.question, "extract") for q in questions}
    assert [q.id for q in questions if extract[q.id].governed] == ["P-IN-1", "P-IN-2", "P-IN-3", "P-IN-4"]

    settings = model_settings(local_model, db=sample_db)
    report = []
    outcomes: dict[str, int] = {}
    for mode in ("lines", "generate"):
        for q in questions:
            t0 = time.monotonic()
            with Chatbot(BotConfig.of(settings), retriever=retriever) as bot:
                answer = bot.ask(q.question, mode)
            seconds = time.monotonic() - t0
            use = answer.model_use["answer"]
            outcomes[f"{mode}/{use['outcome']}"] = outcomes.get(f"{mode}/{use['outcome']}", 0) + 1
            report.append(f"{mode} {q.id} {seconds:.0f}s {use['outcome']}"
                          + (f" ({use.get('code')})" if use.get("code") else ""))
            check_model_answer(sample_db, answer, mode)
            if q.kind == "in_scope":
                # junk keywords never cost the evidence extract mode finds
                assert reference_lines(extract[q.id]) <= reference_lines(answer), (q.id, answer.model_use)
                assert use["outcome"] != "not_asked", (q.id, answer.model_use)
            else:
                assert not answer.governed, (q.id, answer.answer[:200], answer.model_use)
    print("\nprotocol set with Gemma 3 270M: " + "; ".join(report) + f"\noutcomes: {outcomes}")
