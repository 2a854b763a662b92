"""Merge benchmark: lakeloader vs the AWS-sample pattern vs PyIceberg, on the same deterministic data.

    python -m benchmarks.merge --quick                 # small sizes, < 5 minutes on 2 cores
    python -m benchmarks.merge                         # full sizes (1M / 4M / 16M rows)
    python -m benchmarks.merge --scenario batch --scenario growth --growth-sizes 1000000,4000000

Scenarios
  batch   one CDC batch (70% updates, 20% inserts, 10% deletes, duplicates per key) into a base table,
          copy-on-write and merge-on-read
  growth  a fixed-size batch into tables of growing size, merge-on-read and copy-on-write; time ratio
          per size step
  small   many small batches into a merge-on-read table, then compaction: files before/after and the
          query speed-up

Method: one process and one SparkSession; a warm-up run of every engine first; each case is timed
N times, and the table is rolled back to the same base snapshot between runs (untimed). Reported:
median and min-max wall time, changes/s (input change records / median), and peak RSS of the
Spark driver JVM and of this Python process (VmHWM from /proc, reset before each run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import data
from benchmarks.engines import COW, DB, MOR, AwsSampleEngine, LakeloaderEngine, PyIcebergEngine, SparkTables

SCENARIOS = ("batch", "growth", "small")


@dataclass(frozen=True)
class Sizes:
    batch_rows: int
    batch_changes: int
    growth_rows: tuple[int, ...]
    growth_changes: int
    small_rows: int
    small_batches: int
    small_changes: int
    reps: int
    growth_reps: int
    query_reps: int
    case_warmups: int  # untimed runs of each case before its timed runs (after the global warm-up)


FULL = Sizes(1_000_000, 100_000, (1_000_000, 4_000_000, 16_000_000), 10_000, 1_000_000, 50, 2_000, 5, 3, 5, 1)
QUICK = Sizes(100_000, 10_000, (25_000, 100_000, 400_000), 2_500, 100_000, 8, 1_000, 3, 2, 3, 0)


# --------------------------------------------------------------------------- measuring


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
    phases: dict[str, float] = field(default_factory=dict)
    checksum: Any = None
    mode: str = ""
    note: str = ""
    skipped: str = ""

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
        phases = " ".join(f"{k} {v:.2f}s" for k, v in self.phases.items())
        spread = f"[{lo:6.2f} .. {hi:6.2f}] n={len(self.seconds)}"
        extra = "  ".join(x for x in (phases, self.note) if x)
        return (
            f"  {self.case:<34} {self.engine:<11} {self.median:8.2f}s  {spread}  {cpu}"
            f"  {rate:>9,.0f} chg/s  peak MiB: {mem}  {extra}"
        )


class Bench:
    def __init__(self, args: argparse.Namespace, sizes: Sizes):
        self.args = args
        self.sizes = sizes
        self.work = Path(args.workdir or tempfile.mkdtemp(prefix="lakeloader-bench-"))
        self.data_dir = Path(args.data_dir) if args.data_dir else self.work / "data"
        self.cases: list[Case] = []
        self.extra: dict[str, Any] = {}
        self.started = time.perf_counter()

        from lakeloader.spark import SparkSettings, build_session
        from lakeloader_dev.jars import spark_conf

        self.spark = build_session(
            SparkSettings(
                warehouse=str(self.work / "warehouse"),
                app_name="lakeloader-bench",
                driver_memory=args.driver_memory,
                shuffle_partitions=args.shuffle_partitions,
                extra_conf=spark_conf(),
            )
        )
        jvm_pid = self.spark.sparkContext._gateway.proc.pid
        self.rss = PeakRss({"jvm": jvm_pid, "py": os.getpid()})
        self.tables = SparkTables(self.spark)
        self.engines: dict[str, Any] = {}
        if "lakeloader" in args.engines:
            self.engines["lakeloader"] = LakeloaderEngine(self.tables)
        if "aws-sample" in args.engines:
            self.engines["aws-sample"] = AwsSampleEngine(self.tables)
        if "pyiceberg" in args.engines:
            self.engines["pyiceberg"] = PyIcebergEngine(self.work / "pyiceberg")

    # ----------------------------------------------------------------- helpers

    def log(self, message: str) -> None:
        elapsed = time.perf_counter() - self.started
        print(f"[{elapsed:7.1f}s] {message}", flush=True)

    def base(self, rows: int) -> list[Path]:
        return data.write_base(self.data_dir / f"base-{rows}", rows)

    def batch(self, changes: int, key_space: int, batch_no: int = 0) -> data.Batch:
        return data.write_batch(
            self.data_dir / f"cdc-{changes}-{key_space}-{batch_no}", changes, key_space, batch_no
        )

    def timed(self, engine: Any, label: str, batch: data.Batch, attempt: str) -> tuple[Any, dict[str, int]]:
        sc = self.spark.sparkContext
        group = f"bench-{attempt}-{time.monotonic_ns()}"
        sc.setJobGroup(group, attempt)
        self.rss.reset()
        cpu = self.rss.cpu_seconds()
        try:
            applied = engine.apply(label, batch, attempt)
        finally:
            sc.setJobGroup("bench-untimed", "untimed")
        applied.cpu = self.rss.cpu_seconds() - cpu
        applied.jobs = len(sc.statusTracker().getJobIdsForGroup(group))
        return applied, self.rss.read()

    def run_case(self, case: Case, engine: Any, label: str, batch: data.Batch, reps: int) -> Case:
        phases: dict[str, list[float]] = {}
        for warm in range(self.sizes.case_warmups):
            engine.reset(label)
            engine.apply(label, batch, f"{case.scenario}-{label}-warm{warm}")
        for rep in range(reps):
            engine.reset(label)
            applied, peak = self.timed(engine, label, batch, f"{case.scenario}-{label}-{rep}")
            case.seconds.append(applied.seconds)
            case.cpu.append(applied.cpu)
            case.jobs.append(applied.jobs)
            for key, value in peak.items():
                case.peak_mib[key] = max(case.peak_mib.get(key, 0), value)
            for key, value in applied.phases.items():
                phases.setdefault(key, []).append(value)
            if rep == 0 and self.args.verify:
                case.checksum = engine.checksum(label)
        case.phases = {k: statistics.median(v) for k, v in phases.items()}
        engine.reset(label)
        self.cases.append(case)
        print(case.row(), flush=True)
        return case

    def skip_pyiceberg(self, rows: int) -> str:
        if rows > self.args.pyiceberg_max_rows:
            return (
                f"{rows:,} rows > --pyiceberg-max-rows {self.args.pyiceberg_max_rows:,}: the upsert "
                "holds the matched target rows and the batch in Python memory, single-threaded"
            )
        return ""

    # ----------------------------------------------------------------- scenarios

    def warm_up(self) -> None:
        self.log("warm-up: every engine once on a 20k-row table (untimed)")
        base = self.base(20_000)
        batch = self.batch(2_000, 20_000, batch_no=99)
        for name, engine in self.engines.items():
            label = f"warmup_{name.replace('-', '_')}"
            engine.create(label, base, {})
            engine.apply(label, batch, "warmup")

    def scenario_batch(self) -> None:
        s = self.sizes
        self.log(
            f"scenario batch: {s.batch_changes:,} changes into {s.batch_rows:,} rows, {s.reps} runs each"
        )
        base = self.base(s.batch_rows)
        batch = self.batch(s.batch_changes, s.batch_rows)
        for mode, props in (("copy-on-write", COW), ("merge-on-read", MOR)):
            for name, engine in self.engines.items():
                case = Case("batch", mode, name, s.batch_rows, batch.changes)
                if name == "pyiceberg":
                    if mode == "merge-on-read":
                        continue  # PyIceberg writes copy-on-write only; its one line stands for both
                    case.note = "(copy-on-write: PyIceberg has no merge-on-read writes)"
                    if skip := self.skip_pyiceberg(s.batch_rows):
                        case.skipped = skip
                        self.cases.append(case)
                        print(case.row())
                        continue
                label = f"batch_{mode[:3]}_{name.replace('-', '_')}"
                engine.create(label, base, props)
                self.run_case(case, engine, label, batch, s.reps)

    def scenario_growth(self) -> None:
        s = self.sizes
        sizes = self.args.growth_sizes or s.growth_rows
        self.log(
            f"scenario growth: {s.growth_changes:,} changes into {', '.join(f'{n:,}' for n in sizes)} rows, "
            + " and ".join(self.args.growth_modes)
        )
        for rows in sizes:
            base = self.base(rows)
            # same size and mix at every step; updates/deletes hit keys spread over the whole table
            batch = self.batch(s.growth_changes, rows, batch_no=1)
            for mode in self.args.growth_modes:
                for name, engine in self.engines.items():
                    if name == "pyiceberg" and mode == "merge-on-read":
                        continue  # PyIceberg writes copy-on-write only; its copy-on-write line stands
                    case = Case("growth", f"{rows:,} rows, {mode}", name, rows, batch.changes, mode=mode)
                    if name == "pyiceberg" and (skip := self.skip_pyiceberg(rows)):
                        case.skipped = skip
                        self.cases.append(case)
                        print(case.row())
                        continue
                    label = f"growth_{rows}_{mode[:3]}_{name.replace('-', '_')}"
                    self.log(f"  loading {rows:,}-row base table for {name} ({mode})")
                    engine.create(label, base, MOR if mode == "merge-on-read" else COW)
                    self.run_case(case, engine, label, batch, s.growth_reps)
                    if engine.spark_based and not self.args.keep_tables:
                        self.spark.sql(f"DROP TABLE IF EXISTS {self.tables.qualified(label)} PURGE")

    def scenario_small(self) -> None:
        s = self.sizes
        self.log(
            f"scenario small: {s.small_batches} x {s.small_changes:,} changes into {s.small_rows:,} rows "
            "(merge-on-read), then compaction"
        )
        base = self.base(s.small_rows)
        batches = [
            self.batch(s.small_changes, s.small_rows, batch_no=100 + i) for i in range(s.small_batches)
        ]
        for name, engine in self.engines.items():
            case = Case("small", f"{s.small_batches} batches, per batch", name, s.small_rows, s.small_changes)
            if name == "pyiceberg":
                case.note = "(copy-on-write)"
                if skip := self.skip_pyiceberg(s.small_rows):
                    case.skipped = skip
                    self.cases.append(case)
                    print(case.row())
                    continue
            label = f"small_{name.replace('-', '_')}"
            engine.create(label, base, MOR)
            for i, batch in enumerate(batches):
                applied, peak = self.timed(engine, label, batch, f"small-{i}")
                case.seconds.append(applied.seconds)
                case.cpu.append(applied.cpu)
                case.jobs.append(applied.jobs)
                for key, value in peak.items():
                    case.peak_mib[key] = max(case.peak_mib.get(key, 0), value)
            case.note = (case.note + f" total {sum(case.seconds):.1f}s").strip()
            if self.args.verify:
                case.checksum = engine.checksum(label)
            self.cases.append(case)
            print(case.row(), flush=True)
            if name == "lakeloader":
                self.compaction(engine, label)

    def compaction(self, engine: Any, label: str) -> None:
        from lakeloader.spark import CATALOG

        name = self.tables.qualified(label)
        query = f"SELECT status, count(*), round(sum(amount), 2) FROM {name} GROUP BY status"
        before_files = engine.files(label)
        before = self.time_query(query)
        started = time.perf_counter()
        self.spark.sql(
            f"CALL {CATALOG}.system.rewrite_data_files(table => '{DB}.{label}', "
            "options => map('rewrite-all', 'true'))"
        )
        self.spark.sql(
            f"CALL {CATALOG}.system.rewrite_position_delete_files(table => '{DB}.{label}', "
            "options => map('rewrite-all', 'true'))"
        )
        compact_s = time.perf_counter() - started
        after_files = engine.files(label)
        after = self.time_query(query)
        self.extra["compaction"] = {
            "files_before": before_files,
            "files_after": after_files,
            "compaction_seconds": compact_s,
            "query": query,
            "query_before_s": before,
            "query_after_s": after,
        }
        mb, ma = statistics.median(before), statistics.median(after)
        print(
            f"  compaction (rewrite_data_files + rewrite_position_delete_files): {compact_s:.1f}s; files "
            f"{before_files} -> {after_files}; query median {mb:.2f}s -> {ma:.2f}s (x{mb / ma:.2f} faster)",
            flush=True,
        )

    def time_query(self, query: str) -> list[float]:
        self.spark.sql(query).collect()  # warm
        times = []
        for _ in range(self.sizes.query_reps):
            started = time.perf_counter()
            self.spark.sql(query).collect()
            times.append(time.perf_counter() - started)
        return times

    # ----------------------------------------------------------------- report

    def ratios(self) -> list[str]:
        lines = []
        by_key: dict[tuple[str, str], dict[str, Case]] = {}
        for case in self.cases:
            if case.seconds:
                by_key.setdefault((case.scenario, case.case), {})[case.engine] = case
        for (scenario, name), engines in by_key.items():
            ours = engines.get("lakeloader")
            if not ours:
                continue
            theirs = dict(engines)
            if scenario == "batch" and name == "merge-on-read":
                pyi = next(
                    (
                        c
                        for c in self.cases
                        if c.scenario == "batch" and c.engine == "pyiceberg" and c.seconds
                    ),
                    None,
                )
                if pyi:
                    theirs["pyiceberg"] = pyi
            parts = [
                f"÷ {eng} {ours.median / other.median:.2f}"
                for eng, other in theirs.items()
                if eng != "lakeloader"
            ]
            if parts:
                lines.append(
                    f"  {scenario:<7} {name:<28} lakeloader {ours.median:7.2f}s  " + "  ".join(parts)
                )
        growth: dict[tuple[str, str], list[Case]] = {}
        for case in self.cases:
            if case.scenario == "growth" and case.seconds:
                growth.setdefault((case.engine, case.mode), []).append(case)
        for (engine, mode), cases in growth.items():
            steps = [
                f"{a.rows:,}->{b.rows:,} rows ({b.rows / a.rows:.0f}x): time x{b.median / a.median:.2f}"
                for a, b in zip(cases, cases[1:], strict=False)
            ]
            if len(cases) > 2:
                first, last = cases[0], cases[-1]
                steps.append(f"{first.rows:,}->{last.rows:,} rows: time x{last.median / first.median:.2f}")
            if steps:
                lines.append(f"  growth  {engine:<11} {mode[:3]} " + "; ".join(steps))
        checks: dict[tuple[str, str], set] = {}
        for case in self.cases:
            if case.checksum is not None:
                checks.setdefault(
                    (case.scenario, case.case if case.scenario != "batch" else "batch"), set()
                ).add(tuple(case.checksum))
        for (scenario, name), values in checks.items():
            verdict = "same table from every engine" if len(values) == 1 else f"DIFFERENT results: {values}"
            lines.append(f"  check   {scenario} {name}: {verdict}")
        return lines


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
        info["iceberg_jar"] = next(
            p.name for p in jars.local_jars("all") if "iceberg-spark-runtime" in p.name
        )
    except Exception:  # noqa: BLE001 - informational only
        info["iceberg_jar"] = "?"
    return info


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.merge", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and fewer runs (< 5 minutes)")
    parser.add_argument(
        "--scenario",
        action="append",
        choices=SCENARIOS,
        help="repeatable, run in the order given; default: all",
    )
    parser.add_argument(
        "--engines",
        default="lakeloader,aws-sample,pyiceberg",
        type=lambda s: [e.strip() for e in s.split(",") if e.strip()],
        help="comma-separated subset of lakeloader,aws-sample,pyiceberg",
    )
    parser.add_argument("--reps", type=int, help="timed runs per case (default 5, --quick 3)")
    parser.add_argument(
        "--growth-sizes",
        type=lambda s: tuple(int(float(x)) for x in s.split(",")),
        help="comma-separated table sizes for the growth scenario (default 1e6,4e6,16e6)",
    )
    parser.add_argument(
        "--growth-modes",
        default="merge-on-read,copy-on-write",
        type=lambda s: [m.strip() for m in s.split(",") if m.strip()],
        help="comma-separated write modes the growth scenario runs (default both)",
    )
    parser.add_argument("--pyiceberg-max-rows", type=int, default=4_000_000)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--shuffle-partitions", type=int, default=4, help="lakeloader's local default")
    parser.add_argument("--workdir", help="keep tables and data here (default: a temp dir, removed)")
    parser.add_argument("--data-dir", help="reuse generated parquet data from here (it is deterministic)")
    parser.add_argument("--keep-tables", action="store_true")
    parser.add_argument("--no-verify", dest="verify", action="store_false", help="skip result checksums")
    parser.add_argument("--json", help="write all figures to this JSON file")
    args = parser.parse_args(argv)
    args.scenario = args.scenario or list(SCENARIOS)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.reps:
        sizes = Sizes(**{**asdict(sizes), "reps": args.reps, "growth_reps": args.reps})
    info = machine()
    print("lakeloader merge benchmark" + (" (--quick)" if args.quick else ""))
    print("  " + "  ".join(f"{k}={v}" for k, v in info.items()))
    print("  command: python -m benchmarks.merge " + " ".join(sys.argv[1:] if argv is None else argv))
    bench = Bench(args, sizes)
    steps: dict[str, Callable[[], None]] = {
        "batch": bench.scenario_batch,
        "growth": bench.scenario_growth,
        "small": bench.scenario_small,
    }
    try:
        bench.warm_up()
        for scenario in dict.fromkeys(args.scenario):  # in the order given
            steps[scenario]()
        print("\nratios (lakeloader median ÷ theirs; < 1 means lakeloader is faster)")
        lines = bench.ratios()
        print("\n".join(lines))
        info["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        bench.log(f"done; load average at end {info['loadavg_end']}")
        if args.json:
            Path(args.json).write_text(
                json.dumps(
                    {
                        "machine": info,
                        "sizes": asdict(sizes),
                        "cases": [asdict(c) | {"median": c.median} for c in bench.cases],
                        "ratios": lines,
                        **bench.extra,
                    },
                    indent=2,
                    default=str,
                )
            )
    finally:
        bench.spark.stop()
        if not args.workdir:
            shutil.rmtree(bench.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
