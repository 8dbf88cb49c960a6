"""Where guiderag finds its bundled data and keeps its store, wherever it is installed.

Bundled data (the sample guideline site, the synonym table, the question sets) is package
data of `guiderag.data` and `guiderag.eval.questions`, read through `importlib.resources`,
so a wheel installed anywhere finds the same files a source checkout does. The default
store is a per-user file (XDG base directories), not a path relative to the code or to
the current folder, so `guiderag ask` from any folder uses the store `guiderag scrape`
filled.
"""
from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

from .errors import InputError

# Inside guiderag.data: the bundled sample guideline and its table of contents.
SAMPLE_SITE = "sample_site"
SAMPLE_TOC_PATH = "guide/index.html"
SYNONYMS_FILE = "synonyms.tsv"
# `scrape --sample` (and the chat's first start) serve the bundled site on a random
# loopback port; its pages are stored under this stable site URL instead, so that every
# re-scrape compares like with like (.invalid: a reserved name, plainly not a real site).
# A constant, not a setting: another value would store the sample as other pages.
SAMPLE_SITE_URL = "http://sample-guide.guiderag.invalid"
STORE_NAME = "guiderag.db"


def _package_dir(package: str) -> Path:
    root = resources.files(package)
    if not isinstance(root, Path):  # pragma: no cover - a zip import, which pip never makes
        raise InputError(f"the package {package} is not installed as files on disk ({root!r}); "
                         "install guiderag with pip, not as a zip")
    return root


def data_path(*parts: str) -> Path:
    """A path inside the bundled data (guiderag.data), whether or not it exists."""
    return _package_dir("guiderag.data").joinpath(*parts)


def sample_site_dir() -> Path:
    """The folder of the bundled sample guideline site."""
    return data_path(SAMPLE_SITE)


def question_set(name: str) -> Path:
    """A bundled question workbook (protocol.xlsx, sample_patient.xlsx)."""
    return _package_dir("guiderag.eval.questions") / name


def conversation_set(name: str) -> Path:
    """A bundled conversation set (eval/conversations: sample-lung.jsonl, demo-*.jsonl)."""
    return _package_dir("guiderag.eval.conversations") / name


def user_data_dir() -> Path:
    """$XDG_DATA_HOME/guiderag, else ~/.local/share/guiderag: where the default store lives."""
    base = os.environ.get("XDG_DATA_HOME") or ""
    return (Path(base) if base else Path.home() / ".local" / "share") / "guiderag"


def default_db() -> Path:
    """The default store: <user data dir>/guiderag.db (see README, "Where the data lives")."""
    return user_data_dir() / STORE_NAME


def source_checkout() -> Path | None:
    """The repository root when guiderag runs from a source checkout, else None."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() and (root / "retrieval").is_dir() else None


def shared_bench_dir() -> Path:
    """The development benchmarks: ../shared/bench beside the checkout (or beside the
    current folder when guiderag is installed from a wheel)."""
    checkout = source_checkout()
    base = checkout.parent if checkout is not None else Path.cwd().parent
    return base / "shared" / "bench"


_POSTGRES_URL = re.compile(r"^postgres(?:ql)?://", re.I)


def is_postgres_url(location: object) -> bool:
    """True for a postgresql:// (or postgres://) URL: a shared store, not a file."""
    return isinstance(location, str) and bool(_POSTGRES_URL.match(location))


# Percent-encoding libpq accepts: "%" and two hex digits, never %00.
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})|%00")
_PORT = re.compile(r"[0-9]{1,5}")
URL_NOT_SHOWN = "(the URL is not shown: it may hold a password)"


def check_postgres_url(url: str) -> str:
    """`url` when libpq can read it as written, else InputError (exit 2) in one line that
    quotes nothing of it, since what cannot be parsed cannot be told from the password:
    a "/", "?", "#" or "@" in the password must be percent-encoded (%2F, %3F, %23, %40),
    every port must be a number up to 65535, every "%" must start an escape."""
    advice = ("write the password's '/', '?', '#', '@' and '%' percent-encoded (%2F, %3F, %23, %40, %25), "
              f"and the port as a number {URL_NOT_SHOWN}")
    where = "the PostgreSQL URL of the store (--db, GUIDERAG_DB or --pg)"
    _, _, rest = url.partition("://")
    end = re.search(r"[/?#]", rest)
    authority, tail = (rest[:end.start()], rest[end.start():]) if end else (rest, "")
    for host in authority.rpartition("@")[2].split(","):
        port = host.rpartition("]")[2] if host.startswith("[") else host
        number = port.rpartition(":")[2] if ":" in port else ""
        if number and (not _PORT.fullmatch(number) or not 0 < int(number) < 65536):
            if "@" in tail:  # postgresql://user:pa/ss@host/db: libpq would read host "user", port "pa"
                raise InputError(f"{where} cannot be read: its password seems to hold an unencoded '/', '?' "
                                 f"or '#'; {advice}")
            raise InputError(f"{where} cannot be read: a port is not a number from 1 to 65535; {advice}")
    if _BAD_PERCENT.search(url):
        raise InputError(f"{where} cannot be read: a '%' that does not start an escape like %2F (or %00); "
                         f"{advice}")
    try:
        urlsplit(url)
    except ValueError:
        raise InputError(f"{where} cannot be read (a malformed host); {advice}") from None
    return url


def shared_store_anchor(url: str) -> Path:
    """Where this machine keeps what lives beside a PostgreSQL store (its retrieval index,
    URL workbooks, check status): <user data dir>/postgresql/<host>-<port>-<database>.db,
    a name for a file that is never created."""
    parts = urlsplit(check_postgres_url(url))
    name = "-".join(p for p in (parts.hostname or "local", str(parts.port or 5432), parts.path.strip("/") or "db") if p)
    return user_data_dir() / "postgresql" / (re.sub(r"[^A-Za-z0-9._-]+", "_", name) + ".db")
