"""Credentials out of every URL and message before it is logged, stored or shown.

The one rule for secrets in text. A URL may carry them in three places, and a message may
quote a URL, or a libpq connection string, anywhere:

- the userinfo: `http://user:SECRET@host/v1`, `postgresql://u:SECRET@db/x` (also when the
  password holds an unencoded "/", "?" or "#", which makes the URL unreadable but must
  not make the password readable);
- query (and fragment) parameters that name a secret, in any case and any percent-encoding
  of their name: libpq's `password` and `sslpassword`, the API keys and tokens of model
  servers (`key`, `api-key`, `api_key`, `apikey`, `token`, `access_token`, ...), and any
  parameter whose name ends in `_key`, `_token`, `_secret`, `password` or `_signature`;
- `password=...` / `sslpassword=...` of a libpq key/value connection string.
Each secret becomes `***`; the rest stays readable (`postgresql://***@db:5432/x?sslmode=require`).
`passfile` names a file: its name is kept, and nothing of guiderag ever reads its contents.

Wherever a URL, or a message that may hold one, is printed on stderr, written to a log,
the audit log or the store, put in an API body or shown in the app, it goes through
`redact` (or `redact_url` for a lone URL) first. `RedactingStream` and `RedactingFormatter`
apply it to a whole stream and to log records.
"""
from __future__ import annotations

import logging
import re
from typing import Any, TextIO
from urllib.parse import unquote_plus

MASK = "***"

# Parameter names (lower case, "-" read as "_") whose value is a secret ...
SECRET_NAMES = frozenset({
    "password", "passwd", "pwd", "sslpassword", "key", "apikey", "api_key", "x_api_key", "token",
    "access_token", "refresh_token", "id_token", "auth", "auth_token", "secret", "client_secret",
    "sig", "signature",
})
# ... and endings that make one (subscription_key, private_token, x_amz_signature).
SECRET_ENDINGS = ("_key", "_token", "_secret", "password", "_signature")
POSTGRES_SCHEMES = ("postgres://", "postgresql://")

# A URL in running text: a scheme, "://", then up to white space or a quote.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s<>\"'`]*")
# One parameter of a query or fragment: name "=" value (the value up to the next "&" or "#",
# so that a secret holding ";" is masked whole); then the same after a ";", the other
# separator some servers read.
_PARAM = re.compile(r"(?P<sep>[?&#])(?P<name>[^=&#;?]+)=(?P<value>[^&#]*)")
_SEMICOLON_PARAM = re.compile(r"(?P<sep>;)(?P<name>[^=&#;?]+)=(?P<value>[^&#;]*)")
# password=... in a libpq key/value connection string ("host=db password='x y' dbname=g").
_CONNINFO = re.compile(
    r"(?P<name>(?<![\w-])(?:ssl)?password\s*=\s*)(?!\*\*\*)(?P<value>'(?:[^'\\]|\\.)*'?|\"[^\"]*\"?|[^\s'\"&]+)", re.I)
# An OpenAI-style API key quoted on its own (sk-..., sk-proj-...).
_API_KEY = re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")
_IPV6_HOST = re.compile(r"\[[^\]]*\]")
_TRAILING_PUNCTUATION = re.compile(r"[.,:;!?)\]}]+$")


def is_secret_name(name: str) -> bool:
    """True for a query parameter whose value is a credential (see the module docstring)."""
    try:
        plain = unquote_plus(name)
    except (TypeError, ValueError):  # pragma: no cover - unquote_plus accepts any str
        plain = name
    plain = plain.strip().lower().replace("-", "_")
    return plain in SECRET_NAMES or plain.endswith(SECRET_ENDINGS)


