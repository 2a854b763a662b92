"""What a run tells the person watching it: progress lines as it goes, a summary table at the end."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

Progress = Callable[[str], None]
"""Takes one line of progress (no trailing newline)."""


def no_progress(message: str) -> None:
    """Progress nobody watches (library calls and tests)."""


def stderr_progress(message: str) -> None:
    print(f"{datetime.now(UTC):%H:%M:%S} {message}", file=sys.stderr, flush=True)


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A plain-text table: the header, a rule, one line per row; columns left-aligned to their widest."""
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in rows)
    return lines
