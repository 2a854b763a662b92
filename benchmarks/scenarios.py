"""The merge benchmark's scenarios (batch, growth, small) and the sizes they run at; one `Bench` holds
the SparkSession, the engines and the cases measured so far."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import data
from benchmarks.engines import (
    COW,
    MOR,
    MOR_V3,
    AwsSampleEngine,
    LakeloaderEngine,
    LakeloaderWithoutTombstones,
    PyIcebergEngine,
    SparkTables,
)
from benchmarks.measure import Case, PeakRss
from lakeloader.config.format_versions import FORMAT_3_RUNTIMES
from lakeloader.control import runtimes

SCENARIOS = ("batch", "growth", "small", "large")


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
    large_rows: int = 0  # the large case: large_changes into large_rows, both modes (0: not run)
    large_changes: int = 0
    large_reps: int = 1


FULL = Sizes(
    1_000_000,
    100_000,
    (1_000_000, 4_000_000, 16_000_000),
    10_000,
    1_000_000,
    50,
    2_000,
    5,
    3,
    5,
    1,
    large_rows=16_000_000,
    large_changes=1_000_000,
    large_reps=1,
)
QUICK = Sizes(100_000, 10_000, (25_000, 100_000, 400_000), 2_500, 100_000, 8, 1_000, 5, 3, 3, 1)


class Bench:
    def __init__(self, args: argparse.Namespace, sizes: Sizes):
        self.args = args
        self.sizes = sizes
        self.work = Path(args.workdir or tempfile.mkdtemp(prefix="lakeloader-bench-"))
        self.data_dir = Path(args.data_dir) if args.data_dir else self.work / "data"
        self.cases: list[Case] = []
        self.extra: dict[str, Any] = {}
        self.started = time.perf_counter()

        from lakeloader.spark.session import SparkSettings, build_session
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
        self.tables = SparkTables(self.spark, replay_tombstones=args.replay_tombstones)
        self.engines: dict[str, Any] = {}
        if "lakeloader" in args.engines:
            self.engines["lakeloader"] = LakeloaderEngine(self.tables)
        if "lakeloader-no-tombstones" in args.engines:
            self.engines["lakeloader-no-tombstones"] = LakeloaderWithoutTombstones(self.tables)
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

    def run_side_by_side(
        self, runs: list[tuple[Case, Any, str]], batch: data.Batch, reps: int, warmups: int | None = None
    ) -> None:
        """Time the cases of one comparison (case, engine, table label) side by side: each repetition runs
        every engine once, in an order that alternates, so a drift of load or of the JVM's warm-up hits
        every engine alike rather than the one that happens to run first. Each run starts from the base
        snapshot."""
        warm = self.sizes.case_warmups if warmups is None else warmups
        for n in range(warm + reps):
            for case, engine, label in runs if n % 2 == 0 else reversed(runs):
                engine.reset(label)
                if n < warm:
                    engine.apply(label, batch, f"{case.scenario}-{label}-warm{n}")
                    continue
                applied, peak = self.timed(engine, label, batch, f"{case.scenario}-{label}-{n - warm}")
                case.add_run(applied, peak)
                if n == warm and self.args.verify:
                    case.checksum = engine.checksum(label)
        for case, engine, label in runs:
            engine.reset(label)
            self.cases.append(case)
            print(case.row(), flush=True)

    def skipped(self, case: Case, reason: str) -> None:
        case.skipped = reason
        self.cases.append(case)
        print(case.row())

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

    def run_on_fresh_tables(
        self,
        runs: list[tuple[Case, Any, str]],
        base: list[Path],
        properties: dict[str, str],
        batch: data.Batch,
        reps: int,
        warmups: int | None = None,
    ) -> None:
        """Load the base table under each run's label, time the runs side by side, then drop the tables
        (unless --keep-tables)."""
        for case, engine, label in runs:
            self.log(f"  loading {case.rows:,}-row base table for {case.engine} ({case.mode})")
            engine.create(label, base, properties)
        self.run_side_by_side(runs, batch, reps, warmups=warmups)
        for _case, engine, label in runs:
            if engine.spark_based and not self.args.keep_tables:
                self.spark.sql(f"DROP TABLE IF EXISTS {self.tables.qualified(label)} PURGE")

    def scenario_batch(self) -> None:
        s = self.sizes
        self.log(
            f"scenario batch: {s.batch_changes:,} changes into {s.batch_rows:,} rows, {s.reps} runs each"
        )
        base = self.base(s.batch_rows)
        batch = self.batch(s.batch_changes, s.batch_rows)
        modes = [("copy-on-write", COW), ("merge-on-read", MOR)]
        if runtimes.local().name in FORMAT_3_RUNTIMES:  # deletion vectors beside position deletes
            modes.append(("merge-on-read, format 3", MOR_V3))
        for mode, props in modes:
            runs = []
            for name, engine in self.engines.items():
                case = Case("batch", mode, name, s.batch_rows, batch.changes)
                if name == "pyiceberg":
                    if mode.startswith("merge-on-read"):
                        continue  # PyIceberg writes copy-on-write only; its one line stands for both
                    case.note = "(copy-on-write: PyIceberg has no merge-on-read writes)"
                    if skip := self.skip_pyiceberg(s.batch_rows):
                        self.skipped(case, skip)
                        continue
                label = f"batch_{mode[:3]}_{name.replace('-', '_')}"
                engine.create(label, base, props)
                runs.append((case, engine, label))
            self.run_side_by_side(runs, batch, s.reps)

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
                runs = []
                for name, engine in self.engines.items():
                    if name == "pyiceberg" and mode == "merge-on-read":
                        continue  # PyIceberg writes copy-on-write only; its copy-on-write line stands
                    case = Case("growth", f"{rows:,} rows, {mode}", name, rows, batch.changes, mode=mode)
                    if name == "pyiceberg" and (skip := self.skip_pyiceberg(rows)):
                        self.skipped(case, skip)
                        continue
                    runs.append((case, engine, f"growth_{rows}_{mode[:3]}_{name.replace('-', '_')}"))
                props = MOR if mode == "merge-on-read" else COW
                self.run_on_fresh_tables(runs, base, props, batch, s.growth_reps)

    def scenario_large(self) -> None:
        """1M changes into 16M rows, both modes: one run each, no warm-up run (each is minutes long)."""
        s = self.sizes
        if not s.large_rows:
            self.log("scenario large: not in --quick")
            return
        self.log(
            f"scenario large: {s.large_changes:,} changes into {s.large_rows:,} rows, {s.large_reps} run(s)"
        )
        base = self.base(s.large_rows)
        batch = self.batch(s.large_changes, s.large_rows, batch_no=2)
        for mode, props in (("merge-on-read", MOR), ("copy-on-write", COW)):
            runs = []
            for name, engine in self.engines.items():
                case = Case(
                    "large", f"{s.large_rows:,} rows, {mode}", name, s.large_rows, batch.changes, mode=mode
                )
                if name == "pyiceberg":
                    self.skipped(
                        case, self.skip_pyiceberg(s.large_rows) or "PyIceberg writes copy-on-write only"
                    )
                    continue
                runs.append((case, engine, f"large_{mode[:3]}_{name.replace('-', '_')}"))
            self.run_on_fresh_tables(runs, base, props, batch, s.large_reps, warmups=0)

    def scenario_small(self) -> None:
        """Batches in sequence, each applied to every engine's table before the next (the order
        alternating per batch, as in run_side_by_side), then compaction of lakeloader's table."""
        s = self.sizes
        self.log(
            f"scenario small: {s.small_batches} x {s.small_changes:,} changes into {s.small_rows:,} rows "
            "(merge-on-read), then compaction"
        )
        base = self.base(s.small_rows)
        batches = [
            self.batch(s.small_changes, s.small_rows, batch_no=100 + i) for i in range(s.small_batches)
        ]
        runs = []
        for name, engine in self.engines.items():
            case = Case("small", f"{s.small_batches} batches, per batch", name, s.small_rows, s.small_changes)
            if name == "pyiceberg":
                case.note = "(copy-on-write)"
                if skip := self.skip_pyiceberg(s.small_rows):
                    self.skipped(case, skip)
                    continue
            label = f"small_{name.replace('-', '_')}"
            engine.create(label, base, MOR)
            runs.append((case, engine, label))
        for i, batch in enumerate(batches):
            for case, engine, label in runs if i % 2 == 0 else reversed(runs):
                applied, peak = self.timed(engine, label, batch, f"small-{i}")
                case.add_run(applied, peak)
        for case, engine, label in runs:
            case.note = (case.note + f" total {sum(case.seconds):.1f}s").strip()
            if self.args.verify:
                case.checksum = engine.checksum(label)
            self.cases.append(case)
            print(case.row(), flush=True)
            if case.engine == "lakeloader":
                self.compaction(engine, label)

    def compaction(self, engine: Any, label: str) -> None:
        name = self.tables.qualified(label)
        query = f"SELECT status, count(*), round(sum(amount), 2) FROM {name} GROUP BY status"
        before_files = engine.files(label)
        before = self.time_query(query)
        started = time.perf_counter()
        self.tables.compact(label)
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
