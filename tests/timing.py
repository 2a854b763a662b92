"""Where the suite's time went, in the log as it goes: a line as each test module starts (the clock,
the time since the session began, and the module before it: wall seconds and the whole machine's
CPU-seconds), and at the end the same per suite and for the slowest modules.

CPU-seconds come from the kernel's counters (/proc/stat: user, nice, system, irq, softirq), so the
JVMs and subprocesses a test starts count as well as pytest's own process. Each line is flushed at
once, so a run cut off by a time limit still says where it was and how long each part took.

On `make test`'s two lanes (tests/lanes.py: two xdist workers, `--dist loadgroup`) each lane has its
own current module and each line names its lane; a module's CPU-seconds are then the whole machine's
while it ran, the other lane's work included.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

SLOWEST_MODULES = 15


def machine_cpu_seconds() -> float:
    """CPU time the whole machine has spent busy since boot (0 where /proc/stat is missing)."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:8]]
    except OSError:
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq = fields
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


@dataclass
class Span:
    name: str
    started: float
    cpu_started: float
    wall: float = 0.0
    cpu: float = 0.0

    def close(self, at: tuple[float, float] | None = None) -> None:
        """Close the span now, or `at` (monotonic clock, machine CPU-seconds)."""
        ended, cpu_ended = at or (time.monotonic(), machine_cpu_seconds())
        self.wall = ended - self.started
        self.cpu = cpu_ended - self.cpu_started


class SuiteClock:
    def __init__(self, config: pytest.Config) -> None:
        from tests.lanes import lane_of

        self.config = config
        self.began = time.monotonic()
        self.cpu_began = machine_cpu_seconds()
        self.modules: list[Span] = []
        self.running: dict[str, Span] = {}  # each lane's current module
        self.last_done: dict[str, tuple[float, float]] = {}  # when each lane's last test ended
        workers = config.getoption("numprocesses", None)
        in_lanes = bool(workers) and config.getoption("dist", "no") == "loadgroup"
        self.lane_of = lane_of if in_lanes else (lambda nodeid: "")

    def _write(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            if reporter._tw.width_of_current_line:  # after -q's progress dots: a line of its own
                reporter._tw.line()
            reporter.write_line(line)
            reporter._tw.flush()

    @pytest.hookimpl
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        module, lane = nodeid.split("::", 1)[0], self.lane_of(nodeid)
        done = self.running.get(lane)
        if done is not None and done.name == module:
            return
        if done is not None:
            done.close()
        since = time.monotonic() - self.began
        line = f"[{datetime.now(UTC):%H:%M:%S} +{since / 60:5.1f} min]{f' {lane}:' if lane else ''} {module}"
        if done is not None:
            line += f"   (before it: {done.name} {done.wall:.1f} s, {done.cpu:.0f} CPU-s)"
        self._write(line)
        self.running[lane] = Span(module, time.monotonic(), machine_cpu_seconds())
        self.modules.append(self.running[lane])

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self.last_done[self.lane_of(report.nodeid)] = (time.monotonic(), machine_cpu_seconds())

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for lane, span in self.running.items():
            if not span.wall:  # a lane that finished first ended with its last test
                span.close(self.last_done.get(lane))
        if not self.modules:
            return
        suites: dict[str, list[float]] = {}
        for span in self.modules:
            parts = span.name.split("/")
            suite = "/".join(parts[:2]) if len(parts) > 2 else parts[0]
            totals = suites.setdefault(suite, [0.0, 0.0])
            totals[0] += span.wall
            totals[1] += span.cpu
        overlap = ", the two lanes overlapping" if len(self.running) > 1 else ""
        terminalreporter.section(f"where the time went (wall s, whole machine's CPU-s{overlap})")
        for suite, (wall, cpu) in suites.items():
            terminalreporter.write_line(f"{suite:<40} {wall:8.1f} {cpu:8.0f}")
        total_wall = time.monotonic() - self.began
        total_cpu = machine_cpu_seconds() - self.cpu_began
        terminalreporter.write_line(f"{'all (with collection)':<40} {total_wall:8.1f} {total_cpu:8.0f}")
        terminalreporter.write_line(f"slowest {SLOWEST_MODULES} modules:")
        for span in sorted(self.modules, key=lambda s: -s.wall)[:SLOWEST_MODULES]:
            terminalreporter.write_line(f"  {span.name:<60} {span.wall:8.1f} {span.cpu:8.0f}")


def register(config: pytest.Config) -> None:
    """Called by tests/conftest.py's pytest_configure, whichever part of the suite runs."""
    if not hasattr(config, "workerinput") and not config.pluginmanager.has_plugin("lakeloader-suite-clock"):
        config.pluginmanager.register(SuiteClock(config), "lakeloader-suite-clock")
