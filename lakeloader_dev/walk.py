"""One object's walk, arrival to commit, counted by following every call (docs/architecture.md).

A `sys.setprofile` hook (and `threading.setprofile`, for the ledger's and the drain's pools) runs over
two tests in one pytest process: the trigger test that records one object and starts its Glue run,
from the Lambda's `handler`, then the ingest job draining it, from `ingest_main` to the first batch's
commit (the `after_commit` crash point). Each call from one project file into another is a step,
kept the first time control takes it: a helper called again the same way adds nothing to read. A
step into a file the walk has already entered and left is a return: a call back into a file still
on the stack (a closure or callback handed down), or a call into a file read before (a shared
helper, a module entered a second time).

A step is a lookup when no call through it goes on into a third project file: a quote, a config
property, a constant, a log line. The walk is counted twice, with and without lookups (callbacks
always count): the second is the back-and-forth a reader follows.

    .venv/bin/python -m lakeloader_dev.walk

prints the walk in the order control runs, then both counts.
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
    leading_on: set[tuple[str, str]] = field(default_factory=set)  # steps some call went on from
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

    def count(self, *, lookups: bool) -> tuple[int, int, int, int]:
        """(files, steps, returns, callbacks), with or without the lookups."""
        kept = [
            (step, back)
            for step, back in zip(self.steps, self.returning, strict=True)
            if lookups or step in self.leading_on or back == "callback"
        ]
        files = {file for (caller, callee), _ in kept for file in (caller, callee)}
        backs = [back for _, back in kept]
        return len(files), len(kept), sum(map(bool, backs)), backs.count("callback")


class WalkPlugin:
    def __init__(self) -> None:
        self.walk = Walk()
        self.lock = threading.Lock()
        self.start: tuple[str, str] = ("", "")
        self.steps_by_frame: dict[int, tuple[FrameType, tuple[str, str]]] = {}  # frames a step entered

    def profile(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event == "return":
            self.steps_by_frame.pop(id(frame), None)
            return
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
                self.went_on_from(caller_frame)
                self.steps_by_frame[id(frame)] = (frame, (caller, callee))

    def went_on_from(self, frame: FrameType | None) -> None:
        """Mark the step whose call `frame` runs inside (its nearest frame a step entered) as leading on."""
        while frame is not None:
            entered = self.steps_by_frame.get(id(frame))
            if entered is not None and entered[0] is frame:
                self.walk.leading_on.add(entered[1])
                return
            frame = frame.f_back

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
        lookup = "" if (caller, callee) in walk.leading_on else "  [lookup]"
        print(f"{number:3} {caller} -> {callee}{f'  ({back})' if back else ''}{lookup}")
    print("files in the order control first enters them:")
    print(", ".join(walk.entered))
    for label, lookups in (("every step", True), ("without lookups", False)):
        files, steps, returns, callbacks = walk.count(lookups=lookups)
        print(
            f"{label}: {files} files, {steps} steps, {returns} returns ({returns / max(steps, 1):.0%}): "
            f"{callbacks} callbacks into a file on the stack, {returns - callbacks} re-entries"
        )
    return int(code)


if __name__ == "__main__":
    raise SystemExit(main())
