"""Run the emulator in the foreground until SIGTERM/SIGINT: ``python -m lakeloader_dev.emulator.serve``.

``python -m lakeloader_dev.local up`` starts this detached and waits for the state file, which holds
the endpoint, the pid and the work folder. Lambda invocations and Glue runs are logged
to stdout (one line each) — `python -m lakeloader_dev.local up` sends them to ``<workdir>/emulator.log``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from lakeloader_dev.emulator import Emulator, aws_env


def describe(kind: str, record) -> str:
    if kind == "lambda":
        outcome = "ok" if record.ok else f"error {record.error}"
        timing = f"in {record.seconds:.1f} s"
        return f"lambda {record.function} ({record.trigger}) {outcome} {timing}: {record.result}"
    return f"glue {record.job} {record.run_id[:12]} {record.state} {record.error or ''}".rstrip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--state-file", required=True)
    args = parser.parse_args(argv)

    emulator = Emulator(port=args.port, workdir=args.workdir).start()
    # clients the emulator itself creates (Step Functions' service integrations) call back into it
    os.environ.update(aws_env(emulator.endpoint))
    emulator.journal.listeners.append(lambda kind, record: print(describe(kind, record), flush=True))
    state = {"endpoint": emulator.endpoint, "pid": os.getpid(), "workdir": str(Path(args.workdir).resolve())}
    state_file = Path(args.state_file)
    state_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(state_file)
    print(f"emulator listening on {emulator.endpoint}", flush=True)

    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    emulator.stop()
    state_file.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
