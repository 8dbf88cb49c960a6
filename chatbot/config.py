"""What the answer stage is handed (#19): its own config and those of the stages it drives.

`Chatbot` and `Library` load retrievers (RetrievalConfig), open the store (StoreConfig),
answer (AnswerConfig) and call a model (ModelConfig); the parts below them receive only
the one they read: `EvidenceGate(config.answer, ...)`, `LLMClient(config.model)`. The CLI,
API, chat and eval build one from their Settings with `BotConfig.of(settings)`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from guiderag.progress import QUIET, ProgressReporter
from guiderag.scopes import AnswerConfig, ModelConfig, RetrievalConfig, StoreConfig


class StageConfigs(Protocol):
    """Anything holding the stage configs the answer stage needs (guiderag.settings.Settings)."""

    @property
    def answer(self) -> AnswerConfig: ...
    @property
    def model(self) -> ModelConfig: ...
    @property
    def retrieval(self) -> RetrievalConfig: ...
    @property
    def storage(self) -> StoreConfig: ...
    @property
    def progress_reporter(self) -> ProgressReporter: ...


@dataclass(frozen=True)
class BotConfig:
    """The answer stage's configs; `progress` reports an index rebuilt on load."""

    answer: AnswerConfig
    model: ModelConfig
    retrieval: RetrievalConfig
    store: StoreConfig
    progress: ProgressReporter = QUIET

    @classmethod
    def of(cls, settings: StageConfigs) -> BotConfig:
        """The answer stage's part of `settings`."""
        return cls(settings.answer, settings.model, settings.retrieval, settings.storage, settings.progress_reporter)
