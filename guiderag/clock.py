"""Timestamps as guiderag writes them: ISO-8601 UTC with a Z suffix."""
from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> str:
    """Current time as an ISO-8601 UTC string with a Z suffix (second precision)."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def utc_now_ms() -> str:
    """The same with milliseconds (audit rows)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
