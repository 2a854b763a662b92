"""The shipped job code parses and compiles under Python 3.14's grammar (Glue 6.1's Python).

No Python 3.14 runs on this project's machines (docs/deploy.md, "Runtimes"), so glue-6.1's suites run on
3.13; what 3.14 alone would refuse or warn about is checked here with ruff at `target-version py314`:
its syntax errors for that version, and the jumps out of `finally` (B012) and invalid escapes (W605)
that 3.14 compiles with a SyntaxWarning (PEP 765).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What Glue and EMR run: the library zip and the entry points.
SHIPPED = ("lakeloader", "glue_jobs", "emr_steps")


def ruff_py314(*paths: Path) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--target-version", "py314",
        "--select", "B012,W605", "--output-format", "concise", *map(str, paths),
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO)


def test_the_shipped_code_is_python_3_14_code():
    done = ruff_py314(*(REPO / name for name in SHIPPED))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_sees_what_python_3_14_refuses(tmp_path):
    (tmp_path / "newer.py").write_text("lazy import json\n")  # Python 3.15 syntax
    (tmp_path / "finally_return.py").write_text(
        "def f():\n    try:\n        pass\n    finally:\n        return 1\n"
    )
    found = ruff_py314(tmp_path).stdout
    assert "newer.py:1:" in found and "finally_return.py:5:" in found, found
