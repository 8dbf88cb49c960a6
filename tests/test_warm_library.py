"""A library loaded for serving (chatbot.library_cache.load_library: the API's preload and
readiness, the chat, eval) has read the query's tables already (Retriever.warm): its first
question reads none (it took 0.35 s on the sample), and workers forked after the preload
share them. Real components: the scraped sample, SQLite, MeCab, the bundled tables."""
from __future__ import annotations

from pathlib import Path

import pytest

from guiderag.chatbot.config import BotConfig
from guiderag.chatbot.library_cache import load_library
from guiderag.retrieval import expansion, specificity
from guiderag.settings import Settings


def _forbidden(what: str):
    def read(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"the first question read {what}: the library was not warmed")
    return read


def test_the_first_question_of_a_loaded_library_reads_no_table(sample_db: Path, monkeypatch: pytest.MonkeyPatch):
    # as a fresh process: nothing read yet (monkeypatch restores the caches afterwards)
    monkeypatch.setattr(specificity, "_TABLE", None)
    monkeypatch.setattr(expansion, "_SUDACHI", {})
    monkeypatch.setattr(expansion, "_PATIENT", {})
    config = BotConfig.of(Settings.load(db=str(sample_db)))
    library = load_library(config)
    try:
        monkeypatch.setattr(specificity, "load_table", _forbidden("wordfreq's table"))
        monkeypatch.setattr(expansion.SudachiSynonyms, "parse", _forbidden("Sudachi's synonyms"))
        monkeypatch.setattr(expansion.SudachiSynonyms, "phrase_rows", _forbidden("Sudachi's phrases"))
        monkeypatch.setattr(expansion, "read_patient_table", _forbidden("the patient table"))
        # an everyday word the sample never uses (お金) is weighed by wordfreq's table
        answer = library.ask("抗がん剤で髪が抜けたら、かつらのお金はどうすればいいですか", None)
        assert answer.answer
    finally:
        library.close()
