"""`make demo` on local Spark: the sample full loads land and merge, then the CDC batches.

Files are copied from examples/raw into a fresh raw zone in two waves, as an
exporter would deliver them, and each wave is one `lakeloader run`.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from lakeloader.config import load_config
from lakeloader.inputs import batch_order
from lakeloader.runner import assign_inputs, new_run_id, run_tables, stderr_progress, summary_table
from lakeloader.spark import SparkSettings, build_session


def _show(spark, catalog: str, config) -> None:
    for table in config.tables:
        name = f"{catalog}.{table.target.database}.{table.target.table}"
        keys = ", ".join(f"`{k}`" for k in table.keys)
        print(f"\n{table.qualified_target}")
        spark.sql(f"SELECT * FROM {name} ORDER BY {keys}").show(truncate=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="config/tables.yaml")
    parser.add_argument("--workdir", default=".lakeloader/demo")
    args = parser.parse_args(argv)

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

    settings = SparkSettings(warehouse=config.warehouse, app_name="lakeloader-demo")
    stderr_progress("starting Spark (local, Iceberg warehouse on disk)")
    spark = build_session(settings)
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
            spark, tables, assign_inputs(config, tables, None), catalog=settings.catalog, run_id=new_run_id()
        )
        print(summary_table(results))
        failed = failed or any(r.status == "failed" for r in results)
        _show(spark, settings.catalog, config)
    spark.stop()
    print(
        f"\nDone. Warehouse: {config.warehouse}. Query it with:\n"
        f"  lakeloader sql --config {args.config} --warehouse {config.warehouse} "
        f'"SELECT * FROM crm.customers"'
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
