"""Snapshot benchmark: a full snapshot with a small share of its rows changed, applied by lakeloader's
`cdc: snapshot` (compare, then merge only the changed keys) beside a plain overwrite of the table
with the same snapshot, side by side in one process and one SparkSession.

    python -m benchmarks.snapshot --quick        # 1M rows, ~3 minutes on 2 cores
    python -m benchmarks.snapshot                # 16M rows, 1% changed (issue 41's case)

Both tables start from the same first snapshot (merge-on-read, format v2). Each repetition applies
the second snapshot with each engine once, the order alternating, then rolls both tables back to
the first (untimed). Reported per engine: median wall time, CPU-seconds of the driver JVM and this
process, their peak RSS (VmHWM, reset before each run), and what the commit wrote (data files, delete
files, rows, bytes) -- the overwrite rewrites every file; the snapshot path only the changed rows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.data import BASE_SCHEMA, INSERT_BASE, ROWS_PER_BASE_FILE, base_rows
from benchmarks.measure import PeakRss, machine

DAY1, DAY2 = "2026-11-01", "2026-11-02"
PROPERTIES = {
    "format-version": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}


def changed_part(part: pa.Table, every: int, part_no: int) -> pa.Table:
    """One part of the second snapshot: of every `every` rows, two get a new status, one is gone, and
    one new key arrives (so `4 / every` of the rows change)."""

    def position(ids: pa.Array) -> pa.Array:  # 0 .. every-1, spread over the key space
        slot = pc.bit_wise_and(pc.multiply(ids, 2654435761), 0xFFFFFFF)
        return pc.divide(slot, (0xFFFFFFF + every) // every)

    kept = part.filter(pc.not_equal(position(part["id"]), 1))
    updated = pc.is_in(position(kept["id"]), pa.array([2, 3], pa.int64()))
    status = pc.if_else(updated, pa.scalar("changed"), kept["status"])
    kept = kept.set_column(kept.schema.get_field_index("status"), "status", status)
    gone = part.num_rows - kept.num_rows
    start = INSERT_BASE + part_no * ROWS_PER_BASE_FILE
    new = base_rows(start, start + gone)
    return pa.concat_tables([kept, new.cast(BASE_SCHEMA)])


def write_snapshots(raw: Path, rows: int, every: int) -> None:
    for day in (DAY1, DAY2):
        folder = raw / "src" / day
        if (folder / "_SUCCESS").exists():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for part_no, start in enumerate(range(0, rows, ROWS_PER_BASE_FILE)):
            part = base_rows(start, min(rows, start + ROWS_PER_BASE_FILE))
            if day == DAY2:
                part = changed_part(part, every, part_no)
            pq.write_table(part.drop_columns(["last_update_time"]), folder / f"part-{part_no:05d}.parquet")
        (folder / "_SUCCESS").write_text("")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="1M rows instead of 16M")
    parser.add_argument("--rows", type=int, help="rows of each snapshot (default 16M; --quick 1M)")
    parser.add_argument("--changed-every", type=int, default=400, help="4 of every N rows change (400: 1%%)")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--workdir", help="keep data and tables here (default: a temp dir)")
    args = parser.parse_args()
    rows = args.rows or (1_000_000 if args.quick else 16_000_000)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="lakeloader-snapshot-bench-"))
    raw = work / "raw"

    from pyspark.sql import functions as F

    from lakeloader.config import TableConfig
    from lakeloader.engine import apply_batch, tombstones
    from lakeloader.iceberg import current_snapshot_id
    from lakeloader.spark.inputs import list_inputs
    from lakeloader.spark.session import CATALOG, SparkSettings, build_session
    from lakeloader_dev.jars import spark_conf

    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {message}", flush=True)

    log(f"writing two snapshots of {rows:,} rows under {raw} ({4 / args.changed_every:.2%} changed)")
    write_snapshots(raw, rows, args.changed_every)
    spark = build_session(
        SparkSettings(
            warehouse=str(work / "warehouse"),
            app_name="lakeloader-snapshot-bench",
            driver_memory=args.driver_memory,
            extra_conf=spark_conf(),
        )
    )
    rss = PeakRss({"jvm": spark.sparkContext._gateway.proc.pid, "py": os.getpid()})
    table = TableConfig.model_validate(
        {
            "id": "bench.snapshot",
            "source": {"prefix": "src/", "cdc": "snapshot"},
            "target": {"database": "bench", "table": "snapshot", "properties": PROPERTIES},
            "keys": ["id"],
        }
    )
    ours = f"{CATALOG}.bench.snapshot"
    plain = f"{CATALOG}.bench.overwrite"
    side = tombstones.side_table(ours, table)  # the first snapshot deletes nothing: no tombstones
    for name in (ours, plain, side):
        spark.sql(f"DROP TABLE IF EXISTS {name}")
    files = list_inputs(str(raw), "src/")
    first = [f for f in files if f"/{DAY1}/" in f"/{f.name}"]
    second = [f for f in files if f"/{DAY2}/" in f"/{f.name}"]

    log("loading the first snapshot into both tables (untimed)")
    apply_batch(spark, table, first, catalog=CATALOG, run_id="bench-base")
    props = ", ".join(f"'{k}' = '{v}'" for k, v in PROPERTIES.items())
    spark.read.parquet(str(raw / "src" / DAY1)).writeTo(plain).tableProperty("format-version", "2").create()
    spark.sql(f"ALTER TABLE {plain} SET TBLPROPERTIES ({props})")
    base = {name: current_snapshot_id(spark, name) for name in (ours, plain)}

    def snapshot_path() -> None:
        applied = apply_batch(
            spark, table, second, catalog=CATALOG, run_id=f"bench-{time.monotonic_ns()}", progress=log
        )
        assert applied.changes, "the second snapshot changed nothing"

    def overwrite() -> None:
        spark.read.parquet(str(raw / "src" / DAY2)).writeTo(plain).overwrite(F.lit(True))

    engines = {"lakeloader snapshot": (ours, snapshot_path), "plain overwrite": (plain, overwrite)}
    seconds: dict[str, list[float]] = {e: [] for e in engines}
    cpu: dict[str, list[float]] = {e: [] for e in engines}
    peaks: dict[str, dict[str, int]] = {e: {} for e in engines}
    written: dict[str, dict[str, str]] = {}
    for rep in range(args.reps):
        order = list(engines) if rep % 2 == 0 else list(reversed(engines))
        for engine in order:
            name, run = engines[engine]
            rss.reset()
            cpu0, t0 = rss.cpu_seconds(), time.perf_counter()
            run()
            seconds[engine].append(time.perf_counter() - t0)
            cpu[engine].append(rss.cpu_seconds() - cpu0)
            peaks[engine] = {k: max(v, peaks[engine].get(k, 0)) for k, v in rss.read().items()}
            summary = spark.sql(
                f"SELECT summary FROM {name}.snapshots ORDER BY committed_at DESC LIMIT 1"
            ).first()["summary"]
            written[engine] = summary
            log(f"{engine}: {seconds[engine][-1]:.1f} s")
            spark.sql(f"CALL {CATALOG}.system.rollback_to_snapshot('{name.split('.', 1)[1]}', {base[name]})")
            if name == ours:  # back to no tombstones, or the next run would find the keys buried
                spark.sql(f"DROP TABLE IF EXISTS {side}")
                spark.sql(f"REFRESH TABLE {name}")

    print()
    print(f"machine: {machine()}")
    print(
        f"{rows:,} rows, {4 / args.changed_every:.2%} changed, {args.reps} rep(s), "
        f"load {os.getloadavg()[0]:.1f}"
    )
    header = f"{'engine':<22}{'median s':>10}{'CPU s':>8}{'JVM MiB':>9}{'py MiB':>8}  written"
    print(header)
    for engine in engines:
        s = written[engine]
        wrote = (
            f"{s.get('added-data-files', '0')} data files ({int(s.get('added-records', 0)):,} rows, "
            f"{int(s.get('added-files-size', 0)) / 2**20:.1f} MiB), "
            f"{s.get('added-delete-files', '0')} delete files, "
            f"{s.get('deleted-data-files', '0')} data files removed"
        )
        print(
            f"{engine:<22}{statistics.median(seconds[engine]):>10.1f}{statistics.median(cpu[engine]):>8.1f}"
            f"{peaks[engine].get('jvm', 0):>9}{peaks[engine].get('py', 0):>8}  {wrote}"
        )
    ratio = statistics.median(seconds["lakeloader snapshot"]) / statistics.median(seconds["plain overwrite"])
    print(f"lakeloader snapshot / plain overwrite: {ratio:.2f}x time")
    spark.stop()


if __name__ == "__main__":
    main()
