"""A dependency-free progress bar on stderr, shared by scrape, index and eval.

A stage that shows progress is handed a `ProgressReporter` (the CLI makes one from
--no-progress / GUIDERAG_PROGRESS), rather than reading a setting deep inside.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TextIO


class Progress:
    """`with Progress(total, "fetch") as bar: bar.update(1, note=url)`; silent when disabled."""

    def __init__(self, total: int, label: str, *, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.total = max(0, int(total))
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.done = 0
        self._start = time.monotonic()
        self._last = 0.0
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def __enter__(self) -> "Progress":
        self._draw(force=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: int = 1, note: str = "") -> None:
        self.done += n
        self._draw(note=note)

    def close(self) -> None:
        if self.enabled:
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False

    def _draw(self, note: str = "", force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        # On a terminal redraw at most 10 times a second; in a log, one line per 10%.
        if not force and not self._tty:
            step = max(1, self.total // 10)
            if self.done % step and self.done != self.total:
                return
        elif not force and now - self._last < 0.1 and self.done != self.total:
            return
        self._last = now
        width = 24
        frac = self.done / self.total if self.total else 1.0
        bar = "#" * int(width * frac) + "-" * (width - int(width * frac))
        elapsed = now - self._start
        text = f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s"
        if note:
            text += " " + note[:60]
        if self._tty:
            self.stream.write("\r\x1b[2K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


@dataclass(frozen=True)
class ProgressReporter:
    """Where a stage reports its progress: bars on `stream` (stderr when None), or none
    (QUIET). Passed to the stage explicitly."""

    enabled: bool = True
    stream: TextIO | None = None

    def bar(self, total: int, label: str) -> Progress:
        """`with reporter.bar(len(pages), "fetch") as bar: bar.update(1, note=url)`."""
        return Progress(total, label, enabled=self.enabled, stream=self.stream)


QUIET = ProgressReporter(enabled=False)
