"""`drain_table` with its ledger on the suite's moto server, as a process of its own so that a test can
kill it at a crash point (LAKELOADER_CRASH_AT), as Glue kills a job. The raw objects the ledger names
are read from the test's raw folder (on AWS: s3://).

    python -m tests.faults.drain_process CONFIG RAW_DIR LEDGER_TABLE RUNS_TABLE TABLE_ID
"""

from __future__ import annotations

import sys
from pathlib import Path

import boto3

from lakeloader.config import load_config
from lakeloader.control.ledger import Ledger
from lakeloader.jobs import drain
from lakeloader.spark.inputs import InputFile
from lakeloader.spark.session import SparkSettings, build_session
from lakeloader_dev.jars import spark_conf


def main(config_path: str, raw_dir: str, ledger_table: str, runs_table: str, table_id: str) -> int:
    config = load_config(config_path)
    drain._input_file = lambda obj, raw_root: InputFile(  # noqa: SLF001 - where the bytes live, only
        name=obj.key, uri=str(Path(raw_dir) / obj.key), size=obj.size or 0, version=obj.etag or ""
    )
    settings = SparkSettings(
        warehouse=config.warehouse, app_name="lakeloader-fault-drain", extra_conf=spark_conf()
    )
    spark = build_session(settings)
    ledger = Ledger(boto3.client("dynamodb"), ledger_table, runs_table)
    result = drain.drain_table(
        spark, config.table(table_id), ledger, catalog=settings.catalog, raw_root="s3://raw/", cid="fault"
    )
    return 0 if result.status == "ok" else 1


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
