"""Credentials out of every URL before it is logged, stored or shown.

A URL may carry `user:password@` (OPENAI_BASE_URL=http://user:SECRET@host/v1, a TOC URL
behind basic auth). Wherever a URL, or a message that may hold one, is printed on stderr,
written to the audit log or the store, or shown in the app, it goes through `redact` (or
`redact_url` for a lone URL) first: the userinfo becomes `***`, the rest stays readable.
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***"

# scheme://userinfo@ in any text: userinfo is everything up to the last "@" before the
# host part ends (a password may itself contain ":" or an unescaped "@").
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^\s/?#<>\"']*)@")


def redact(text: str) -> str:
    """`text` with the userinfo of every URL in it replaced by ***."""
    if "@" not in text:
        return text
    return _USERINFO.sub(lambda m: m.group("scheme") + MASK + "@", text)


def redact_url(url: str | None) -> str:
    """One URL without its credentials (http://***@host/v1); '' for None."""
    if not url:
        return ""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    if "@" not in parts.netloc:
        return redact(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, f"{MASK}@{host}", parts.path, parts.query, parts.fragment))