def _split_userinfo(scheme: str, rest: str) -> tuple[str | None, str]:
    """(userinfo or None, what follows it) for the part of a URL after "scheme://"."""
    at = rest.rfind("@")
    if at < 0:
        return None, rest
    candidate = rest[:at]
    first = re.search(r"[/?#]", candidate)
    if first is None:
        return candidate, rest[at + 1:]  # the standard case; the password may hold ":" or "@"
    # A "/", "?" or "#" before the last "@": either the "@" lies in the path or query
    # (http://host/a@b), or the password holds an unencoded delimiter (u:pa/ss@host).
    authority = _IPV6_HOST.sub("", candidate[:first.start()])
    port_or_password = authority.partition(":")[2] if ":" in authority else None
    looks_like_password = port_or_password is not None and not re.fullmatch(r"[0-9]*(?:,.*)?", port_or_password)
    postgres_credentials = scheme.lower() in POSTGRES_SCHEMES and port_or_password is not None
    if looks_like_password or postgres_credentials:
        return candidate, rest[at + 1:]
    return None, rest


def _mask_params(text: str) -> str:
    """`text` (a query and/or fragment) with the values of secret parameters masked."""
    def one(m: re.Match[str]) -> str:
        if not is_secret_name(m.group("name")):
            return m.group(0)
        return f"{m.group('sep')}{m.group('name')}={MASK}"

    return _SEMICOLON_PARAM.sub(one, _PARAM.sub(one, text))


def _redact_one_url(url: str) -> str:
    scheme, _, rest = url.partition("://")
    userinfo, after = _split_userinfo(scheme + "://", rest)
    cut = re.search(r"[?#]", after)
    if cut is not None:
        after = after[:cut.start()] + _mask_params(after[cut.start():])
    return f"{scheme}://{MASK + '@' if userinfo is not None else ''}{after}"


def _may_hold_secret(text: str) -> bool:
    """Whether a URL in `text` could carry a credential: only a userinfo ("@"), a query ("?")
    or a fragment ("#") can hold one."""
    return "@" in text or "?" in text or "#" in text


def _redact_match(m: re.Match[str]) -> str:
    """A URL found in running text, redacted; the sentence's punctuation after it (a ":",
    ")", ".") is kept outside the mask (at worst it tells that a secret ended in one)."""
    url = m.group(0)
    if not _may_hold_secret(url):
        return url  # no userinfo, query or fragment: nothing to mask (the common case, a page URL)
    trail = _TRAILING_PUNCTUATION.search(url)
    end = trail.start() if trail else len(url)
    return _redact_one_url(url[:end]) + url[end:]


def _redact_urls(text: str) -> str:
    """`text` with the credentials of its URLs masked. A text in which no URL could hold one
    (_may_hold_secret: an answer's audit JSON, Japanese with ？, mostly) is not scanned."""
    if "://" not in text or not _may_hold_secret(text):
        return text
    return _URL.sub(_redact_match, text)


def redact(text: str) -> str:
    """`text` with every credential of every URL (and connection string) in it replaced by ***."""
    if not text:
        return text
    text = _redact_urls(text)
    if "assword" in text.lower():
        text = _CONNINFO.sub(lambda m: m.group("name") + MASK, text)
    if "sk-" in text:
        text = _API_KEY.sub("sk-" + MASK, text)
    return text


def redact_url(url: str | None) -> str:
    """One URL without its credentials (http://***@host/v1?key=***); '' for None. A whole
    string is taken as the URL, white space included (a password may hold a space)."""
    if not url:
        return ""
    url = str(url)
    if "://" not in url:
        return redact(url)
    return redact(_redact_one_url(url))


class RedactingStream:
    """A text stream (stderr) whose every write is redacted first."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class RedactingFormatter(logging.Formatter):
    """A log formatter whose output (message, arguments and traceback) is redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def redact_logging(logger: logging.Logger | None = None) -> None:
    """Make every handler of `logger` (default: the root logger), and Python's last-resort
    handler, format through RedactingFormatter."""
    target = logger or logging.getLogger()
    handlers = list(target.handlers)
    if logging.lastResort is not None:
        handlers.append(logging.lastResort)
    for handler in handlers:
        if not isinstance(handler.formatter, RedactingFormatter):
            base = handler.formatter or logging.Formatter()
            formatter = RedactingFormatter(base._fmt, base.datefmt)
            handler.setFormatter(formatter)
