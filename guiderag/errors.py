"""The exception hierarchy of guiderag, written down in one place.

GuideragError
├── InputError        bad usage or bad input: the CLI exits 2 with the message
│   ├── InvalidURLError
│   ├── WorkbookError
│   ├── QuestionError
│   └── EmptyCorpusError  nothing scraped yet: no page to index or search
├── ScrapeError       the site could not be scraped; the stored corpus is unchanged
│   └── PdfRefusedError   one PDF document is not read (encrypted, a scan, damaged, a
│                         bomb, too many pages, JavaScript...): its page fails with the
│                         reason, its previous version stays current, the run goes on
├── StoreError        the page store (SQLite or PostgreSQL) cannot be opened or used
│   ├── StoreMissingError (also an InputError: exit 2) no store at --db (or an empty file)
│   ├── StoreBusyError    another scrape is writing to the store; nothing was changed
│   ├── StoreAccessError  (also a sqlite3.DatabaseError) a call on the store failed: the file
│   │   │                 is damaged, the disk full, the file read-only or locked too long, or
│   │   │                 the PostgreSQL server cannot be reached
│   │   └── StoreTimeoutError a bounded wait on PostgreSQL ran out (connecting, a statement,
│   │                     a free connection of the pool): the server is hung or overloaded
│   └── StoreVersionError the store's schema is newer than this guiderag (or, read-only, older)
├── IndexCorruptError the retrieval index is missing, stale or corrupt (rebuilt on demand)
├── IndexWriteError   the retrieval index could not be written; the previous one stays
├── EvalError         an evaluation or benchmark run could not go on (a worker process
│                     died, a benchmark's replica did not start)
└── ModelError        the language model is unreachable or failing
    ├── ModelNotConfiguredError (also an InputError: exit 2)
    ├── ModelBusyError    no free model slot within model_queue_timeout_s
    └── ModelReplyError   the model answered, but its reply cannot be shown (degenerate,
                          echoed, no valid line number): the chatbot answers with extract

Every message says what went wrong and what a maintainer can do about it.
"""
from __future__ import annotations

import sqlite3


class GuideragError(Exception):
    """Base class of every error guiderag raises on purpose."""

    exit_code = 1


class InputError(GuideragError):
    """Bad usage or bad input. Nothing was changed. CLI exit code 2."""

    exit_code = 2


class InvalidURLError(InputError):
    """A URL that cannot be fetched (wrong scheme, unreachable, not HTML)."""


class WorkbookError(InputError):
    """An .xlsx file that is not a workbook or lacks required columns."""


class QuestionError(InputError):
    """A question that cannot be answered as given (empty, control characters only...)."""


class ScrapeError(GuideragError):
    """The scrape failed; the previous good corpus is untouched."""


class PdfRefusedError(ScrapeError):
    """A PDF document that is not read; `code` names why (encrypted, scanned, damaged,
    truncated, bomb, too_many_pages, too_large, active, not_pdf, crashed, timeout)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class StoreError(GuideragError):
    """The page store cannot be opened or used."""


class StoreMissingError(StoreError, InputError):
    """--db / GUIDERAG_DB names no store: bad input, exit 2."""

    exit_code = 2


class StoreBusyError(StoreError):
    """Another scrape holds the store's scrape lock; this one changed nothing."""


class StoreAccessError(StoreError, sqlite3.DatabaseError):
    """A call on the store failed for a reason of the store, not of our code: the SQLite
    file (store/sqlite.py) or the PostgreSQL server (store/pg.py) makes every one of these.

    Also a sqlite3.DatabaseError, so code that rolls back or records a failed write on
    sqlite3.DatabaseError still does."""

    def __init__(self, message: str, *, path: str = "", reason: str = "", advice: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason  # the database's own message
        self.advice = advice  # what a maintainer can do


class StoreTimeoutError(StoreAccessError):
    """A wait on a PostgreSQL store ran out: `wait` names which one ("connect": no connection
    within pg_connect_timeout_s; "statement": no answer to a statement within
    pg_statement_timeout_s; "pool": no free connection of this process's pool within
    pg_pool_timeout_s), `seconds` its bound. The server is hung, overloaded or unreachable;
    a transaction it interrupted was not committed. What an API answers with 503."""

    def __init__(self, message: str, *, path: str = "", reason: str = "", advice: str = "",
                 wait: str = "", seconds: float = 0.0) -> None:
        super().__init__(message, path=path, reason=reason, advice=advice)
        self.wait = wait
        self.seconds = seconds


class StoreVersionError(StoreError):
    """The store was written by a newer guiderag (its schema is unknown here), or a
    read-only open met a schema older than this guiderag's; nothing was changed."""


class IndexCorruptError(GuideragError):
    """The retrieval index is missing, stale or corrupt; rebuild it with `guiderag index`."""


class IndexWriteError(GuideragError):
    """The retrieval index could not be written (disk full, permissions); the previous
    index, if any, is still the current one."""


class EmptyCorpusError(InputError):
    """The page store holds no content page: there is nothing to index or search."""


class ModelError(GuideragError):
    """The configured language model failed (unreachable, HTTP error, timeout, bad reply)."""


class ModelNotConfiguredError(ModelError, InputError):
    """A mode that needs a language model was asked for, but none is configured."""

    exit_code = 2


class ModelBusyError(ModelError):
    """Every model slot of this process stayed busy for model_queue_timeout_s."""


class ModelReplyError(ModelError):
    """The model answered, but the reply is unusable: repeated, echoing the prompt or the
    reference, far over the length asked, in another language, cut off, or (lines) naming
    no valid line. `code` names the check; the message says what was seen."""

    def __init__(self, message: str, code: str = "unusable") -> None:
        super().__init__(message)
        self.code = code


class EvalError(GuideragError):
    """An evaluation or benchmark run could not go on (a worker process died, a replica did not
    start); an evaluation keeps its partial results."""
