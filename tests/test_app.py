"""The Streamlit chat (app.py) driven through streamlit.testing.v1.AppTest.

Real components throughout: the bundled sample site served on loopback and scraped into
a real SQLite store, the real retrieval index and chatbot, and a loopback server speaking
the OpenAI wire format for the model-error flow. The sample store is scraped once per test
session (conftest.scraped_sample) and copied for each test, so the tests do not share a
database; the app's own first-run build of it (guiderag.ui.bootstrap) has its test here.
"""
from __future__ import annotations

import html
import json
import sqlite3
import re
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from guiderag.ui.bootstrap import store_status
from guiderag.settings import DEFAULT_ESCALATION, DEFAULT_REFUSAL, Settings
from guiderag.resources import SAMPLE_SITE_URL
from guiderag.ui import render, session
from guiderag.ui.text import MODE_LABELS, TEXT
from openai_stub import OpenAIStub, Reply  # tests/ is on sys.path (conftest.py)
from storekit import copy_store
from guiderag.store import FetchedPage, Store
from guiderag.scopes import RetrievalConfig, StoreConfig

APP = str(Path(__file__).resolve().parents[1] / "app.py")
RUN_TIMEOUT_S = 120  # a generous ceiling for slow CI machines, not a speed assertion
IN_SCOPE = "胸腺腫瘍にはどのような治療法がありますか？"
OUT_OF_SCOPE = "小児の神経膠腫の治療法を教えてください。"


# --- fixtures ---------------------------------------------------------------------------
@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, no_settings_env: None) -> pytest.MonkeyPatch:
    """No model and no store from the developer's shell leaks into a test (conftest's
    no_settings_env); the monkeypatch that sets the test's own settings."""
    return monkeypatch


@pytest.fixture
def store_copy(scraped_sample: Path, tmp_path: Path, clean_env: pytest.MonkeyPatch) -> Path:
    """A private copy of the session's sample store (conftest.scraped_sample) as the app's store."""
    db = copy_store(scraped_sample, tmp_path / "store" / "guiderag.db")
    clean_env.setenv("GUIDERAG_DB", str(db))
    return db


def start_app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=RUN_TIMEOUT_S).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def ask(at: AppTest, question: str) -> AppTest:
    at.chat_input[0].set_value(question).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def blocks(at: AppTest, css_class: str) -> list[str]:
    """The HTML of every markdown element the app wrote with our own class."""
    found = []
    for m in at.markdown:
        opening = re.match(r'<div class="(grag-block[^"]*)"', m.value)
        if opening and css_class in opening.group(1).split():
            found.append(m.value)
    return found


def history(at: AppTest) -> list[session.Turn]:
    return list(at.session_state["history"])


# --- the flows --------------------------------------------------------------------------
def test_answered_question_shows_verbatim_quotes_with_link_date_and_version(store_copy: Path) -> None:
    at = ask(start_app(), IN_SCOPE)
    [turn] = history(at)
    answer = turn.answer
    assert answer is not None and answer.governed and answer.passages
    assert answer.mode == "extract"
    [shown] = blocks(at, "grag-governed")
    with Store(store_copy) as store:
        for passage in answer.passages:
            page = store.get_version(passage.url, passage.version)
            assert page is not None, passage.url
            for number, text in zip(passage.lines, passage.text.splitlines()):
                # The quote is the stored line itself, escaped, not a paraphrase.
                assert page.line(number) == text
                assert render.escape_text(text) in shown
            assert f'href="{html.escape(passage.url, quote=True)}"' in shown
            assert render.escape_text(page.title) in shown
            assert render.escape_text(f"版：{passage.version}") in shown
    assert "取得日" in shown and re.search(r"\d{4}年\d{1,2}月\d{1,2}日", shown)
    assert not at.error and not blocks(at, "grag-notcovered")
    # Under each cited page, closed: the whole page as stored, the quoted lines marked.
    pages = {(p.url, p.version) for p in answer.passages}
    assert shown.count('<details class="grag-page">') == len(pages)
    assert set(turn.pages) == pages
    with Store(store_copy) as store:
        for url, version in pages:
            page = store.get_version(url, version)
            assert turn.pages[(url, version)] == tuple(page.lines)
            for line in page.lines:
                assert not line.strip() or render.escape_text(line) in shown
        cited = {(p.url, p.version, n) for p in answer.passages for n in p.lines}
        marked = re.findall(r'<span class="grag-pline grag-cited">(.*?)</span>', shown)
        assert len(marked) == len(cited)
        passage = answer.passages[0]
        page = store.get_version(passage.url, passage.version)
        assert render.escape_text(page.line(passage.lines[0])) in marked
    # The user's question is shown too, in its own chat message.
    assert [m.name for m in at.chat_message] == ["user", "assistant"]


