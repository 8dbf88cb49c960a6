"""The answer stage: keywords -> retrieval -> evidence gate -> extract | lines | generate -> audit -> Answer.

Public surface (ARCHITECTURE.md): `BotConfig.of(settings)`, the stage's configs (chatbot.config);
`Chatbot(config, retriever=None, llm=None).ask(question,
mode=None) -> Answer` (one guideline); `Library(config).ask(question, mode=None,
guideline="auto") -> Answer` (routes to one guideline of the store, then asks its Chatbot);
`shared_library(config)`: the process's loaded Library, reloaded when Store.state()
changes (chatbot.library_cache); `EvidenceGate(config.answer, retriever).judge(question, result)
-> Verdict` (chatbot.gate); the answer modes behind `AnswerMode` (chatbot.modes);
`LLMClient(config.model).complete(system, user, **params) -> str`; `AuditLog(conn)` with
`export_xlsx(path)` and `gaps()`.
"""
from __future__ import annotations

from guiderag.scopes import MODES

from .answer import GOVERNED, NOT_GOVERNED, Answer, ShownPassage
from .audit import AuditLog, Gap
from .bot import Chatbot
from .config import BotConfig
from .gate import EvidenceGate, Measures, Verdict
from .library import Library
from .library_cache import shared_library
from .llm import LLMClient
from .modes import AnswerMode
from .question import CleanQuestion, clean_question

__all__ = [
    "GOVERNED",
    "NOT_GOVERNED",
    "MODES",
    "Answer",
    "AnswerMode",
    "AuditLog",
    "BotConfig",
    "Chatbot",
    "CleanQuestion",
    "EvidenceGate",
    "Gap",
    "LLMClient",
    "Library",
    "Measures",
    "ShownPassage",
    "Verdict",
    "clean_question",
    "shared_library",
]
