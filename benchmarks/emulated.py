"""Glue and S3 on the embedded emulator, for the harnesses that measure what local disk hides."""

from __future__ import annotations

import os
from contextlib import ExitStack

from benchmarks import data
from benchmarks.engines import DB

RAW_BUCKET, WAREHOUSE_BUCKET = "bench-raw", "bench-warehouse"
WAREHOUSE = f"s3://{WAREHOUSE_BUCKET}/warehouse/"


class EmulatedAws:
    """The emulator started (stopped by `stack`), this process pointed at it, the raw and warehouse
    buckets and the Glue database of the benchmark's tables created."""

    def __init__(self, stack: ExitStack):
        import boto3

        from lakeloader_dev.emulator import Emulator, aws_env

        emulator = stack.enter_context(Emulator())
        os.environ.update(aws_env(emulator.endpoint))
        self.s3 = boto3.client("s3")
        for bucket in (RAW_BUCKET, WAREHOUSE_BUCKET):
            self.s3.create_bucket(Bucket=bucket)
        boto3.client("glue").create_database(DatabaseInput={"Name": DB})

    def upload(self, batch: data.Batch) -> list:
        """The batch's files put in the raw bucket, as lakeloader's inputs."""
        from lakeloader.spark.inputs import InputFile

        files = []
        for path in batch.files:
            key = f"cdc/{path.parent.name}/{path.name}"
            self.s3.upload_file(str(path), RAW_BUCKET, key)
            files.append(InputFile(key, f"s3://{RAW_BUCKET}/{key}", path.stat().st_size, "v1"))
        return files
