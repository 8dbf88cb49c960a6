"""What an API client may be told of an error: no credential, no path of this machine.

Our errors are written for the maintainer at the console: they name the store's file, its
index folder, the socket of a local PostgreSQL server, and what to run there. A client
of the API (a patient portal, an EHR, an unauthenticated load balancer probing /readyz)
is told the same thing without them: credentials are masked (guiderag.redact), the
store's paths and URL become "the store", any other absolute path "<path>". The whole message
goes to the server's log instead (`public_message(..., log=...)`).
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

from guiderag.redact import redact
from guiderag.resources import user_data_dir
from guiderag.settings import Settings

# An absolute path of this machine in running text: "/" after a space, quote, bracket or
# "=", and at least two segments (a URL's path follows its host, so it never matches).
_ABSOLUTE_PATH = re.compile(r"(?:(?<=[\s\"'`(=\[])|^)/(?:[^\s/\"'`()\[\]]+/)+[^\s/\"'`()\[\]]*")
# "the page store /x/y.db", "the store /x/y.db": the phrase and the path become "the store".
_STORE_WORDS = r"(?:the (?:page |SQLite |PostgreSQL )?store (?:file )?(?:at |in )?)?"


def _store_names(settings: Settings) -> list[str]:
    """How messages name where this store lives (its paths on this machine, its URL as given
    and as shown), longest first."""
    paths = {settings.storage.db, settings.storage.db.with_name(settings.storage.db.name + ".index"), settings.storage.db.parent, user_data_dir()}
    if settings.storage.index_root is not None:
        paths.add(settings.storage.index_root)
    names = {str(p) for p in paths} | ({settings.storage.store_url, settings.store_name} if settings.storage.store_url else set())
    return sorted((n for n in names if n and n not in ("/", ".")), key=len, reverse=True)


def public_message(message: str, settings: Settings, *, log: logging.Logger | None = None,
                   what: str = "") -> str:
    """`message` as a client may read it; the original goes to `log` (at WARNING) when the
    two differ, prefixed by `what` (the route, the status)."""
    text = message
    for path in _store_names(settings):
        text = re.sub(_STORE_WORDS + re.escape(path) + r"(?:/[^\s\"'`):;,]*)?(?![\w.-])", "the store", text)
    text = _ABSOLUTE_PATH.sub("<path>", redact(text))
    text = text.replace(str(Path.home()), "<path>")
    if log is not None and text != message:
        log.warning("%s%s", f"{what}: " if what else "", redact(message))
    return text
