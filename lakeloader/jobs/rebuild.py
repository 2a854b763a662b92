"""`lakeloader rebuild --table ID`: build a table again from every raw file still in the raw zone,
with the config as it is now (new keys, mode or partitioning).

The new table is built under a staging name (`<table>__rebuild`) by the same batch path as a run,
then replaces the table in ONE Iceberg commit (`CREATE OR REPLACE TABLE ... AS SELECT`): readers see
the old rows until that commit and the new rows after it, and a rebuild that fails leaves the table
as it was. The replaced rows stay in the table's history until `maintain` expires it. The commit
records the files it loaded, so the table's consumed files are exactly the rebuild's (the ledger or
the input log is reset to match by the caller); the tombstones are the rebuild's own.
docs/operate.md "Rebuild a table".
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pyspark.sql import SparkSession

from lakeloader import iceberg
from lakeloader.config import TableConfig
from lakeloader.control.contract import AUDIT_DATABASE, AUDIT_TABLE
from lakeloader.engine import apply_batch, table_layout_sql, tombstones
from lakeloader.iceberg import commit, s3_tables
from lakeloader.jobs.load import LoadResult
from lakeloader.spark.errors import LakeloaderError
from lakeloader.spark.inputs import InputFile
from lakeloader.spark.progress import Progress, no_progress
from lakeloader.spark.session import table_exists
from lakeloader.spark.sql import literal, qualified

STAGING_SUFFIX = "__rebuild"


class RebuildRefusedError(LakeloaderError):
    """The rebuild would lose or bring back data; the table is left as it is."""


def staging_config(table: TableConfig) -> TableConfig:
    """The table's config pointed at its staging table (same database)."""
    staged = table.target.model_copy(update={"table": table.target.table + STAGING_SUFFIX})
    return table.model_copy(update={"target": staged})


def erasures_on_record(spark: SparkSession, catalog: str, table_id: str) -> int:
    audit = qualified(catalog, AUDIT_DATABASE, AUDIT_TABLE)
    if not table_exists(spark, audit):
        return 0
    return spark.sql(f"SELECT count(*) AS n FROM {audit} WHERE table_id = {literal(table_id)}").first().n


def rebuild_table(
    spark: SparkSession,
    table: TableConfig,
    files: list[InputFile],
    *,
    catalog: str,
    run_id: str,
    progress: Progress = no_progress,
    raw_zone_erased: bool = False,
    before_publish: Callable[[], None] = lambda: None,
) -> LoadResult:
    """Build `table` from `files` and replace it in one commit; raises (the table untouched) on bad
    input, on no files at all, and on erasures on record unless `raw_zone_erased`.

    `before_publish` runs right before the replacing commit (a drain's lock check)."""
    erased = erasures_on_record(spark, catalog, table.id)
    if erased and not raw_zone_erased:
        raise RebuildRefusedError(
            f"table {table.id!r}: {erased} erasure(s) on record; the raw zone may still hold those "
            "subjects and a rebuild from it would bring them back. Remove them from the raw files, then "
            "rebuild with --raw-zone-erased"
        )
    if not files:
        raise RebuildRefusedError(
            f"table {table.id!r}: no raw files under {table.source.prefix!r} to rebuild from; "
            "the table is left as it is"
        )
    name = s3_tables.target_name(spark, catalog, table)
    staged = staging_config(table)  # beside the table: in its table bucket for an s3_tables table
    staging = s3_tables.target_name(spark, catalog, staged)
    _drop(spark, staging, staged)  # what a rebuild that died left behind
    progress(f"building {staging} from {len(files)} raw file(s)")
    started = time.monotonic()
    applied = apply_batch(spark, staged, files, catalog=catalog, run_id=run_id, progress=progress)
    result = LoadResult.of_batch(table.id, applied)
    columns = spark.table(staging).columns
    before_publish()
    progress(f"replacing {name} with {staging} in one commit")
    with iceberg.commit_properties(spark, commit.batch_summary(run_id, table.id, files)):
        spark.sql(
            f"CREATE OR REPLACE TABLE {name} {table_layout_sql(table, columns)} AS SELECT * FROM {staging}"
        )
    _replace_tombstones(spark, tombstones.side_table(name, table), tombstones.side_table(staging, staged))
    _drop(spark, staging, staged)
    result.snapshot_id = iceberg.current_snapshot_id(spark, name)
    result.notes.append(f"rebuilt from {len(files)} raw file(s)")
    if result.quality is not None and result.quality.quarantine_table:
        result.notes.append(f"rows the rebuild quarantined are in {result.quality.quarantine_table}")
    result.seconds = time.monotonic() - started
    return result


def _replace_tombstones(spark: SparkSession, side: str, staged_side: str) -> None:
    """The table's tombstones become the rebuild's: the deletes its raw files hold, and no others."""
    if table_exists(spark, staged_side):
        spark.sql(f"CREATE OR REPLACE TABLE {side} USING iceberg AS SELECT * FROM {staged_side}")
    else:
        s3_tables.drop_table(spark, side)


def _drop(spark: SparkSession, staging: str, staged: TableConfig) -> None:
    """Drop the staging table and its tombstones (not its quarantine table: rows a user may need)."""
    for name in (staging, tombstones.side_table(staging, staged)):
        s3_tables.drop_table(spark, name)


def reset_input_log(
    spark: SparkSession, catalog: str, table_id: str, files: list[InputFile], run_id: str
) -> None:
    """The input log of a rebuilt table: exactly the files the rebuild loaded (runs without a ledger)."""
    log = qualified(catalog, *commit.INPUT_LOG)
    if table_exists(spark, log):
        spark.sql(f"DELETE FROM {log} WHERE table_id = {literal(table_id)}")
    commit.log_inputs(spark, catalog, table_id, files, run_id)
