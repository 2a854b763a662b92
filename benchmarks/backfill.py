"""A backfill at scale: N objects already in the raw bucket, recorded by `lakeloader backfill` and
drained in bounded runs; prints each run's size and time and checks every object was applied once.

    python -m benchmarks.backfill                                  # 10,000 objects, 1,000 a run
    python -m benchmarks.backfill --objects 2000 --max-files-per-run 500

Real: the embedded emulator's S3 and DynamoDB over HTTP (the raw bucket, the ledger, the run
history), `operate.backfill`, `drain.drain_table` with its lock and ledger, Spark and Iceberg.
In place of a Glue run started by the sweep, the drain runs here, once per run, until nothing is
pending (what the sweep does, one start at a time); the job reads each object from a local copy
(the emulator's S3 has no s3a here), which `drain._input_file` maps to.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema(
    [("Op", pa.string()), ("id", pa.int64()), ("name", pa.string()), ("last_update_time", pa.timestamp("us"))]
)
PREFIX = "crm/backfill/"


def parquet_bytes(n: int) -> bytes:
    """One object: an insert of key n (DMS CDC file)."""
    row = {
        "Op": "I",
        "id": n,
        "name": f"n{n}",
        "last_update_time": datetime(2026, 1, 1) + timedelta(seconds=n),
    }
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([row], schema=SCHEMA), sink)
    return sink.getvalue()


def create_table(client, name: str, key: str, sort: str) -> str:
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}, {"AttributeName": sort, "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": key, "AttributeType": "S"},
            {"AttributeName": sort, "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--max-files-per-run", type=int, default=1000)
    args = parser.parse_args(argv)

    from lakeloader.cli import operate
    from lakeloader.cli.stage import DeployedStage
    from lakeloader.config import TableConfig
    from lakeloader.jobs import drain
    from lakeloader.spark.inputs import InputFile
    from lakeloader.spark.session import SparkSettings, build_session
    from lakeloader_dev.emulator import Emulator
    from lakeloader_dev.jars import spark_conf

    work = Path(tempfile.mkdtemp(prefix="lakeloader-backfill-"))
    with Emulator() as emu:
        os.environ["AWS_ENDPOINT_URL"] = emu.endpoint
        s3, dynamodb = boto3.client("s3"), boto3.client("dynamodb")
        s3.create_bucket(Bucket="raw")
        stage = DeployedStage(
            raw_bucket="raw",
            warehouse=str(work / "warehouse"),
            config_table="unused",
            ledger_table=create_table(dynamodb, "ledger", "table_id", "object_id"),
            runs_table=create_table(dynamodb, "runs", "table_id", "run_id"),
            ingest_job="unused",
            arrival_function="unused",
        )
        table = TableConfig.model_validate(
            {
                "id": "crm.backfill",
                "source": {"prefix": PREFIX, "format": "parquet", "cdc": "dms"},
                "target": {"database": "crm", "table": "backfill"},
                "keys": ["id"],
                "trigger": {"max_files_per_run": args.max_files_per_run},
            }
        )

        started = time.monotonic()
        local = work / "raw"
        (local / PREFIX).mkdir(parents=True)

        def land(n: int) -> None:
            body, key = parquet_bytes(n), f"{PREFIX}part-{n:06d}.parquet"
            s3.put_object(Bucket="raw", Key=key, Body=body)
            (local / key).write_bytes(body)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(land, range(args.objects)))
        print(
            f"landed {args.objects:,} objects in the emulator's raw bucket: "
            f"{time.monotonic() - started:.1f} s"
        )

        started = time.monotonic()
        result = operate.backfill(stage, [table], [table.id], correlation_id="bench")
        print(f"backfill: {result.describe().strip()} ({time.monotonic() - started:.1f} s)")

        drain._input_file = lambda obj, raw_root: InputFile(  # noqa: SLF001 - the bytes' local copy
            name=obj.key, uri=str(local / obj.key), size=obj.size or 0, version=obj.etag or ""
        )
        settings = SparkSettings(
            warehouse=stage.warehouse, app_name="lakeloader-backfill", extra_conf=spark_conf()
        )
        spark = build_session(settings)
        ledger = stage.ledger()
        runs = []
        while ledger.has_pending(table.id):
            started = time.monotonic()
            run = drain.drain_table(
                spark, table, ledger, catalog=settings.catalog, raw_root="s3://raw/", cid="bench"
            )
            runs.append((run.files, time.monotonic() - started))
            print(
                f"run {len(runs)}: {run.status}, {run.files:,} files, {run.inserted:,} rows, "
                f"{runs[-1][1]:.1f} s",
                flush=True,
            )
            if run.status != "ok":
                print(f"run failed: {run.error}", file=sys.stderr)
                return 1

        objects = ledger.objects(table.id)
        name = f"{settings.catalog}.crm.backfill"
        rows, keys = spark.sql(f"SELECT count(*) AS n, count(DISTINCT id) AS k FROM {name}").first()
        once = (
            len(objects) == args.objects
            and {o.status for o in objects} == {"done"}
            and {o.attempts for o in objects} == {1}
            and rows == keys == args.objects
        )
        print(
            f"{len(runs)} runs, files per run {[f for f, _ in runs]}; "
            f"{sum(s for _, s in runs):.1f} s draining; "
            f"ledger: {len(objects):,} objects all done, attempts {sorted({o.attempts for o in objects})}; "
            f"table: {rows:,} rows, {keys:,} keys -> {'every object applied once' if once else 'MISMATCH'}"
        )
        spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    return 0 if once else 1


if __name__ == "__main__":
    raise SystemExit(main())
