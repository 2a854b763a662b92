"""`make demo`: the real loop on the embedded AWS emulator; `make demo-local`: local Spark only.

Emulator demo (default): start the emulator, deploy the CDK app to it, land
examples/raw in the raw bucket in two waves (full loads, then the CDC batches), let
S3 notifications invoke the arrival Lambda, which starts Glue runs of the deployed
script on local Spark; then print each Iceberg table (read through the Glue catalog)
and the run history, and tear everything down.

`--local`: the sample files are copied into a local raw zone in the same two waves,
each wave one `lakeloader run` (no AWS APIs at all).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from lakeloader.config import load_config
from lakeloader.control.contract import new_run_id
from lakeloader.jobs.lineage import LineageLog, TableNaming
from lakeloader.jobs.load import assign_inputs, run_tables, summary_table
from lakeloader.spark.inputs import batch_order
from lakeloader.spark.progress import stderr_progress
from lakeloader.spark.session import SparkSettings, build_session
from lakeloader_dev.emulator.demo import show_lineage
from lakeloader_dev.jars import spark_conf


def _show(spark, catalog: str, config) -> None:
    for table in config.tables:
        name = f"{catalog}.{table.target.database}.{table.target.table}"
        keys = ", ".join(f"`{k}`" for k in table.keys)
        print(f"\n{table.qualified_target}")
        spark.sql(f"SELECT * FROM {name} ORDER BY {keys}").show(truncate=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="config/tables.yaml")
    parser.add_argument("--workdir", default=".lakeloader/demo")
    parser.add_argument("--local", action="store_true", help="local Spark only, no emulator")
    args = parser.parse_args(argv)
    if not args.local:
        from lakeloader_dev.emulator.demo import run_demo

        return run_demo(args.config)

    config = load_config(args.config)
    workdir = Path(args.workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    raw_root = workdir / "raw"
    config = config.model_copy(update={"raw_root": str(raw_root), "warehouse": str(workdir / "warehouse")})
    # Wave 1: each table's first file (its full load or snapshot); wave 2: the changes after it.
    samples = assign_inputs(load_config(args.config), config.tables, None)
    first = [batch_order(files)[0] for files in samples.values() if files]
    rest = [f for files in samples.values() for f in batch_order(files)[1:]]
    waves = [("full loads", first), ("CDC batches", rest)]

    settings = SparkSettings(warehouse=config.warehouse, app_name="lakeloader-demo", extra_conf=spark_conf())
    stderr_progress("starting Spark (local, Iceberg warehouse on disk)")
    spark = build_session(settings)
    lineage = LineageLog(
        workdir / "lineage.jsonl", TableNaming.hadoop_catalog(config.warehouse), config.raw_root
    )
    failed = False
    for title, files in waves:
        print(f"\n=== {title}: {len(files)} file(s) land in the raw zone ===")
        for file in files:
            target = raw_root / file.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file.uri, target)
            print(f"  + {file.name}")
        tables = config.select(None)
        results = run_tables(
            spark,
            tables,
            assign_inputs(config, tables, None),
            catalog=settings.catalog,
            run_id=new_run_id(),
            lineage=lineage,
        )
        print(summary_table(results))
        failed = failed or any(r.status == "failed" for r in results)
        _show(spark, settings.catalog, config)
    spark.stop()
    show_lineage(lineage.path, config.tables[0].id)
    print(
        f"\nDone. Warehouse: {config.warehouse}. Query it with:\n"
        f"  lakeloader sql --config {args.config} --warehouse {config.warehouse} "
        f'"SELECT * FROM crm.customers"'
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
