"""A/B of what tombstones cost a stage: appended while classifying, appended after, or off.

    python -m benchmarks.ab_tombstones --rows 100000 --changes 1000 --batches 20 [--copy-on-write]

Three tables from one base, in one session: lakeloader as it is (a small batch appends its
tombstones on a thread while it is classified, tombstones.Ahead), the same with the append after
classification (the order before Ahead), and `tombstones: {enabled: false}`. Batches come in
sequence order, as a stage's do, each applied to all three tables, alternating which goes first,
so load drifts hit every variant. Prints the median seconds per batch after the warm-up batches,
and each variant's ratio to tombstones off. See benchmarks/RESULTS.md.
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
from benchmarks.engines import COW, MOR, SparkTables, input_files, table_config

VARIANTS = ("while classifying", "after", "off")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab_tombstones", description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--warmups", type=int, default=3, help="first batches left out of the medians")
    parser.add_argument("--copy-on-write", action="store_true")
    args = parser.parse_args(argv)

    from lakeloader.engine import apply_batch, tombstones
    from lakeloader.spark.session import CATALOG, SparkSettings, build_session
    from lakeloader_dev.jars import spark_conf

    work = Path(tempfile.mkdtemp(prefix="lakeloader-ab-tombstones-"))
    spark = build_session(SparkSettings(warehouse=str(work / "wh"), app_name="ab", extra_conf=spark_conf()))
    props = COW if args.copy_on_write else MOR
    tables = SparkTables(spark)
    base = data.write_base(work / "base", args.rows)
    configs = {}
    for i, variant in enumerate(VARIANTS):
        configs[variant] = table_config(f"ab_tombstones_{i}", props, tombstones=variant != "off")
        tables.create(f"ab_tombstones_{i}", base, props, configs[variant])
    ahead = tombstones.Ahead
    seconds: dict[str, list[float]] = {v: [] for v in VARIANTS}
    try:
        for n in range(args.batches):
            batch = data.write_batch(work / f"cdc-{n}", args.changes, args.rows, batch_no=400 + n)
            for variant in VARIANTS if n % 2 == 0 else reversed(VARIANTS):
                # "after": no Ahead, so merge.write appends from the classified rows once they exist
                tombstones.Ahead = ahead if variant != "after" else (lambda *_args: None)
                started = time.perf_counter()
                apply_batch(
                    spark, configs[variant], input_files(batch, "v1"), catalog=CATALOG, run_id=f"ab{n}"
                )
                seconds[variant].append(time.perf_counter() - started)
    finally:
        tombstones.Ahead = ahead
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    medians = {v: statistics.median(s[args.warmups :]) for v, s in seconds.items()}
    mode = "copy-on-write" if args.copy_on_write else "merge-on-read"
    print(f"\n{args.changes:,} changes into {args.rows:,} rows, {mode}, {args.batches} batches in order")
    print(f"median seconds per batch after the first {args.warmups}, and ÷ tombstones off:")
    for variant, median in medians.items():
        print(f"  {variant:<18} {median:6.3f}s  {median / medians['off']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
