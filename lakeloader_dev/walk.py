"""One object's walk, arrival to commit, counted by following every call (docs/architecture.md).

A `sys.setprofile` hook (and `threading.setprofile`, for the ledger's and the drain's pools) runs over
two tests in one pytest process: the trigger test that records one object and starts its Glue run,
from the Lambda's `handler`, then the ingest job draining it, from `ingest_main` to the first batch's
commit (the `after_commit` crash point). Each call from one project file into another is a step,
kept the first time control takes it: a helper called again the same way adds nothing to read. A
step into a file the walk has already entered and left is a return: a call back into a file still
on the stack (a closure or callback handed down), or a call into a file read before (a shared
helper, a module entered a second time).

    .venv/bin/python -m lakeloader_dev.walk

prints the walk in the order control runs, then its file count and its return share.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tuple(str(ROOT / folder) + "/" for folder in ("lakeloader", "glue_jobs", "emr_steps", "lambda"))
# (test, the file and function where its walk starts)
LEGS = (
    ("tests/unit/test_trigger_handler.py::test_new_object_is_recorded_and_starts_a_glue_run",
     "lambda/s3_arrival/handler.py", "handler"),
    ("tests/spark/test_job_arguments.py::"
     "test_a_rebuild_through_the_arguments_is_refused_while_erasures_are_on_record",
     "lakeloader/jobs/main.py", "ingest_main"),
)  # fmt: skip
STOP = ("lakeloader/spark/faults.py", "crash_point", "after_commit")


def project_file(frame: FrameType) -> str | None:
    name = frame.f_code.co_filename
    return name[len(str(ROOT)) + 1 :] if name.startswith(PROJECT) else None


def stack_files(frame: FrameType | None) -> set[str]:
    files = set()
    while frame is not None:
        files.add(project_file(frame) or "")
        frame = frame.f_back
    return files


@dataclass
class Walk:
    """The steps (caller file, callee file) in the order control first takes them."""

    steps: list[tuple[str, str]] = field(default_factory=list)
    returning: list[str] = field(default_factory=list)  # per step: "", "callback" or "re-entry"
    entered: list[str] = field(default_factory=list)  # files in the order first entered
    recording: bool = False
    done: bool = False

    def enter(self, start: str) -> None:
        if start not in self.entered:
            self.entered.append(start)
        self.recording = True

    def step(self, caller: str, callee: str, on_stack: bool) -> None:
        if (caller, callee) in self.steps:
            return
        self.steps.append((caller, callee))
        self.returning.append(("callback" if on_stack else "re-entry") if callee in self.entered else "")
        if callee not in self.entered:
            self.entered.append(callee)


class WalkPlugin:
    def __init__(self) -> None:
        self.walk = Walk()
        self.lock = threading.Lock()
        self.start: tuple[str, str] = ("", "")

    def profile(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or self.walk.done:
            return
        callee = project_file(frame)
        if callee is None:
            return
        with self.lock:
            if not self.walk.recording:
                if (callee, frame.f_code.co_name) == self.start:
                    self.walk.enter(callee)
                return
            if (callee, frame.f_code.co_name) == STOP[:2] and frame.f_locals.get("name") == STOP[2]:
                self.walk.recording = False
                self.walk.done = True
                return
            caller_frame = frame.f_back
            while caller_frame is not None and project_file(caller_frame) is None:
                caller_frame = caller_frame.f_back
            caller = project_file(caller_frame) if caller_frame is not None else None
            if caller is not None and caller != callee:
                self.walk.step(caller, callee, callee in stack_files(caller_frame))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        self.start = next((file, function) for test, file, function in LEGS if item.nodeid == test)
        self.walk.done = self.walk.recording = False
        threading.setprofile(self.profile)
        sys.setprofile(self.profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
            self.walk.recording = False


def main() -> int:
    plugin = WalkPlugin()
    code = pytest.main([test for test, _, _ in LEGS] + ["-p", "no:cacheprovider", "-q"], plugins=[plugin])
    walk = plugin.walk
    for number, ((caller, callee), back) in enumerate(zip(walk.steps, walk.returning, strict=True), 1):
        print(f"{number:3} {caller} -> {callee}{f'  ({back})' if back else ''}")
    print("files in the order control first enters them:")
    print(", ".join(walk.entered))
    returns = sum(bool(kind) for kind in walk.returning)
    share = returns / len(walk.steps) if walk.steps else 0.0
    callbacks = walk.returning.count("callback")
    print(
        f"{len(walk.entered)} files, {len(walk.steps)} steps, {returns} returns ({share:.0%}): "
        f"{callbacks} callbacks into a file on the stack, {returns - callbacks} re-entries"
    )
    return int(code)


if __name__ == "__main__":
    raise SystemExit(main())
