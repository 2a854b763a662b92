"""The one MERGE INTO of `mode: merge` (lakeloader.engine.merge), and running it in the commit that
records the batch; both ways of writing a batch (merge_without_commit_counts,
merge_with_commit_counts) end here."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession

from lakeloader.engine import partial
from lakeloader.engine.sequence import newer_sql
from lakeloader.iceberg.commit import Destination
from lakeloader.spark.columns import OP
from lakeloader.spark.progress import Progress
from lakeloader.spark.sql import in_lists, quote

# A classified source's column: what each change does (merge_without_commit_counts.classify).
ACTION = "_ll_action"

# Test seam: called with (spark, target table) right before the MERGE statement runs (after the
# classification, where there is one), so a test can commit a concurrent change there. None (always,
# outside tests) does nothing.
before_merge: Callable[[SparkSession, str], None] | None = None


def merge_sql(
    name: str,
    view: str,
    columns: list[str],
    keys: list[str],
    seq: list[str],
    filled: dict[str, int] | None = None,
    key_values: dict[str, list[str]] | None = None,
    *,
    classified: bool = True,
) -> str:
    """The one MERGE statement. It repeats the newer-than guard over the whole sequence tuple, so a
    commit landing between classification and MERGE is never undone. `filled`: lakeloader.engine.partial.

    `key_values`: SQL literals of every value a key column takes in the source. The redundant
    `t.key IN (...)` it adds changes no outcome, but lets Spark drop the target rows the batch does
    not touch before the join's shuffle instead of shuffling the whole table (benchmarks/RESULTS.md).
    `classified`: the source's ACTION column says what each change does; else (merge_with_commit_counts) its
    operation does, and the guard alone keeps an older change from touching a newer row.
    """
    on = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
    if key_values:
        on += " AND " + in_lists(key_values, qualifier="t.")
    newer = newer_sql([f"t.{quote(c)}" for c in seq], [f"s.{quote(c)}" for c in seq]) if seq else ""
    guard = f" AND {newer}" if seq else ""
    set_terms, value_terms = partial.merge_values(columns, filled or {}, seq)
    sets, values = ", ".join(set_terms), ", ".join(value_terms)
    cols = ", ".join(quote(c) for c in columns)
    if classified:
        delete, update, insert = (f"s.{quote(ACTION)} = '{a}'" for a in ("delete", "update", "insert"))
    else:
        delete, update = f"s.{quote(OP)} = 'D'", f"s.{quote(OP)} <> 'D'"
        insert = update
    return (
        f"MERGE INTO {name} t USING {quote(view)} s ON {on} "
        f"WHEN MATCHED AND {delete}{guard} THEN DELETE "
        f"WHEN MATCHED AND {update}{guard} THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND {insert} THEN INSERT ({cols}) VALUES ({values})"
    )


def run_merge(
    spark: SparkSession,
    target: Destination,
    source: DataFrame,
    progress: Progress,
    statement: Callable[[str], str],
) -> None:
    """The batch's one MERGE: `source` as a view, `statement(view)` run in the commit that records the
    batch (`before_merge` first, the test seam)."""
    view = f"lakeloader_batch_{uuid.uuid4().hex[:12]}"
    source.createOrReplaceTempView(view)
    try:
        sql = statement(view)
        if before_merge is not None:
            before_merge(spark, target.name)
        progress(f"merging into {target.name}")
        with target.committing():
            spark.sql(sql)
    finally:
        spark.catalog.dropTempView(view)
