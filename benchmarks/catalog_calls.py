"""The AWS requests one batch makes: Glue calls and S3 requests, by kind, on the embedded emulator.

    python -m benchmarks.catalog_calls --rows 100000 --changes 1000 --batches 4 [--no-manifest-cache]

On AWS each is a round trip (tens of milliseconds), which a laptop run on local disk never shows.
A table in the Glue catalog with S3FileIO, as the deployed jobs use, and a stage's batches in order;
prints the counts of each batch after the first two (the first creates the side table), then, for
the last batch, the requests in the order the emulator served them, with the batch's progress
messages in between. The counts do not depend on timing; the order between the batch and its
tombstones' append (a thread of its own) does. See benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import collections
import logging
import re
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from benchmarks import data
from benchmarks.emulated import RAW_BUCKET, WAREHOUSE, WAREHOUSE_BUCKET, EmulatedAws
from benchmarks.engines import DB, MOR, table_config

COLOURS = re.compile(r"\x1b\[[0-9;]*m")
REQUEST = re.compile(r'"(\w+) (\S+) HTTP')


def kind(line: str) -> str:
    """A request as its kind: Glue operations with the table, S3 requests with the file's role."""
    line = COLOURS.sub("", line)
    match = REQUEST.search(line)
    if match is None:
        return line
    method, path = match.groups()
    path = path.split("?")[0]
    if path == "/":
        return ""  # a Glue call: counted by its operation instead
    path = re.sub(r"/(data)/.*", r"/\1/<data file>", path)
    path = re.sub(r"/metadata/snap-[^/]+$", "/metadata/<manifest list>", path)
    path = re.sub(r"/metadata/[^/]+\.metadata\.json$", "/metadata/<table metadata>", path)
    path = re.sub(r"/metadata/[^/]+\.avro$", "/metadata/<manifest>", path)
    path = re.sub(r"^/" + RAW_BUCKET + r"/.+", f"/{RAW_BUCKET}/<raw file>", path)
    return f"S3 {method} {path.replace(f'/{WAREHOUSE_BUCKET}/warehouse/{DB}.db/', '')}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.catalog_calls", description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument(
        "--no-manifest-cache", action="store_true", help="Iceberg's default: every scan reads its manifests"
    )
    args = parser.parse_args(argv)

    from moto.core.responses import BaseResponse

    from lakeloader.control.contract import MANIFEST_CACHE
    from lakeloader.engine import apply_batch
    from lakeloader.engine.schema import create_table
    from lakeloader.spark.session import CATALOG, SparkSettings, build_session
    from lakeloader_dev.jars import spark_conf

    served: list[str] = []

    class Served(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            served.append(record.getMessage())

    def call_action(self: BaseResponse) -> object:  # Glue's operation and table, which the log lacks
        if type(self).__name__ == "GlueResponse":
            table = self._get_param("Name") or (self._get_param("TableInput") or {}).get("Name")
            served.append(f"Glue {self._get_action()} {table}")
        return dispatch(self)

    work = Path(tempfile.mkdtemp(prefix="lakeloader-catalog-calls-"))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, work, ignore_errors=True)
        aws = EmulatedAws(stack)
        dispatch = BaseResponse.call_action  # as the emulator left it
        BaseResponse.call_action = call_action
        stack.callback(setattr, BaseResponse, "call_action", dispatch)
        werkzeug = logging.getLogger("werkzeug")
        werkzeug.setLevel(logging.INFO)
        werkzeug.addHandler(Served())
        conf = spark_conf()
        if args.no_manifest_cache:
            conf[f"spark.sql.catalog.{CATALOG}.{MANIFEST_CACHE}"] = "false"
        spark = build_session(SparkSettings(warehouse=WAREHOUSE, app_name="catalog-calls", extra_conf=conf))
        stack.callback(spark.stop)
        config = table_config("catalog_calls", MOR)
        name = f"{CATALOG}.{DB}.catalog_calls"
        rows = spark.read.parquet(*[str(p) for p in data.write_base(work / "base", args.rows)])
        create_table(spark, name, config, rows)
        rows.writeTo(name).append()
        print(f"\n{args.changes:,} changes into {args.rows:,} rows, merge-on-read, Glue + S3 on the emulator")
        for n in range(args.batches):
            batch = data.write_batch(work / f"cdc-{n}", args.changes, args.rows, batch_no=700 + n)
            files = aws.upload(batch)
            served.clear()
            started = time.perf_counter()
            apply_batch(
                spark,
                config,
                files,
                catalog=CATALOG,
                run_id=f"b{n}",
                progress=lambda message: served.append(f"-- {message}"),
            )
            seconds = time.perf_counter() - started
            kinds = [k for k in map(kind, served) if k and not k.startswith("-- ")]
            glue = sum(k.startswith("Glue ") for k in kinds)
            print(f"batch {n + 1}: {seconds:.2f}s, {glue} Glue calls, {len(kinds) - glue} S3 requests")
            if n < 2:
                continue
            for request, count in sorted(collections.Counter(kinds).items()):
                print(f"  {count:4d}  {request}")
        print("\nthe last batch, in the order served (repeats folded):")
        folded: list[list] = []
        for request in filter(None, map(kind, served)):
            if folded and folded[-1][0] == request:
                folded[-1][1] += 1
            else:
                folded.append([request, 1])
        for request, count in folded:
            print(f"  {request}" if request.startswith("-- ") else f"  {count:4d}  {request}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
