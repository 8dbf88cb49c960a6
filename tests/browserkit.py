"""What the browser tests share: Debian's Chromium, the Streamlit chat on loopback, and typing a
question into it as a person does (Enter to answer on screen, timed inside the page).

Used by tests/test_browser.py, tests/test_replicas.py and tests/bench_chat_concurrency.py.
"""
from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from guiderag.processes import answers_200, clean_env, free_port, stop_process, wait_until_serving

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
START_TIMEOUT_S = 90
ANSWER_TIMEOUT_S = 60
TIMER_JS = """
if (!window.__grag) {
  window.__grag = {t0: null, t1: null, target: 0, question: ''};
  var answered = function (g) {
    var msgs = document.querySelectorAll('[data-testid="stChatMessage"]');
    var n = msgs.length;
    return n >= g.target && n >= 2 && msgs[n - 2].innerText.indexOf(g.question) >= 0 &&
      msgs[n - 1].querySelector('.grag-answer, [data-testid="stAlert"]') !== null;
  };
  document.addEventListener('keydown', function (e) {
    if (e.key === 'Enter' && !e.shiftKey) { window.__grag.t0 = performance.now(); window.__grag.t1 = null; }
  }, true);
  new MutationObserver(function () {
    var g = window.__grag;
    if (g.t0 !== null && g.t1 === null && answered(g)) { g.t1 = performance.now(); }
  }).observe(document.body, {childList: true, subtree: true, characterData: true});
}
window.__grag.target = arguments[0];
window.__grag.question = arguments[1];
window.__grag.t0 = null; window.__grag.t1 = null;
"""
IDLE = '[data-test-script-state="notRunning"]'


def need_browser() -> None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.fail("selenium is not installed: run the README's test command (scripts/test.sh), "
                    "which installs the project with its test extras")
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} not found: the browser test needs Debian's chromium and "
            "chromium-driver. Run the README's test command (scripts/test.sh), which installs them."
        )


def streamlit_app(
    tmp_path_factory: pytest.TempPathFactory, settings_env: dict[str, str], app_dir: Path | None = None
) -> Iterator[str]:
    """Run `streamlit run app.py` (of this checkout, or of `app_dir`) with these
    GUIDERAG_/OPENAI_ settings; yield its URL."""
    port = free_port()
    env = clean_env(**settings_env)
    log = tmp_path_factory.mktemp("streamlit") / "streamlit.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
             "--server.address", "127.0.0.1", "--server.port", str(port),
             "--browser.gatherUsageStats", "false"],
            cwd=app_dir or Path(__file__).resolve().parents[1], env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        if not wait_until_serving(proc, lambda: answers_200(url + "_stcore/health"), START_TIMEOUT_S):
            pytest.fail(f"streamlit did not start: {log.read_text(errors='replace')[-2000:]}")
        yield url
    finally:
        stop_process(proc)


def chromium(profile: Path | str) -> Any:
    """Debian's headless Chromium through chromedriver, with its profile in `profile`."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--lang=ja-JP", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@contextlib.contextmanager
def browser_session(prefix: str = "guiderag-chromium-") -> Iterator[Any]:
    """Chromium (need_browser checked) with a fresh profile of its own, quit and removed after."""
    need_browser()
    profile = tempfile.mkdtemp(prefix=prefix)
    driver = chromium(profile)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def open_chat(driver, url: str, width: int, height: int) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.set_window_size(width, height)
    driver.get(url)
    WebDriverWait(driver, START_TIMEOUT_S, poll_frequency=0.1).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stChatInput"] textarea')
    )


def answers(driver) -> list:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, '[data-testid="stChatMessage"]')


def send(driver, question: str, timeout: float = ANSWER_TIMEOUT_S, seen: list[str] | None = None) -> float:
    """Type a question, press Enter, wait for its answer; return Enter -> answer in ms.
    `seen` collects the texts of the progress line shown meanwhile."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    def idle(d) -> bool:  # the app's script is not running (no rerun in flight)
        return bool(d.find_elements(By.CSS_SELECTOR, IDLE))

    def answered(d) -> bool:
        if seen is not None:
            try:
                seen.extend(e.text for e in d.find_elements(By.CSS_SELECTOR, ".grag-progress"))
            except StaleElementReferenceException:
                pass
        return bool(d.execute_script("return window.__grag.t1 !== null"))

    WebDriverWait(driver, timeout, poll_frequency=0.05).until(idle)
    driver.execute_script(TIMER_JS, len(answers(driver)) + 2, question)
    box = driver.find_element(By.CSS_SELECTOR, '[data-testid="stChatInput"] textarea')
    box.send_keys(question)
    box.send_keys(Keys.ENTER)
    WebDriverWait(driver, timeout, poll_frequency=0.05 if seen is None else 0.3).until(answered)
    WebDriverWait(driver, timeout, poll_frequency=0.05).until(idle)
    return float(driver.execute_script("return window.__grag.t1 - window.__grag.t0"))


def last_message(driver):
    return answers(driver)[-1]


@contextlib.contextmanager
def guiderag_chat(db: Path | str, log: Path, **settings_env: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run the real command, `guiderag chat --db DB` (which replaces itself with Streamlit),
    on a free loopback port; yield its URL and the process."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "guiderag", "chat", "--db", str(db), "--host", "127.0.0.1", "--port", str(port)],
            cwd=Path(__file__).resolve().parents[1], env=clean_env(**settings_env), stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        if not wait_until_serving(proc, lambda: answers_200(url + "_stcore/health"), START_TIMEOUT_S):
            pytest.fail(f"guiderag chat did not start: {log.read_text(errors='replace')[-2000:]}")
        yield url, proc
    finally:
        stop_process(proc)
