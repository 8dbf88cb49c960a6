"""A conversation through the real API: `guiderag serve` (uvicorn) on loopback over a copy of the
sample store, asked with real HTTP. POST /v1/ask takes the conversation's earlier questions as
`history` (stateless: each request carries them); a follow-up is read with them and says so in
`context`; a history beyond its bounds is refused with 422 before the chatbot sees it."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import requests

from apikit import serve
from guiderag.settings import DEFAULT_REFUSAL, Settings
from storekit import copy_store

BRONCHOSCOPY = "気管支鏡の検査ってどんなことをするんですか？"
HOW_LONG = "時間はどのくらいかかるの？"
EAT_AFTER = "終わったらすぐごはん食べられますか"


@pytest.fixture(scope="module")
def api(scraped_sample: Path, tmp_path_factory) -> tuple[str, Path]:
    db = copy_store(scraped_sample, tmp_path_factory.mktemp("api-conversation") / "guide.db")
    log = tmp_path_factory.mktemp("api-conversation-log") / "serve.log"
    with serve(db, log) as url:
        yield url, db


def post(url: str, body: dict) -> requests.Response:
    return requests.post(url + "/v1/ask", json=body, timeout=60)


def audit_rows(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id, question, conversation FROM audit ORDER BY id").fetchall()


def page(answer: dict) -> str | None:
    return answer["passages"][0]["url"].split(".invalid/", 1)[1] if answer["passages"] else None


def test_a_three_turn_conversation_is_answered_from_its_page_with_context(api) -> None:
    url, db = api
    turns = [BRONCHOSCOPY, HOW_LONG, EAT_AFTER]
    answers = []
    for i, question in enumerate(turns):
        reply = post(url, {"question": question, "history": turns[:i]})
        assert reply.status_code == 200, reply.text
        answers.append(reply.json())
    assert [page(a) for a in answers] == ["guide/ch2/q06.html"] * 3
    assert answers[0]["context"] is None
    for a in answers[1:]:
        assert a["context"]["from_turns"] == [1] and a["context"]["phrase"] == "気管支鏡の検査"
    assert "飲食ができません" in answers[2]["answer"]
    alone = post(url, {"question": EAT_AFTER}).json()  # the same words asked alone: another page
    assert page(alone) != "guide/ch2/q06.html" and alone["context"] is None
    # the audit row of the third turn records its history and what was carried
    row = {r[0]: r for r in audit_rows(db)}[answers[2]["audit_id"]]
    conversation = json.loads(row[2])
    assert conversation["history"] == turns[:2] and conversation["context"] == answers[2]["context"]


def test_a_topic_switch_is_answered_as_it_is_alone(api) -> None:
    url, _ = api
    switch = "話は変わりますが、高額療養費制度ってどういうものですか"
    got = post(url, {"question": switch, "history": [BRONCHOSCOPY, HOW_LONG]}).json()
    alone = post(url, {"question": switch}).json()
    assert got["context"] is None
    assert (got["answer"], got["passages"]) == (alone["answer"], alone["passages"])


def test_a_follow_up_the_guideline_does_not_cover_is_refused(api) -> None:
    url, _ = api
    got = post(url, {"question": "それって車の運転はしてもいいの？", "history": [BRONCHOSCOPY]}).json()
    assert got["coverage"] == "not_governed" and got["answer"] == DEFAULT_REFUSAL and got["passages"] == []
    assert got["context"]["phrase"] == "気管支鏡の検査"  # refused as a follow-up, and it says so


LIMIT = Settings.load(env={}).answer.history_max_turns


@pytest.mark.parametrize("history,why", [
    (["質問"] * (LIMIT + 1), f"at most {LIMIT}"),  # count
    (["あ" * 10_001], "at most 10000"),  # length (the API's question bound)
    (["胸腺腫とは？", 3], "history"),  # type of an item
    ("胸腺腫とは？", "history"),  # not a list
    ([{"question": "胸腺腫とは？"}], "history"),
    (["胸腺腫とは？", "   "], "empty"),
])
def test_history_beyond_its_bounds_is_422_and_writes_no_audit_row(api, history, why) -> None:
    url, db = api
    before = audit_rows(db)
    reply = post(url, {"question": HOW_LONG, "history": history})
    assert reply.status_code == 422, reply.text
    error = reply.json()["error"]
    assert error["code"] == "invalid_request" and why in error["message"] and "Traceback" not in reply.text
    assert audit_rows(db) == before


def test_history_within_its_bounds_is_accepted(api) -> None:
    url, _ = api
    for history in ([], None, ["質問"] * LIMIT):
        reply = post(url, {"question": HOW_LONG, "history": history})
        assert reply.status_code == 200, (history, reply.text)
