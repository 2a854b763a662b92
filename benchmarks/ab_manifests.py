"""A/B of a stage's later batches: lakeloader's manifest merging against Iceberg's default.

    python -m benchmarks.ab_manifests --rows 100000 --changes 1000 --batches 60

Two merge-on-read tables from one base, in one session, with tombstones: one as lakeloader creates it
(`commit.manifest.min-count-to-merge` 16, its side table 8), one set back to Iceberg's default (100)
after its first batch. Batches come in sequence order with no maintenance between them, as a stage's
do between two `lakeloader maintain` runs, each applied to both tables, alternating which goes first.
Prints the median seconds per batch for each window of 10 batches, the manifests each table ends
with, and then 3 more batches after compacting both (rewrite_data_files and
rewrite_position_delete_files): what is left of the growth once the delete files are gone.
See benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import data
from benchmarks.engines import MOR, SparkTables, input_files, table_config

VARIANTS = ("lakeloader", "iceberg default")
MERGE_AT = "commit.manifest.min-count-to-merge"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab_manifests", description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--batches", type=int, default=60)
    args = parser.parse_args(argv)

    from lakeloader.engine import apply_batch, tombstones
    from lakeloader.spark.session import CATALOG, SparkSettings, build_session
    from lakeloader_dev.jars import spark_conf

    work = Path(tempfile.mkdtemp(prefix="lakeloader-ab-manifests-"))
    spark = build_session(SparkSettings(warehouse=str(work / "wh"), app_name="ab", extra_conf=spark_conf()))
    tables = SparkTables(spark)
    base = data.write_base(work / "base", args.rows)
    configs, names = {}, {}
    seconds: dict[str, list[float]] = {v: [] for v in VARIANTS}

    def apply(variant: str, batch: data.Batch, run_id: str) -> float:
        started = time.perf_counter()
        apply_batch(spark, configs[variant], input_files(batch, "v1"), catalog=CATALOG, run_id=run_id)
        return time.perf_counter() - started

    try:
        first = data.write_batch(work / "cdc-first", args.changes, args.rows, batch_no=399)
        for i, variant in enumerate(VARIANTS):
            label = f"ab_manifests_{i}"
            configs[variant], names[variant] = table_config(label, MOR), tables.qualified(label)
            tables.create(label, base, MOR, configs[variant])
            apply(variant, first, "first")  # creates the side table
            if variant == "iceberg default":
                for name in (names[variant], names[variant] + tombstones.SUFFIX):
                    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('{MERGE_AT}'='100')")
        print(f"\n{args.changes:,} changes into {args.rows:,} rows, merge-on-read, {args.batches} batches")
        print("median seconds per batch, per 10 batches:")
        for n in range(args.batches):
            batch = data.write_batch(work / f"cdc-{n}", args.changes, args.rows, batch_no=400 + n)
            for variant in VARIANTS if n % 2 == 0 else reversed(VARIANTS):
                seconds[variant].append(apply(variant, batch, f"b{n}"))
            if n % 10 == 9:
                window = "  ".join(f"{v} {statistics.median(s[-10:]):.3f}s" for v, s in seconds.items())
                print(f"  batches {n - 8:>3}-{n + 1:<3}  {window}", flush=True)
        for variant, name in names.items():
            manifests = [
                spark.sql(f"SELECT count(*) FROM {t}.manifests").first()[0]
                for t in (name, name + tombstones.SUFFIX)
            ]
            print(f"  {variant}: manifests {manifests[0]} (table), {manifests[1]} (tombstones)")
        for config in configs.values():
            tables.compact(config.target.table)
        compacted: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for n in range(args.batches, args.batches + 3):
            batch = data.write_batch(work / f"cdc-{n}", args.changes, args.rows, batch_no=400 + n)
            for variant in VARIANTS if n % 2 == 0 else reversed(VARIANTS):
                compacted[variant].append(apply(variant, batch, f"b{n}"))
        window = "  ".join(f"{v} {statistics.median(s):.3f}s" for v, s in compacted.items())
        print(f"  3 batches after compacting both tables  {window}")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
