"""Named crash points for the fault suite (tests/faults): a run dies here as a killed Glue job would.

`crash_point(name)` does nothing unless the environment variable LAKELOADER_CRASH_AT equals
`name`; then the process kills itself with SIGKILL (no cleanup, no `finally`, no atexit), which is
what an out-of-memory kill, a lost node or a Glue timeout does to a job. Standard library only.
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "LAKELOADER_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
