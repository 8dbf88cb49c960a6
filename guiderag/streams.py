"""Standard output and error that a closed pipe cannot stop half-way.

`guiderag scrape --sample 2>&1 | head -1`: head exits after one line, and every later
write raises BrokenPipeError. Left alone, the first one ends the command wherever it is
(the run stored, the index not built). Inside `pipe_safe_streams()` a write to a closed
pipe is dropped instead: the stream's file descriptor is pointed at /dev/null, so nothing
later (the interpreter's last flush included) fails again, and the command does all it
was asked; what it does not do, its exit code says, as always.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
from typing import Any, Iterator, TextIO


class PipeSafe:
    """A text stream whose writes after the reader went away are dropped, not raised."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.lost = False  # some output could not be delivered

    def write(self, text: str) -> int:
        if not self.lost:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not self.lost:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        """From now on, write nowhere: the descriptor too, for whatever is still buffered."""
        self.lost = True
        try:
            fd = self._stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, fd)
            finally:
                os.close(devnull)
        except (OSError, ValueError, io.UnsupportedOperation):
            pass  # not a real file (a test's capture): dropping our own writes is enough

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def pipe_safe_streams() -> Iterator[tuple[PipeSafe, PipeSafe]]:
    """sys.stdout and sys.stderr wrapped in PipeSafe for the block, flushed and restored after."""
    out, err = sys.stdout, sys.stderr
    safe_out, safe_err = PipeSafe(out), PipeSafe(err)
    sys.stdout, sys.stderr = safe_out, safe_err
    try:
        yield safe_out, safe_err
    finally:
        safe_out.flush()
        safe_err.flush()
        sys.stdout, sys.stderr = out, err
