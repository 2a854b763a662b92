"""What the merge benchmark measures and records: peak memory and CPU of the processes, one case's
runs, and the machine it ran on."""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class PeakRss:
    """Peak resident memory of a set of processes over a block, via /proc/<pid>/status VmHWM.

    Writing 5 to /proc/<pid>/clear_refs resets the high-water mark (Linux >= 4.0). Where that is
    refused, the figure is the process's lifetime peak (marked with a trailing '*').
    """

    def __init__(self, pids: dict[str, int]):
        self.pids = pids
        self.resettable = True

    def reset(self) -> None:
        for pid in self.pids.values():
            try:
                Path(f"/proc/{pid}/clear_refs").write_text("5")
            except OSError:
                self.resettable = False

    def cpu_seconds(self) -> float:
        """User + system CPU time consumed so far by all the processes (all their threads)."""
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in self.pids.values():
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / ticks

    def read(self) -> dict[str, int]:
        peaks = {}
        for name, pid in self.pids.items():
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peaks[name] = int(line.split()[1]) // 1024  # MiB
        return peaks


@dataclass
class Case:
    scenario: str
    case: str
    engine: str
    rows: int
    changes: int
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    jobs: list[int] = field(default_factory=list)
    peak_mib: dict[str, int] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)  # each phase's median over the runs
    phase_runs: dict[str, list[float]] = field(default_factory=dict, repr=False)
    checksum: Any = None
    mode: str = ""
    note: str = ""
    skipped: str = ""

    def add_run(self, applied: Any, peak: dict[str, int]) -> None:
        """One timed run: its wall and CPU time, Spark jobs, and the peak memory so far."""
        self.seconds.append(applied.seconds)
        self.cpu.append(applied.cpu)
        self.jobs.append(applied.jobs)
        for key, value in peak.items():
            self.peak_mib[key] = max(self.peak_mib.get(key, 0), value)
        for phase, seconds in applied.phases.items():
            self.phase_runs.setdefault(phase, []).append(seconds)
        self.phases = {phase: statistics.median(runs) for phase, runs in self.phase_runs.items()}

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")

    def row(self) -> str:
        if self.skipped:
            return f"  {self.case:<34} {self.engine:<11} skipped: {self.skipped}"
        lo, hi = min(self.seconds), max(self.seconds)
        rate = self.changes / self.median if self.median else 0
        cpu = f"cpu {statistics.median(self.cpu):6.2f}s" if self.cpu else ""
        if self.jobs and max(self.jobs):
            cpu += f" jobs {statistics.median(self.jobs):3.0f}"
        mem = " ".join(f"{k} {v:>5}" for k, v in self.peak_mib.items())
        phases = " | ".join(f"{k} {v:.2f}s" for k, v in self.phases.items())
        spread = f"[{lo:6.2f} .. {hi:6.2f}] n={len(self.seconds)}"
        line = (
            f"  {self.case:<34} {self.engine:<11} {self.median:8.2f}s  {spread}  {cpu}"
            f"  {rate:>9,.0f} chg/s  peak MiB: {mem}  {self.note}"
        ).rstrip()
        return f"{line}\n      phases (medians): {phases}" if phases else line


def machine() -> dict[str, str]:
    import pyarrow
    import pyspark

    info = {
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "nproc": str(os.cpu_count()),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "pyarrow": pyarrow.__version__,
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    try:
        import pyiceberg

        info["pyiceberg"] = pyiceberg.__version__
    except ImportError:
        pass
    mem = Path("/proc/meminfo").read_text().splitlines()[0].split()[1]
    info["memory"] = f"{int(mem) / 1024 / 1024:.1f} GiB"
    java = shutil.which("java")
    if java:
        out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr.splitlines()
        info["java"] = out[0] if out else "?"
    from lakeloader_dev import jars

    try:
        info["iceberg_jar"] = next(p.name for p in jars.local_jars() if "iceberg-spark-runtime" in p.name)
    except Exception:  # noqa: BLE001 - informational only
        info["iceberg_jar"] = "?"
    return info
