"""The chat app over a store of several guidelines (streamlit.testing.v1.AppTest): the
sidebar lists them and lets the patient restrict the answer to one, each answer says which
guideline answered, and the sidebar warns when the last `guiderag check` found divergence
or the corpus is older than the configured maximum age. Real loopback sites, store, index."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from guiderag.cli import main
from guiderag.settings import Settings
from guiderag.chatbot import library_cache
from guiderag.ui.text import TEXT
from library_sites import gastric_site, thymus_site
from test_app import ask, start_app  # tests/ is on sys.path (conftest.py)

GASTRIC_Q = "胃を切除した後の食事はどうすればよいですか？"


@pytest.fixture
def two_store(fast_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in ("GUIDERAG_MODEL", "GUIDERAG_ANSWER_MODEL", "GUIDERAG_KEYWORDS_MODEL", "OPENAI_API_KEY",
                "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    with thymus_site().serve() as t_base, gastric_site().serve() as g_base:
        assert main(["scrape", t_base + "/thymus/index.html", "--guideline", "thymus"]) == 0
        assert main(["scrape", g_base + "/gastric/index.html", "--guideline", "gastric"]) == 0
    return fast_env


def _answers(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if re.match(r'<div class="grag-block grag-answer', m.value)]


def test_the_sidebar_offers_each_guideline_and_the_answer_names_its_own(two_store: Path) -> None:
    at = start_app()
    choose = at.sidebar.selectbox(key="guideline")
    assert choose.options == [TEXT["choose_auto"], "胃がんガイドブック（デモ）", "胸腺腫瘍ガイドブック（デモ）"]
    assert choose.value == "auto"
    sidebar = " ".join(m.value for m in at.sidebar.markdown)
    assert "胃がんガイドブック（デモ）" in sidebar and "胸腺腫瘍ガイドブック（デモ）" in sidebar
    at = ask(at, GASTRIC_Q)
    [answer] = _answers(at)
    assert "grag-governed" in answer and "回答したガイドライン：胃がんガイドブック（デモ）" in answer
    turn = at.session_state["history"][-1]
    assert turn.answer.guideline["id"] == "gastric"
    assert turn.pages and all("/gastric/" in url for url, _ in turn.pages)  # "read the whole page" has its lines
    # restricted to the thymus guide, the gastric question is not covered
    at.sidebar.selectbox(key="guideline").set_value("thymus").run()
    at = ask(at, GASTRIC_Q)
    assert "grag-notcovered" in _answers(at)[-1]
    assert at.session_state["history"][-1].answer.guideline["id"] == "thymus"


def test_the_sidebar_warns_after_a_diverged_check_and_on_an_old_corpus(two_store: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    at = start_app()
    assert not at.sidebar.warning
    settings = Settings.load(env={}, db=two_store)
    gastric = settings.guideline_scope("gastric")
    from guiderag.store import Store

    with Store(two_store) as store:
        run = store.last_run(guideline="gastric")
    gastric.check_status_path.parent.mkdir(parents=True, exist_ok=True)
    gastric.check_status_path.write_text(json.dumps({
        "guideline": "gastric", "status": "diverged", "checked_at": "2026-12-01T00:00:00Z",
        "last_run_id": run["id"], "changed": [{"url": "x"}]}), encoding="utf-8")
    at = start_app()
    [warning] = at.sidebar.warning
    assert "胃がんガイドブック（デモ）" in warning.value and "食い違って" in warning.value
    gastric.check_status_path.unlink()
    monkeypatch.setenv("GUIDERAG_MAX_AGE_HOURS", "0.00001")
    at = start_app()
    assert len(at.sidebar.warning) == 2 and all("時間以上" in w.value for w in at.sidebar.warning)


def test_one_guideline_keeps_the_sidebar_as_it_was(fast_env: Path) -> None:
    with thymus_site().serve() as base:
        assert main(["scrape", base + "/thymus/index.html"]) == 0
    library_cache.clear()
    at = start_app()
    assert not at.sidebar.selectbox and at.sidebar.subheader[0].value == TEXT["sidebar_guideline"]
    at = ask(at, "胸腺腫の治療にはどのような方法がありますか？")
    assert "回答したガイドライン" not in _answers(at)[-1]
