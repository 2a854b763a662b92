"""A/B of the catalogs' manifest cache (contract.CATALOG_PROPERTIES): on, or Iceberg's default.

    python -m benchmarks.ab_manifest_cache --rows 100000 --changes 1000 --batches 24 [--s3]

Two catalogs over one warehouse in one session, the same but for `io.manifest.cache-enabled`, each
with its own table from one base. Batches come in sequence order, as a stage's do, each applied to
both tables, alternating which goes first. Local disk by default (a manifest read costs little there);
`--s3`: the Glue catalog and S3FileIO against the embedded emulator, so every manifest read is an
S3 GET over HTTP, as on AWS (whose GETs are slower than a local emulator's). Prints the median
seconds per batch after the warm-up batches, and the ratio. See benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from benchmarks import data
from benchmarks.emulated import WAREHOUSE, EmulatedAws
from benchmarks.engines import DB, MOR, input_files, table_config

CACHED = "llcache"  # the second catalog's name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab_manifest_cache", description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--batches", type=int, default=24)
    parser.add_argument("--warmups", type=int, default=3, help="first batches left out of the medians")
    parser.add_argument("--s3", action="store_true", help="Glue + S3 on the embedded emulator")
    args = parser.parse_args(argv)

    from lakeloader.control.contract import MANIFEST_CACHE
    from lakeloader.engine import apply_batch
    from lakeloader.engine.schema import create_table
    from lakeloader.spark.session import CATALOG, SparkSettings, build_session, local_conf
    from lakeloader_dev.jars import spark_conf

    work = Path(tempfile.mkdtemp(prefix="lakeloader-ab-manifest-cache-"))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, work, ignore_errors=True)
        aws = EmulatedAws(stack) if args.s3 else None
        warehouse = WAREHOUSE if aws else str(work / "wh")
        settings = SparkSettings(warehouse=warehouse, app_name="ab-manifest-cache", extra_conf=spark_conf())
        prefix = f"spark.sql.catalog.{CATALOG}"
        conf = dict(settings.extra_conf)
        for key, value in local_conf(settings).items():  # the second catalog: the same settings
            if key == prefix or key.startswith(prefix + "."):
                conf[f"spark.sql.catalog.{CACHED}" + key[len(prefix) :]] = value
        conf[f"{prefix}.{MANIFEST_CACHE}"] = "false"
        conf[f"spark.sql.catalog.{CACHED}.{MANIFEST_CACHE}"] = "true"
        spark = build_session(replace(settings, extra_conf=conf))
        stack.callback(spark.stop)

        variants = {"iceberg default": CATALOG, "cached": CACHED}
        configs = {}
        base = data.write_base(work / "base", args.rows)
        for variant, catalog in variants.items():
            label = f"ab_manifest_cache_{catalog}"
            configs[variant] = table_config(label, MOR)
            rows = spark.read.parquet(*[str(p) for p in base])
            create_table(spark, f"{catalog}.{DB}.{label}", configs[variant], rows)
            rows.writeTo(f"{catalog}.{DB}.{label}").append()
        seconds: dict[str, list[float]] = {v: [] for v in variants}
        where = "Glue + S3 on the emulator" if args.s3 else "local disk"
        print(f"\n{args.changes:,} changes into {args.rows:,} rows, merge-on-read, {where}")
        for n in range(args.batches):
            batch = data.write_batch(work / f"cdc-{n}", args.changes, args.rows, batch_no=600 + n)
            files = aws.upload(batch) if aws else input_files(batch, "v1")
            for variant in variants if n % 2 == 0 else reversed(variants):
                started = time.perf_counter()
                apply_batch(spark, configs[variant], files, catalog=variants[variant], run_id=f"b{n}")
                seconds[variant].append(time.perf_counter() - started)
        medians = {v: statistics.median(s[args.warmups :]) for v, s in seconds.items()}
        for variant, median in medians.items():
            print(f"  {variant:16s} {median:.3f}s a batch (median of {args.batches - args.warmups})")
        print(f"  cached ÷ iceberg default: {medians['cached'] / medians['iceberg default']:.2f}")
        checks = {
            v: spark.sql(f"SELECT count(*), sum(id) FROM {c}.{DB}.ab_manifest_cache_{c}").first()
            for v, c in variants.items()
        }
        print(
            "  same table from both" if len(set(map(tuple, checks.values()))) == 1 else f"  DIFFER {checks}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
