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
from guiderag.scopes import MODEL_MODES, AnswerConfig, ModelConfig, RetrievalConfig, StoreConfig


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

    def waits_on_model(self, mode: str | None) -> bool:
        """Whether an ask in `mode` (None: the configured one) may wait on a model: a model
        mode, or a keywords model (asked for every question's keywords, the guideline's
        choice and a follow-up's reading). Any other ask is computation only."""
        from .llm import LLMClient

        return (mode or self.answer.mode) in MODEL_MODES or LLMClient(self.model).configured("keywords")
