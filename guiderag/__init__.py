"""guiderag: answers questions from a clinical guideline, in the guideline's own words."""
from .errors import (
    GuiderageError,
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
    "GuiderageError",
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
