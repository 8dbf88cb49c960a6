"""Our own conversation sets (eval/conversations): the format of the shared
conversation-gastric set, and every gold answer string verbatim on its gold page."""
from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest

from guiderag.eval import demo_sites
from guiderag.eval.conversation import IN_CATEGORIES, OUT_CATEGORIES, load_turns
from guiderag.resources import conversation_set
from guiderag.store import Store

SETS = ("sample-lung.jsonl", "demo-breast.jsonl", "demo-colorectal.jsonl")


def squash(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


def pages_of(name: str, sample_db: Path) -> dict[str, str]:
    """Site path -> the page's words, of the site a set is written on."""
    if name.startswith("demo-"):
        guide = demo_sites.load_guide(name.removeprefix("demo-").removesuffix(".jsonl"))
        return {p.path(guide.root): p.text() for p in guide.pages}
    with Store(sample_db, create=False) as store:
        return {p.url.split(".invalid/", 1)[1]: "\n".join([p.title, *p.lines]) for p in store.current_pages()}


@pytest.mark.parametrize("name", SETS)
def test_a_set_is_well_formed_and_its_gold_strings_are_on_their_pages(name: str, scraped_sample: Path) -> None:
    path = conversation_set(name)
    conversations = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(conversations) >= 20 and len({c["id"] for c in conversations}) == len(conversations)
    pages = pages_of(name, scraped_sample)
    for c in conversations:
        turns = c["turns"]
        assert [t["turn"] for t in turns] == list(range(1, len(turns) + 1)) and 2 <= len(turns) <= 4
        assert turns[0]["category"] == "opening"
        for t in turns:
            assert t["id"] == f"{c['id']}-{t['turn']}" and t["category"] in (*IN_CATEGORIES, *OUT_CATEGORIES)
            if t["category"] in OUT_CATEGORIES:
                assert t["kind"] == "out_of_scope" and t["gold_page"] is None and t["answers"] == []
                continue
            assert t["kind"] == "in_scope" and t["gold_page"] in pages, t["id"]
            assert t["answers"] and all(8 <= len(a) <= 60 for a in t["answers"]), t["id"]
            for answer in t["answers"]:
                assert squash(answer) in squash(pages[t["gold_page"]]), (t["id"], answer)
            if t["category"] == "follow_up":
                assert t["needs"], t["id"]
    categories = {t.category for t in load_turns(path)}
    assert categories == {*IN_CATEGORIES, *OUT_CATEGORIES}