def test_not_covered_question_gets_the_refusal_and_escalation_not_an_error(store_copy: Path) -> None:
    at = ask(start_app(), OUT_OF_SCOPE)
    [turn] = history(at)
    assert turn.answer is not None and not turn.answer.governed
    [shown] = blocks(at, "grag-notcovered")
    assert render.escape_text(DEFAULT_REFUSAL) in shown
    assert render.escape_text(DEFAULT_ESCALATION) in shown
    assert render.escape_text(TEXT["not_covered_badge"]) in shown
    assert "grag-quote" not in shown and "href=" not in shown
    assert not at.error and not blocks(at, "grag-governed")


def test_history_is_kept_for_the_session_and_each_question_read_with_the_earlier_ones(store_copy: Path) -> None:
    at = ask(ask(start_app(), IN_SCOPE), OUT_OF_SCOPE)
    turns = history(at)
    assert [t.question for t in turns] == [IN_SCOPE, OUT_OF_SCOPE]
    assert turns[0].answer.governed and not turns[1].answer.governed
    # the second was read with the first (chatbot.conversation), as its audit row records
    with sqlite3.connect(store_copy) as conn:
        recorded = [json.loads(c) if c else None for (c,) in conn.execute("SELECT conversation FROM audit ORDER BY id")]
    assert recorded[-2:] == [None, {"history": [IN_SCOPE], "read_as": recorded[-1]["read_as"],
                                    "context": turns[1].answer.context}]
    # Both answers stay on screen, in order.
    assert len(blocks(at, "grag-governed")) == 1 and len(blocks(at, "grag-notcovered")) == 1
    assert [m.name for m in at.chat_message] == ["user", "assistant", "user", "assistant"]


def test_model_error_shows_a_clear_message_not_a_crash(store_copy: Path, clean_env: pytest.MonkeyPatch) -> None:
    with OpenAIStub(default=Reply(status=500)) as stub:
        clean_env.setenv("OPENAI_BASE_URL", stub.base_url)
        clean_env.setenv("OPENAI_API_KEY", "test")
        clean_env.setenv("GUIDERAG_ANSWER_MODEL", "stub-model")
        clean_env.setenv("GUIDERAG_MODE", "generate")
        clean_env.setenv("GUIDERAG_MODEL_RETRIES", "0")
        at = start_app()
        # With a model configured the sidebar offers all three modes, generate preselected.
        [mode] = at.sidebar.radio
        assert mode.options == [MODE_LABELS[m] for m in ("extract", "lines", "generate")]
        assert mode.value == "generate"
        at = ask(at, IN_SCOPE)
        assert stub.calls >= 1
    [turn] = history(at)
    assert turn.error_kind == "model"
    assert [e.value for e in at.error] == [TEXT["model_error"]]
    assert not blocks(at, "grag-notcovered")  # a failure is not "the guideline does not say"
    [when] = blocks(at, "grag-incident")
    assert "発生時刻" in when and "127.0.0.1" not in when  # no endpoint on the patient's screen


def test_generate_mode_labels_the_summary_and_sends_no_history_to_the_model(
    store_copy: Path, clean_env: pytest.MonkeyPatch
) -> None:
    summary = "胸腺腫瘍の治療について、ガイドラインの記載をまとめました。"
    with OpenAIStub(default=summary) as stub:
        clean_env.setenv("OPENAI_BASE_URL", stub.base_url)
        clean_env.setenv("OPENAI_API_KEY", "test")
        clean_env.setenv("GUIDERAG_ANSWER_MODEL", "stub-model")
        clean_env.setenv("GUIDERAG_MODE", "generate")
        at = ask(start_app(), "胸腺腫の手術について知りたい")
        first_calls = stub.calls
        at = ask(at, IN_SCOPE)
        later = stub.requests[first_calls:]
    assert first_calls >= 1 and later
    for request in later:
        for message in request["messages"]:
            assert "胸腺腫の手術について知りたい" not in message["content"]
    turn = history(at)[-1]
    assert turn.answer is not None and turn.answer.governed and turn.answer.summary
    shown = blocks(at, "grag-governed")[-1]
    label = render.escape_text(TEXT["summary_label"])
    assert label in shown and "grag-quote" in shown
    assert shown.index(label) < shown.index("grag-quote")  # the summary sits above its sources


