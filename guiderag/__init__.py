"""guiderag: answers questions from a clinical guideline, in the guideline's own words."""
from .errors import (
    GuideragError,
    IndexCorruptError,
    InputError,
    InvalidURLError,
    ModelError,
    ModelNotConfiguredError,
    QuestionError,
    ScrapeError,
    StoreError,
    StoreMissingError,
    WorkbookError,
)
from .settings import Settings

__all__ = [
    "GuideragError",
    "IndexCorruptError",
    "InputError",
    "InvalidURLError",
    "ModelError",
    "ModelNotConfiguredError",
    "QuestionError",
    "ScrapeError",
    "Settings",
    "StoreError",
    "StoreMissingError",
    "WorkbookError",
]
__version__ = "0.1.0"
