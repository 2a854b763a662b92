"""A/B of lakeloader's classify step: the left join it used to do vs the probe join it does now.

    python -m benchmarks.ab_classify --rows 4000000 --changes 10000 --reps 3

Both variants run in one session, alternating within each repetition (so load drifts hit both),
on identical tables rolled back to the same base snapshot before every run. Prints wall and CPU
seconds (driver JVM + this process) per run and the medians. See benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import data
from benchmarks.engines import MOR, LakeloaderEngine, SparkTables
from benchmarks.measure import PeakRss


def left_join_classify(spark: Any, name: str, batch: Any, table: Any, seq: list[str], **_probe: Any) -> Any:
    """`engine.merge_without_commit_counts.classify` before the probe join: batch LEFT JOIN all target
    keys (it takes none of the probe's arguments)."""
    from pyspark.sql import functions as F

    from lakeloader.engine.merge_statement import ACTION
    from lakeloader.engine.sequence import newer_sql
    from lakeloader.spark.columns import OP, find_column
    from lakeloader.spark.sql import quote

    keys = [find_column(batch.columns, k) for k in table.keys]
    target_cols = [F.col(k).alias(f"_ll_t_{i}") for i, k in enumerate(keys)]
    target_cols.append(F.lit(True).alias("_ll_exists"))
    held = [f"_ll_tseq_{i}" for i in range(len(seq))]
    target_cols.extend(F.col(c).alias(h) for c, h in zip(seq, held, strict=True))
    target = spark.table(name).select(*target_cols)
    condition = [F.col(k) == F.col(f"_ll_t_{i}") for i, k in enumerate(keys)]
    joined = batch.join(target, on=condition, how="left")
    newer = F.expr(newer_sql([quote(h) for h in held], [quote(c) for c in seq])) if seq else F.lit(True)
    exists = F.col("_ll_exists").isNotNull()
    is_delete = F.col(OP) == "D"
    action = (
        F.when(is_delete & exists & newer, "delete")
        .when(is_delete, "skip")
        .when(~exists, "insert")
        .when(newer, "update")
        .otherwise("skip")
    )
    return joined.withColumn(ACTION, action).drop(
        *[c for c in joined.columns if c.startswith("_ll_t")], "_ll_exists"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab_classify", description=__doc__)
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--data-dir", help="reuse generated parquet data from here")
    args = parser.parse_args(argv)

    from lakeloader.engine import merge_without_commit_counts
    from lakeloader.spark.session import SparkSettings, build_session
    from lakeloader_dev.jars import spark_conf

    work = Path(tempfile.mkdtemp(prefix="lakeloader-ab-"))
    data_dir = Path(args.data_dir) if args.data_dir else work / "data"
    spark = build_session(
        SparkSettings(warehouse=str(work / "wh"), app_name="ab", driver_memory="4g", extra_conf=spark_conf())
    )
    rss = PeakRss({"jvm": spark.sparkContext._gateway.proc.pid, "py": os.getpid()})
    engine = LakeloaderEngine(SparkTables(spark))
    base = data.write_base(data_dir / f"base-{args.rows}", args.rows)
    batch = data.write_batch(
        data_dir / f"cdc-{args.changes}-{args.rows}-1", args.changes, args.rows, batch_no=1
    )
    variants = {"left-join (old)": left_join_classify, "probe (new)": merge_without_commit_counts.classify}
    current = merge_without_commit_counts.classify
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        for mode, props in (("copy-on-write", {}), ("merge-on-read", MOR)):
            for i, _ in enumerate(variants):
                engine.create(f"ab_{mode[:3]}_{i}", base, props)
        for rep in range(args.reps + 1):  # rep 0 is the warm-up
            for mode in ("copy-on-write", "merge-on-read"):
                for i, (variant, classify) in enumerate(variants.items()):
                    label = f"ab_{mode[:3]}_{i}"
                    merge_without_commit_counts.classify = classify
                    engine.reset(label)
                    cpu, started = rss.cpu_seconds(), time.perf_counter()
                    engine.apply(label, batch, f"ab-{rep}")
                    wall, cpu = time.perf_counter() - started, rss.cpu_seconds() - cpu
                    print(f"run {rep} {mode:<14} {variant:<16} wall {wall:6.2f}s cpu {cpu:6.2f}s", flush=True)
                    if rep:
                        results.setdefault((mode, variant), []).append((wall, cpu))
    finally:
        merge_without_commit_counts.classify = current
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.changes:,} changes into {args.rows:,} rows; medians of {args.reps} runs")
    for (mode, variant), runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"  {mode:<14} {variant:<16} wall {wall:6.2f}s  cpu {cpu:6.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
