"""What a run tells the person watching it: progress lines as it goes, a summary table at the end."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TextIO

Progress = Callable[[str], None]
"""Takes one line of progress (no trailing newline)."""


def no_progress(message: str) -> None:
    """Progress nobody watches (library calls and tests)."""


def stderr_progress(message: str) -> None:
    write_line(sys.stderr, f"{datetime.now(UTC):%H:%M:%S} {message}")


_LINES = threading.Lock()


def write_line(stream: TextIO, text: str) -> None:
    """`text` and its newline in one write, flushed: print() writes them apart, so two threads saying
    something at once (a ticker, the emulator's event listener) ran their lines together."""
    with _LINES:
        stream.write(text + "\n")
        stream.flush()


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A plain-text table: the header, a rule, one line per row; columns left-aligned to their widest."""
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in rows)
    return lines
