"""The `lakeloader` command's output when its reader stops early (`lakeloader tables --json | head`):
the command, a real process, writes into a pipe whose reader has already gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize(
    "args",
    [["tables", "--json", "--config", "config/tables.yaml"], ["tables", "--config", "config/tables.yaml"]],
)
def test_a_reader_that_has_gone_ends_the_command_quietly(args: list[str], buffered: bool) -> None:
    """Buffered (a shell's default for a pipe): a short output reaches the pipe only when flushed."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: every write fails
    try:
        done = subprocess.run(
            [sys.executable, "-m", "lakeloader.cli", *args],
            cwd=ROOT,
            env=env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.stderr.decode() == ""  # no BrokenPipeError traceback, no "Exception ignored" at exit
    assert done.returncode == 141  # as a Unix tool ended by SIGPIPE (128 + 13)
