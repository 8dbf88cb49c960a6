"""The chat in a real browser: `streamlit run app.py` on 127.0.0.1, driven by Debian's Chromium.

Asserts on what a person sees (the quoted guideline lines with their page link; the
refusal; markup typed by the user shown literally), saves desktop and phone-width
screenshots under tests/artifacts/, and prints the time from Enter to the answer on
screen (extract mode) measured inside the page. The figure is printed, not asserted.
"""
from __future__ import annotations

import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from guiderag.settings import DEFAULT_ESCALATION, DEFAULT_REFUSAL
from browserkit import (  # tests/ is on sys.path (conftest.py)
    answers, browser_session, last_message, open_chat, send, streamlit_app,
)
from openai_stub import OpenAIStub
from storekit import copy_store
from guiderag.store import Store

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
IN_SCOPE = "胸腺腫瘍の治療法を教えてください。"
OUT_OF_SCOPE = "小児の神経膠腫の治療法を教えてください。"
MARKUP_QUESTION = "**太字** <script>window.__xss=1</script> <img src=x onerror=\"window.__xss=2\"> [押して](javascript:window.__xss=3)"
SUMMARY = "胸腺腫瘍の治療の中心は手術です。放射線治療や薬物療法を組み合わせることもあります。"
SUMMARY_LABEL = "要約（AIが生成）"
# Extra questions for the latency figure (answers or refusals: both are timed).
LATENCY_QUESTIONS = (
    "胸腺腫の手術について知りたい",
    "放射線治療の副作用は？",
    "抗がん剤治療はどのように行いますか",
    "再発したときの治療は？",
    "治療後の通院はどうなりますか",
    "胸腺がんとは何ですか",
    "小児の神経膠腫の治療法",
    "手術の後の生活で気をつけることは",
)

