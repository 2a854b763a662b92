"""What finding an unreadable file costs (lakeloader.engine.unreadable), side by side in one session.

    python -m benchmarks.unreadable [--files 1000] [--rows 100]

Three reads of one batch of small DMS Parquet files on local disk, as the engine reads a batch
(`cdc.read_changes`): all files good; then one file truncated, the read failing; then the finder's
bisection over that batch. A good batch runs no finder: its cost there is nothing by construction
(the finder runs only in the read's `except`). Prints seconds and Spark jobs for each.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lakeloader.config import TableConfig
from lakeloader.engine import cdc
from lakeloader.engine.unreadable import find_unreadable
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import SparkSettings, build_session

SCHEMA = pa.schema(
    [("Op", pa.string()), ("id", pa.int64()), ("name", pa.string()), ("last_update_time", pa.timestamp("us"))]
)


def write_batch(folder: Path, files: int, rows: int) -> None:
    for n in range(files):
        batch = [
            {"Op": "U", "id": n * rows + i, "name": f"n{i}", "last_update_time": 1_700_000_000_000_000 + n}
            for i in range(rows)
        ]
        pq.write_table(pa.Table.from_pylist(batch, schema=SCHEMA), folder / f"{20261101000000 + n}.parquet")


def jobs_so_far(spark) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup())


def timed(spark, label: str, action) -> None:
    jobs, started = jobs_so_far(spark), time.perf_counter()
    outcome = action()
    seconds, count = time.perf_counter() - started, jobs_so_far(spark) - jobs
    print(f"{label:<44} {seconds:7.2f} s {count:5} Spark jobs  {outcome}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=100)
    args = parser.parse_args()
    from lakeloader_dev.jars import spark_conf

    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw"
        (raw / "src").mkdir(parents=True)
        write_batch(raw / "src", args.files, args.rows)
        spark = build_session(SparkSettings(warehouse=str(Path(tmp) / "wh"), extra_conf=spark_conf()))
        table = TableConfig.model_validate(
            {
                "id": "bench.unreadable",
                "source": {"prefix": "src/", "format": "parquet", "cdc": "dms"},
                "target": {"database": "bench", "table": "unreadable"},
                "keys": ["id"],
            }
        )
        files = list_inputs(str(raw), "src/")
        print(f"{len(files)} files of {args.rows} rows; {spark.sparkContext.master}")
        cdc.read_changes(spark, table, files[:10])  # the JVM warmed up first, for every case alike
        good = lambda: f"{cdc.read_changes(spark, table, files).count:,} rows"  # noqa: E731
        timed(spark, "read, all good (no finder runs)", good)
        bad = raw / files[len(files) // 3].name
        whole = bad.read_bytes()
        bad.write_bytes(whole[: len(whole) // 2])
        files = list_inputs(str(raw), "src/")

        def failing_read() -> str:
            try:
                cdc.read_changes(spark, table, files)
            except Exception as exc:  # the read error the finder starts from
                return type(exc).__name__
            return "no error?"

        timed(spark, "read, one file truncated (fails)", failing_read)
        timed(spark, "finder: bisect the batch", lambda: list(find_unreadable(spark, table, files)))
        spark.stop()


if __name__ == "__main__":
    main()
