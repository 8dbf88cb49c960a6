"""How specific a word is in general Japanese: wordfreq's Japanese frequency table.

A question word the guideline never uses may be the topic the guideline does not cover
(白血病, 漢方, 乳がん) or only the patient's everyday wording (髪, 戻る, お金). General
usage tells them apart: everyday words are frequent in any Japanese text, a disease or a
treatment is not. The table is wordfreq's `large_ja` list (Wikipedia, subtitles, news,
web text, Twitter...), read directly from the file the wordfreq package installs, not
through wordfreq's own tokenizer (which needs MeCab with ipadic); its format is
wordfreq's "cBpack": a msgpack list whose entry i (from 1) holds the words with a
frequency of 10 ** (-(i - 1) / 100).

The Zipf value of a word is log10 of its frequency per billion words (wordfreq's scale:
about 7 for の, 5 for お金, 3 for 白血病). `specificity` maps it to a weight in
[settings.specific_min_weight, 1]: 1 at or below RARE_ZIPF, the minimum at or above
COMMON_ZIPF, linear in between. A word the table
does not list is rare (weight 1).
"""
from __future__ import annotations

import gzip
import importlib.util
import threading
from pathlib import Path

from guiderag.errors import InputError

TABLE_FILE = "large_ja.msgpack.gz"
# A word at or below RARE_ZIPF (白血病, about 3) weighs fully, one at or above COMMON_ZIPF
# (お金, about 5) the least. Constants, not settings: the bounds of wordfreq's scale where
# "everyday word" begins and ends in general Japanese, not a property of a site; what a
# deployment may turn is specific_min_weight (1: off). Measured on the patient-worded
# sample set (issue 11); never set, not by a test.
RARE_ZIPF = 3.5
COMMON_ZIPF = 5.0

_LOCK = threading.Lock()
_TABLE: dict[str, float] | None = None


def table_path() -> Path:
    """The Japanese frequency table inside the installed wordfreq package."""
    spec = importlib.util.find_spec("wordfreq")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("the wordfreq package is not installed: pip install wordfreq "
                         "(guiderag reads its Japanese frequency table)")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / TABLE_FILE
    if not path.is_file():
        raise InputError(f"wordfreq's Japanese table {path} is missing: reinstall wordfreq "
                         "(pip install --force-reinstall wordfreq)")
    return path


def load_table(path: Path | None = None) -> dict[str, float]:
    """word -> Zipf value, from a cBpack file (see the module docstring)."""
    import msgpack  # a dependency of wordfreq

    path = path or table_path()
    with gzip.open(path, "rb") as fh:
        data = msgpack.load(fh, raw=False)
    header = data[0] if data else {}
    if not isinstance(header, dict) or header.get("format") != "cB":
        raise InputError(f"{path} is not a wordfreq cBpack table (header {header!r})")
    table: dict[str, float] = {}
    for i, bucket in enumerate(data[1:]):
        zipf = 9.0 - i / 100.0
        for word in bucket:
            table.setdefault(word, zipf)
    return table


def table() -> dict[str, float]:
    """The process's table, loaded on first use (about a quarter of a second)."""
    global _TABLE
    if _TABLE is None:
        with _LOCK:
            if _TABLE is None:
                _TABLE = load_table()
    return _TABLE


def zipf(*forms: str) -> float | None:
    """The highest Zipf value of any of the forms (lemma, surface), None when none is listed."""
    t = table()
    found = [t[f] for f in forms if f and f in t]
    return max(found) if found else None


def weight_of_zipf(value: float | None, rare: float, common: float, minimum: float) -> float:
    """1 for a rare (or unlisted) word, `minimum` for a common one, linear in between."""
    if value is None or value <= rare or common <= rare:
        return 1.0
    if value >= common:
        return minimum
    return 1.0 - (1.0 - minimum) * (value - rare) / (common - rare)
