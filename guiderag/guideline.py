"""The guideline a command works on: its id, and where its files live beside the store.

A store holds several guidelines; each has its own retrieval index, URL workbook and last
`guiderag check`. Which one a stage works on is a `GuidelineScope` passed to it
explicitly (`scrape_site(settings.scraper, settings.storage, toc, guideline=scope)`,
`load_retriever(config, store, scope)`), derived from the store's location and the id, never a
field of the settings.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .errors import InputError

# The one a store holds when none is named, and what `ask` routes by itself.
DEFAULT_GUIDELINE = "default"
AUTO_GUIDELINE = "auto"
# A guideline id names folders and files beside the store: lower-case letters, digits,
# '-' and '_'. Not the index's own names (v-*, tmp-*, CURRENT) nor words the CLI reserves.
# Matched whole (fullmatch; `$` would also match before a trailing newline: "gastric\n").
GUIDELINE_ID = re.compile(r"(?!v-|tmp-)[a-z0-9][a-z0-9_-]{0,39}")
RESERVED_GUIDELINE_IDS = frozenset({AUTO_GUIDELINE, "all", "none", "current"})
GUIDELINE_ID_RULE = (
    "1-40 lower-case letters, digits, '-' or '_', starting with a letter or digit "
    f"(not v-/tmp-, not {', '.join(sorted(RESERVED_GUIDELINE_IDS))})"
)


def is_guideline_id(gid: object) -> bool:
    return isinstance(gid, str) and bool(GUIDELINE_ID.fullmatch(gid)) and gid not in RESERVED_GUIDELINE_IDS


def check_guideline_id(gid: str) -> str:
    """`gid` when it can name a guideline, else InputError saying what an id may be."""
    if not is_guideline_id(gid):
        raise InputError(f"{gid!r} cannot name a guideline: use {GUIDELINE_ID_RULE}, e.g. --guideline gastric")
    return gid


class StoreLocation(Protocol):
    """Where a store's files live (guiderag.scopes.StoreConfig is one): known by this
    interface only, so that scopes, which checks guideline ids, and this module do not
    import each other."""

    @property
    def db(self) -> Path: ...

    @property
    def index_root(self) -> Path | None: ...


@dataclass(frozen=True)
class GuidelineScope:
    """One guideline of one store: what the scraper, `check` and retrieval work on."""

    id: str
    # <db>.index/ for the default guideline (as before there were several), else
    # <db>.index/<id>/; under the index root when one is set.
    index_dir: Path
    # The URL workbook each scrape writes: <db stem>.urls.xlsx for the default guideline,
    # <db stem>.<id>.urls.xlsx for another (a scrape's --urls-xlsx names another file).
    workbook_path: Path
    # The last `guiderag check` (a small JSON file beside the store): <db>.check/<id>.json.
    check_status_path: Path

    @classmethod
    def of(cls, store: StoreLocation, gid: str) -> GuidelineScope:
        """The scope of guideline `gid` (an id, not "" or auto: resolve those first) of a store."""
        check_guideline_id(gid)
        db = store.db
        root = store.index_root if store.index_root is not None else db.with_name(db.name + ".index")
        default = gid == DEFAULT_GUIDELINE
        return cls(
            id=gid,
            index_dir=root if default else root / gid,
            workbook_path=db.with_name(f"{db.stem}{'' if default else '.' + gid}.urls.xlsx"),
            check_status_path=db.with_name(db.name + ".check") / f"{gid}.json",
        )

    @property
    def is_default(self) -> bool:
        return self.id == DEFAULT_GUIDELINE