def test_empty_input_is_answered_with_a_hint_and_nothing_is_asked(store_copy: Path) -> None:
    at = ask(start_app(), "   　  ")
    assert history(at) == []
    assert [i.value for i in at.info] == [TEXT["empty_question"]]
    assert not at.error


def test_first_run_builds_the_sample_guideline_into_an_empty_store(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    """The default store (no GUIDERAG_DB: scripts/chat.sh's first run) gets the sample."""
    from guiderag.resources import default_db

    clean_env.setenv("XDG_DATA_HOME", str(tmp_path / "fresh"))
    db = default_db()
    at = start_app()
    [status] = at.status
    assert status.state == "complete"
    pages = store_status(Settings.load(env={}, db=db)).pages
    assert pages > 0
    assert status.label == TEXT["setup_done"].format(pages=pages)
    sidebar = "".join(m.value for m in at.sidebar.markdown)
    assert render.escape_text(TEXT["sidebar_sample"]) in sidebar
    assert f"<dd>{pages}</dd>" in sidebar
    assert TEXT["sidebar_sample_note"] in [c.value for c in at.sidebar.caption]
    # The next start finds the pages and does not build again; the question is answered.
    at = ask(start_app(), IN_SCOPE)
    assert not at.status
    assert history(at)[0].answer.governed


def test_only_the_bundled_sample_is_called_the_sample() -> None:
    """A guideline scraped from a loopback server (a local mirror, a test site) is named by
    its host and linked, like any other; only the bundled sample's stored URL is the sample."""
    from guiderag.ui.bootstrap import StoreStatus

    settings = Settings.load(env={})
    def status(url: str) -> StoreStatus:
        return StoreStatus(pages=3, toc_url=url, last_scraped=None, last_run_id=1)

    sample = status(SAMPLE_SITE_URL + "/guide/index.html")
    assert render.site_label(sample, settings) == TEXT["sidebar_sample"]
    assert "href=" not in render.sidebar_html(sample, settings)
    for url in ("http://127.0.0.1:8123/guide/index.html", "http://localhost/guide/index.html",
                SAMPLE_SITE_URL + "/other/index.html"):
        assert not render.is_sample_site(url, settings), url
        assert render.site_label(status(url), settings) != TEXT["sidebar_sample"]
    local = status("http://127.0.0.1:8123/guide/index.html")
    assert render.site_label(local, settings) == "127.0.0.1"
    assert 'href="http://127.0.0.1:8123/guide/index.html"' in render.sidebar_html(local, settings)


def test_a_configured_empty_store_is_never_given_the_sample(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    """GUIDERAG_DB names a store of the deployment's own: empty, it says so; it does not show
    patients the demo guideline instead (nor does a PostgreSQL store: see test_chat_command)."""
    db = tmp_path / "hospital" / "guiderag.db"
    clean_env.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    clean_env.setenv("GUIDERAG_DB", str(db))
    at = start_app()
    assert not at.status
    assert [i.value for i in at.info] == [TEXT["no_guideline"]]
    assert not db.exists()
    db.parent.mkdir()
    db.touch()  # an empty file is no different
    at = start_app()
    assert [i.value for i in at.info] == [TEXT["no_guideline"]] and db.stat().st_size == 0


def test_empty_store_is_left_alone_when_the_sample_is_switched_off(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    from guiderag.resources import default_db

    clean_env.setenv("XDG_DATA_HOME", str(tmp_path / "real"))  # the default store, which would be filled
    db = default_db()
    clean_env.setenv("GUIDERAG_SAMPLE_ON_EMPTY", "0")
    at = start_app()
    assert not at.status
    assert [i.value for i in at.info] == [TEXT["no_guideline"]]
    assert not db.exists()  # looking did not create an empty database


def test_sidebar_offers_only_extract_without_a_model(store_copy: Path) -> None:
    at = start_app()
    assert not at.sidebar.radio
    assert TEXT["sidebar_mode_extract_only"] in [c.value for c in at.sidebar.caption]
    assert TEXT["disclaimer"] in [c.value for c in at.sidebar.caption]


# --- nothing a user or a page says is rendered as HTML or Markdown ----------------------
INJECTIONS = (
    "<script>alert(1)</script>",
    "**太字**",
    "[リンク](javascript:alert(1))",
    "<img src=x onerror=alert(2)>",
    ":red[赤]",
    "$x^2$",
)


def _assert_inert(shown: str) -> None:
    assert "<script" not in shown.lower() and "<img" not in shown.lower()
    assert "javascript:" not in shown.lower()  # the ':' is a character reference
    assert "**" not in shown and "[" not in shown and "$" not in shown


def test_escape_text_leaves_nothing_for_html_or_markdown() -> None:
    for text in INJECTIONS:
        escaped = render.escape_text(text)
        _assert_inert(escaped)
        assert html.unescape(escaped) == text  # shown literally, character for character
    assert render.link("javascript:alert(1)", "x") == "x"
    assert render.link("data:text/html,hi", "x") == "x"
    assert 'href="https://example.org/a?b=1&amp;c=2"' in render.link("https://example.org/a?b=1&c=2", "x")
    assert "\n" not in render.question_html("一行目\n\n**二行目**")


def injected_store(db: Path) -> None:
    """A one-page guideline whose lines carry markup, indexed."""
    from guiderag import retrieval

    lines = (
        "胸腺腫瘍の治療についての説明",
        "胸腺腫瘍の治療では手術がよく行われます " + " ".join(INJECTIONS),
        "胸腺腫瘍の治療には放射線治療もあります。",
    )
    with Store(db) as store:
        run = store.begin_run("https://guide.example.org/index.html")
        page = FetchedPage(url="https://guide.example.org/q1.html?a=1&b=<x>", title="Q1 <b>治療</b> **法**", lines=lines)
        store.commit_run(run, [page], content_urls=[page.url])
    retrieval.build_index(RetrievalConfig(), StoreConfig(db=db))


def test_markup_in_questions_and_pages_is_shown_literally(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    db = tmp_path / "inj" / "guiderag.db"
    injected_store(db)
    clean_env.setenv("GUIDERAG_DB", str(db))
    question = "胸腺腫瘍の治療は？ " + " ".join(INJECTIONS)
    at = ask(start_app(), question)
    [turn] = history(at)
    assert turn.answer is not None and turn.answer.governed
    user_html = [m.value for m in at.chat_message[0].markdown]
    answer_html = [m.value for m in at.chat_message[1].markdown]
    assert user_html and answer_html
    for shown in user_html + answer_html:
        body = re.sub(r'href="[^"]*"', "", shown)  # our own link target is checked below
        _assert_inert(body)
    joined = "".join(answer_html)
    assert render.escape_text(INJECTIONS[0]) in joined
    assert render.escape_text("Q1 <b>治療</b> **法**") in joined
    assert 'href="https://guide.example.org/q1.html?a=1&amp;b=&lt;x&gt;"' in joined
    assert render.escape_text(question) in "".join(user_html)
    # A real site: the sidebar names its host, linked to its table of contents; no sample note.
    sidebar = "".join(m.value for m in at.sidebar.markdown)
    assert 'href="https://guide.example.org/index.html"' in sidebar
    assert render.escape_text("guide.example.org") in sidebar
    assert TEXT["sidebar_sample_note"] not in [c.value for c in at.sidebar.caption]


# --- several browser sessions at once ------------------------------------------------------
def test_concurrent_sessions_get_the_same_answers_as_one_at_a_time(store_copy: Path) -> None:
    """Streamlit answers each session in its own thread; answers must not depend on that."""
    import threading

    settings = Settings.load()
    questions = [IN_SCOPE, OUT_OF_SCOPE, "胸腺腫の手術について知りたい", "放射線治療の副作用は？",
                 "抗がん剤治療はどのように行いますか", "再発したときの治療は？"]

    def shown(turn: session.Turn) -> tuple:
        a = turn.answer
        return (turn.error_kind, a.coverage, a.answer, tuple(a.keywords)) if a else (turn.error_kind,)

    expected = {q: shown(session.ask(q, "extract", settings)) for q in questions}
    got: list[tuple[str, tuple]] = []

    def browser_session(offset: int) -> None:
        for i in range(len(questions) * 6):
            q = questions[(i + offset) % len(questions)]
            got.append((q, shown(session.ask(q, "extract", settings))))

    threads = [threading.Thread(target=browser_session, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 * len(questions) * 6
    assert [q for q, s in got if s != expected[q]] == []


def test_model_failure_with_fallback_says_so_above_the_extract_answer(
    store_copy: Path, clean_env: pytest.MonkeyPatch
) -> None:
    with OpenAIStub(default=Reply(status=500)) as stub:
        for key, value in {"OPENAI_BASE_URL": stub.base_url, "OPENAI_API_KEY": "test",
                           "GUIDERAG_ANSWER_MODEL": "stub-model", "GUIDERAG_MODE": "lines",
                           "GUIDERAG_MODEL_RETRIES": "0", "GUIDERAG_FALLBACK_TO_EXTRACT": "1"}.items():
            clean_env.setenv(key, value)
        at = ask(start_app(), IN_SCOPE)
        assert stub.calls >= 1
    [turn] = history(at)
    assert turn.error_kind is None and turn.answer.governed and turn.answer.error
    [shown] = blocks(at, "grag-governed")
    warning = render.escape_text(TEXT["model_fallback"])
    assert warning in shown and shown.index(warning) < shown.index("grag-quote")
    assert not at.error


def test_long_question_is_answered_with_a_note_that_it_was_cut(store_copy: Path) -> None:
    limit = Settings.load().answer.max_question_chars
    question = IN_SCOPE + "詳しく知りたいです。" * (limit // 5)
    at = ask(start_app(), question)
    [turn] = history(at)
    assert turn.answer is not None and turn.answer.notes
    shown = "".join(blocks(at, "grag-answer"))
    for note in turn.answer.notes:
        assert render.escape_text(note) in shown


def test_bad_configuration_is_reported_not_crashed(store_copy: Path, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("GUIDERAG_MODE", "poetry")
    at = start_app()
    assert [e.value for e in at.error] == [TEXT["settings_error"]]
    assert any("poetry" in html.unescape(m.value) for m in at.markdown)
    assert not at.chat_input


def test_clear_button_empties_the_conversation(store_copy: Path) -> None:
    at = ask(start_app(), IN_SCOPE)
    assert len(at.chat_message) == 2
    at.sidebar.button(key="clear").click().run()
    assert history(at) == [] and not at.chat_message


def test_a_new_scrape_is_answered_from_without_restarting_the_app(store_copy: Path) -> None:
    """The retriever is cached per process, but keyed on the store's last scrape."""
    from guiderag import retrieval

    question = "温熱療法とはどのような治療ですか？"
    at = ask(start_app(), question)
    assert not history(at)[0].answer.governed
    with Store(store_copy) as store:
        live = [p.url for p in store.current_pages()]
        run = store.begin_run(store.last_run()["toc_url"])
        page = FetchedPage(
            url="http://sample-guide.guiderag.invalid/guide/onnetsu.html",
            title="温熱療法とはどのような治療ですか？",
            lines=("温熱療法とはどのような治療ですか？",
                   "温熱療法は、がんのある部分を温めて、ほかの治療の効果を高めることをねらう治療です。"),
        )
        store.commit_run(run, [page], content_urls=[*live, page.url])
    loaded = Settings.load()
    retrieval.build_index(loaded.retrieval, loaded.storage)
    at = ask(at, question)
    answer = history(at)[-1].answer
    assert answer.governed and [p.url for p in answer.passages][:1] == [page.url]


@pytest.mark.parametrize("one_lock", [False, True])
def test_a_slow_model_answer_does_not_hold_up_another_session(
    store_copy: Path, clean_env: pytest.MonkeyPatch, monkeypatch: pytest.MonkeyPatch, one_lock: bool
) -> None:
    """A patient waiting on the model must not stall one whose answer needs none. With one
    lock around every answer (the old app, `one_lock`), the second answer waits."""
    import threading

    gate = threading.Event()
    entered: list[int] = []
    second_at_the_lock = threading.Event()
    if one_lock:
        from guiderag.chatbot import library_cache

        class Serialized(session.Library):
            def ask(self, *args, **kwargs):  # type: ignore[override]
                entered.append(1)
                if len(entered) == 2:
                    second_at_the_lock.set()
                with session.INDEX_LOCK:
                    return super().ask(*args, **kwargs)

        monkeypatch.setattr(library_cache, "Library", Serialized)
    with OpenAIStub(default=Reply("行: 1", gate=gate, delay_s=30)) as stub:
        for key, value in {"OPENAI_BASE_URL": stub.base_url, "OPENAI_API_KEY": "test",
                           "GUIDERAG_ANSWER_MODEL": "stub-model", "GUIDERAG_MODEL_TIMEOUT_S": "60"}.items():
            clean_env.setenv(key, value)
        settings = Settings.load()
        session.get_library(settings)  # loaded: what follows is answering only
        slow: list[session.Turn] = []
        waiting = threading.Thread(target=lambda: slow.append(session.ask(IN_SCOPE, "lines", settings)))
        waiting.start()
        deadline = time.monotonic() + 30
        while stub.calls == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert stub.calls == 1  # the first patient's answer is with the model now
        quick: list[session.Turn] = []
        other = threading.Thread(target=lambda: quick.append(session.ask(OUT_OF_SCOPE, "extract", settings)))
        other.start()
        if one_lock:  # the second answer waits at the lock the first holds: a second shows it
            assert second_at_the_lock.wait(timeout=30)
            other.join(timeout=1)
        else:
            other.join(timeout=10)
        answered_meanwhile = not other.is_alive()
        gate.set()
        waiting.join(timeout=30)
        other.join(timeout=30)
    assert answered_meanwhile is (not one_lock)
    assert quick and quick[0].answer is not None and not quick[0].answer.governed
    assert slow and slow[0].answer is not None and slow[0].answer.mode == "lines"


def test_the_progress_line_says_what_is_happening_and_for_how_long(store_copy: Path, clean_env: pytest.MonkeyPatch) -> None:
    with OpenAIStub(default=Reply("行: 1", chunk_chars=1)) as stub:
        for key, value in {"OPENAI_BASE_URL": stub.base_url, "OPENAI_API_KEY": "test",
                           "GUIDERAG_MODEL": "stub-model"}.items():
            clean_env.setenv(key, value)
        settings = Settings.load()
        seen: list[tuple[str, int]] = []

        class Recorder(session.Activity):
            def update(self, stage: str, chars: int = 0) -> None:
                seen.append((stage, chars))
                super().update(stage, chars)

        turn = session.ask(IN_SCOPE, "lines", settings, activity=Recorder())
    assert turn.answer is not None and turn.answer.model_use["answer"]["outcome"] == "answered"
    stages = [s for s, _ in seen]
    assert stages[0] == "searching" and "keywords" in stages and "answering" in stages
    assert max(c for s, c in seen if s == "answering") == len("行: 1")
    shown = render.progress_html("answering", 12.7, 240)
    assert render.escape_text(TEXT["stage_answering"]) in shown and "12" in shown and "240" in shown
    assert render.escape_text(TEXT["stage_note"]) in shown
    assert "grag-note" not in render.progress_html("loading", 3.2)


def test_a_degenerate_summary_is_replaced_by_the_verbatim_answer_with_a_note(
    store_copy: Path, clean_env: pytest.MonkeyPatch
) -> None:
    loop = "胸腺腫瘍の治療法は、病期（正岡分類）\n" * 30
    with OpenAIStub(default=loop) as stub:
        for key, value in {"OPENAI_BASE_URL": stub.base_url, "OPENAI_API_KEY": "test",
                           "GUIDERAG_ANSWER_MODEL": "stub-model", "GUIDERAG_MODE": "generate"}.items():
            clean_env.setenv(key, value)
        at = ask(start_app(), IN_SCOPE)
    [turn] = history(at)
    assert turn.error_kind is None and turn.answer.mode == "extract" and turn.answer.summary is None
    [shown] = blocks(at, "grag-governed")
    note = render.escape_text(TEXT["model_unusable"])
    assert note in shown and shown.index(note) < shown.index("grag-quote")
    assert "正岡分類）" not in html.unescape(shown.split("grag-quote")[0])  # none of the loop shown
    assert not at.error
