"""Print Iceberg tables of a Glue-catalog warehouse as JSON, read by a fresh local Spark.

    python -m lakeloader_dev.emulator.read_tables --warehouse s3://<curated>/warehouse/ \
        [--database-prefix lakeloader_dev_] crm.customers ...

One JSON object on stdout: {"<db>.<table>": [row, ...]}, keyed by the config's names; the table is
read from the Glue database ``<prefix><db>`` (a deployed stage's name for it). A subprocess on purpose: a test
process may already hold a SparkSession configured for another catalog, and the JVM
reads AWS_ENDPOINT_URL and the credentials from the environment at launch.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from lakeloader_dev.jvm import short_jvm_env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--database-prefix", default="", help="the stack's GlueDatabasePrefix output")
    parser.add_argument("tables", nargs="+", metavar="DB.TABLE")
    args = parser.parse_args(argv)

    from lakeloader.spark.session import SparkSettings, build_session
    from lakeloader_dev.jars import spark_conf

    settings = SparkSettings(
        warehouse=args.warehouse, app_name="lakeloader-read-tables", extra_conf=spark_conf()
    )
    spark = build_session(settings)
    result: dict[str, Any] = {}
    for name in args.tables:
        database, table = name.split(".", 1)
        database = f"{args.database_prefix}{database}"
        rows = spark.sql(f"SELECT * FROM {settings.catalog}.`{database}`.`{table}`").collect()
        result[name] = [row.asDict(recursive=True) for row in rows]
    spark.stop()
    print("\n" + json.dumps(result, default=str))
    return 0


def read_tables(
    warehouse: str, tables: list[str], env: dict[str, str] | None = None, database_prefix: str = ""
) -> dict[str, list[dict]]:
    """Run this module in a subprocess; returns {table: rows} (values as JSON gives them back)."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "lakeloader_dev.emulator.read_tables",
            "--warehouse",
            warehouse,
            f"--database-prefix={database_prefix}",
            *tables,
        ],
        capture_output=True,
        text=True,
        env={**(os.environ if env is None else env), **short_jvm_env(env or os.environ)},
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"reading {tables} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.exit(main())
