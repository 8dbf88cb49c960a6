"""The answer stage: keywords -> retrieval -> extract | lines | generate -> audit -> Answer.

Public surface (ARCHITECTURE.md): `Chatbot(settings, retriever=None, llm=None).ask(question,
mode=None) -> Answer` (one guideline); `Library(settings).ask(question, mode=None,
guideline="auto") -> Answer` (routes to one guideline of the store, then asks its Chatbot);
`LLMClient(settings).complete(system, user, **params) -> str`; `AuditLog(conn)` with
`export_xlsx(path)` and `gaps()`.
"""
from __future__ import annotations

from guiderag.settings import MODES

from .answer import GOVERNED, NOT_GOVERNED, Answer, ShownPassage
from .audit import AuditLog, Gap
from .bot import Chatbot
from .library import Library
from .llm import LLMClient
from .question import CleanQuestion, clean_question

__all__ = [
    "GOVERNED",
    "NOT_GOVERNED",
    "MODES",
    "Answer",
    "AuditLog",
    "Chatbot",
    "CleanQuestion",
    "Gap",
    "LLMClient",
    "Library",
    "ShownPassage",
    "clean_question",
]