# Runs inside the page: stamps Enter in the chat box, and the first moment the reply to
# the question is on screen (the question's bubble, then an answer or an alert after it).
@pytest.fixture(scope="module")
def prepared_store(scraped_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the session's scraped sample (conftest.scraped_sample): the chat audits its answers."""
    return copy_store(scraped_sample, tmp_path_factory.mktemp("browser") / "guiderag.db")


@pytest.fixture(scope="module")
def model() -> Iterator[OpenAIStub]:
    """A loopback OpenAI-compatible server, so the sidebar offers the model modes too."""
    with OpenAIStub(default=SUMMARY) as stub:
        yield stub


@pytest.fixture(scope="module")
def server(prepared_store: Path, model: OpenAIStub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`streamlit run app.py` on a free loopback port, with GUIDERAG_DB at the prepared store.

    A model is configured (the loopback stub), but the default mode stays extract."""
    yield from streamlit_app(tmp_path_factory, {
        "GUIDERAG_DB": str(prepared_store), "OPENAI_BASE_URL": model.base_url,
        "OPENAI_API_KEY": "test", "GUIDERAG_ANSWER_MODEL": "stub-model"})


@pytest.fixture(scope="module")
def browser() -> Iterator["object"]:
    with browser_session() as driver:
        yield driver


def screenshot(driver, name: str) -> None:
    """Scroll the latest reply to the top of the view, then save what a person sees."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin

    reply = last_message(driver)
    # A wheel scroll, as a person would: Streamlit keeps a chat pinned to its bottom
    # against programmatic scrolling.
    for _ in range(5):
        top = driver.execute_script("return arguments[0].getBoundingClientRect().top;", reply)
        if abs(top - 70) < 20:
            break
        size = driver.get_window_size()
        middle = ScrollOrigin.from_viewport(size["width"] // 2, size["height"] // 3)
        ActionChains(driver).scroll_from_origin(middle, 0, int(top - 70)).perform()
        time.sleep(0.3)
    driver.save_screenshot(str(ARTIFACTS / name))


def no_horizontal_scroll(driver) -> bool:
    return bool(driver.execute_script(
        "var els = document.querySelectorAll('.grag-block');"
        "for (var i = 0; i < els.length; i++) { if (els[i].scrollWidth > els[i].clientWidth + 1) return false; }"
        "return document.documentElement.scrollWidth <= window.innerWidth;"
    ))


# --- the test -------------------------------------------------------------------------------
def test_chat_in_chromium(browser, server: str, prepared_store: Path, model: OpenAIStub) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with Store(prepared_store) as store:
        pages = {p.url: p for p in store.current_pages()}
    assert pages

    # Desktop: one in-scope question.
    open_chat(browser, server, 1280, 1400)
    send(browser, IN_SCOPE)
    reply = last_message(browser)
    quotes = reply.find_elements(By.CSS_SELECTOR, ".grag-quote")
    links = reply.find_elements(By.CSS_SELECTOR, ".grag-source a")
    assert quotes and links, reply.text
    for link in links:
        href = link.get_attribute("href")
        assert href in pages, href
        assert link.text == pages[href].title
        assert link.is_displayed()
    stored_lines = {line.strip() for p in pages.values() for line in p.lines}
    for quote in quotes:
        for line in quote.find_elements(By.CSS_SELECTOR, ".grag-line"):
            if line.text != "⋯":
                assert line.text.strip() in stored_lines, line.text  # the guideline's own words
    assert any("胸腺" in q.text for q in quotes)
    assert "取得日" in reply.text and "版：" in reply.text
    screenshot(browser, "desktop-answer.png")

    # The whole stored page opens under a citation, the quoted lines marked.
    page = reply.find_element(By.CSS_SELECTOR, "details.grag-page")
    assert page.get_attribute("open") is None
    text = page.find_element(By.CSS_SELECTOR, ".grag-pagetext")
    assert not text.is_displayed()
    page.find_element(By.CSS_SELECTOR, "summary").click()
    WebDriverWait(browser, 5).until(lambda d: text.is_displayed())
    cited = text.find_elements(By.CSS_SELECTOR, ".grag-cited")
    assert cited and all(c.text.strip() in stored_lines for c in cited)
    title = page.find_element(By.XPATH, "./ancestor::div[@class='grag-passage']//div[@class='grag-source']//a").text
    [shown] = [p for p in pages.values() if p.title == title]
    assert len(text.find_elements(By.CSS_SELECTOR, ".grag-pline")) == sum(1 for l in shown.lines if l.strip())
    assert no_horizontal_scroll(browser)
    browser.execute_script("arguments[0].scrollIntoView({block: 'start'});", page)
    time.sleep(0.3)
    browser.save_screenshot(str(ARTIFACTS / "desktop-whole-page.png"))
    page.find_element(By.CSS_SELECTOR, "summary").click()  # closed again for what follows

    # Out of scope: the refusal and where to ask instead, no quote, no link.
    send(browser, OUT_OF_SCOPE)
    reply = last_message(browser)
    box = reply.find_element(By.CSS_SELECTOR, ".grag-notcovered")
    assert DEFAULT_REFUSAL in box.text and DEFAULT_ESCALATION in box.text
    assert not reply.find_elements(By.CSS_SELECTOR, ".grag-quote, a")
    screenshot(browser, "desktop-refusal.png")

    # Markup typed by the user is shown literally and runs nothing.
    send(browser, MARKUP_QUESTION)
    question_bubble = answers(browser)[-2]
    assert "**太字**" in question_bubble.text and "<script>" in question_bubble.text
    assert "[押して](javascript:window.__xss=3)" in question_bubble.text
    assert not question_bubble.find_elements(By.CSS_SELECTOR, "strong, em, img, script, a")
    assert browser.execute_script("return window.__xss === undefined")

    # Phone width: the same answers wrap, nothing scrolls sideways.
    open_chat(browser, server, 390, 844)
    send(browser, IN_SCOPE)
    assert last_message(browser).find_elements(By.CSS_SELECTOR, ".grag-quote")
    assert no_horizontal_scroll(browser)
    screenshot(browser, "phone-answer.png")
    send(browser, OUT_OF_SCOPE)
    assert no_horizontal_scroll(browser)
    screenshot(browser, "phone-refusal.png")

    # Generate mode, chosen in the sidebar: the labelled summary sits above the verbatim sources.
    open_chat(browser, server, 1280, 1400)
    sidebar = browser.find_element(By.CSS_SELECTOR, '[data-testid="stSidebar"]')
    assert "原文の抜粋" in sidebar.text
    [choice] = [e for e in sidebar.find_elements(By.CSS_SELECTOR, "label") if e.text == "AIによる要約＋原文"]
    choice.click()
    calls = model.calls
    send(browser, IN_SCOPE)
    assert model.calls == calls + 1
    reply = last_message(browser)
    summary = reply.find_element(By.CSS_SELECTOR, ".grag-summary")
    assert SUMMARY_LABEL in summary.text
    assert SUMMARY.split("。")[0] in summary.text
    first_quote = reply.find_element(By.CSS_SELECTOR, ".grag-quote")
    # both positions in one script: read one by one, the chat may scroll in between
    tops = browser.execute_script("return Array.from(arguments, e => e.getBoundingClientRect().top)", summary, first_quote)
    assert tops[0] < tops[1]
    screenshot(browser, "desktop-generate.png")

    # Latency, extract mode, on a fresh page: Enter -> answer on screen, in the page's clock.
    open_chat(browser, server, 1280, 1400)
    times = [send(browser, q) for q in (IN_SCOPE, OUT_OF_SCOPE, *LATENCY_QUESTIONS)]
    p50 = statistics.median(times)
    report = (
        f"Enter -> answer on screen (extract mode, {len(times)} questions): "
        f"p50 {p50:.0f} ms, min {min(times):.0f} ms, max {max(times):.0f} ms; "
        f"each: {', '.join(f'{t:.0f}' for t in times)}"
    )
    print("\n" + report)
    (ARTIFACTS / "latency.txt").write_text(report + "\n", encoding="utf-8")


# --- the real local model, lines mode --------------------------------------------------------
LINES_QUESTION = "胸腺腫の治療法は？"
MODEL_ANSWER_TIMEOUT_S = 600  # a 270M model on a shared 2-core CPU: tens of seconds per call


@pytest.fixture(scope="module")
def model_server(prepared_store: Path, local_model, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The chat with the real local model for keywords and answers, lines mode preselected."""
    yield from streamlit_app(tmp_path_factory, {"GUIDERAG_DB": str(prepared_store), "GUIDERAG_MODE": "lines",
                                                **local_model.env()})


@pytest.mark.model
def test_a_lines_question_through_the_local_model_in_chromium(browser, model_server: str,
                                                                prepared_store: Path) -> None:
    """One question answered in lines mode by Gemma 3 270M: the patient sees the progress
    line with the seconds going by, then only stored lines of the guideline (the model's
    selection, or, when its reply could not be used, the extract answer with a note)."""
    from selenium.webdriver.common.by import By

    from guiderag.chatbot.audit import AuditLog
    from guiderag.ui.text import TEXT

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with Store(prepared_store) as store:
        stored_lines = {line.strip() for p in store.current_pages() for line in p.lines}
        before = AuditLog(store.conn).count()
    open_chat(browser, model_server, 1280, 1400)
    sidebar = browser.find_element(By.CSS_SELECTOR, '[data-testid="stSidebar"]')
    assert "AIが該当する行を選ぶ" in sidebar.text
    progress: list[str] = []
    ms = send(browser, LINES_QUESTION, timeout=MODEL_ANSWER_TIMEOUT_S, seen=progress)
    reply = last_message(browser)
    quotes = reply.find_elements(By.CSS_SELECTOR, ".grag-quote .grag-line")
    assert quotes, reply.text
    for line in quotes:
        if line.text != "⋯":
            assert line.text.strip() in stored_lines, line.text
    assert any("秒経過" in p for p in progress), progress  # the elapsed time was on screen
    with Store(prepared_store) as store:
        rows = AuditLog(store.conn).rows()[before:]
    [row] = [r for r in rows if r["question"] == LINES_QUESTION]
    use = json.loads(row["model_use"])["answer"]
    assert row["requested_mode"] == "lines" and use["outcome"] in ("answered", "fell_back")
    if use["outcome"] == "fell_back":
        assert TEXT["model_unusable"] in reply.text
    screenshot(browser, "desktop-local-model-lines.png")
    stages = list(dict.fromkeys(re.sub(r"\d+秒経過", "", p.split("\n")[0]) for p in progress))
    report = (f"lines through Gemma 3 270M in Chromium: Enter -> answer {ms / 1000:.1f} s, "
              f"model {use['outcome']} ({use.get('code', '-')}); progress shown: {stages}")
    print("\n" + report)
    (ARTIFACTS / "local-model-lines.txt").write_text(report + "\n", encoding="utf-8")
