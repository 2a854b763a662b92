"""The latest change of each key of a batch, as the MERGE applies it, and the deletes among them, which
leave the batch's tombstones (lakeloader.engine.tombstones)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lakeloader.config import TableConfig
from lakeloader.engine import cdc, partial, schema
from lakeloader.spark.columns import OP, find_column
from lakeloader.spark.sql import quote


def aligned(
    changes: DataFrame, table: TableConfig, target_schema: StructType, seq: list[str]
) -> tuple[DataFrame, dict[str, int]]:
    """The latest change of each key, the values its update left out filled in from the key's earlier
    changes (`partial.fill`), aligned with the table's columns; and `partial.fill`'s column map."""
    filled_changes, filled = partial.fill(changes, table, seq=seq)
    latest = cdc.latest_per_key(filled_changes, table.keys)
    extra = [OP, *partial.extra_columns(filled, with_source=bool(seq))]
    return schema.align(latest, target_schema, extra=extra), filled


def deletes(
    changes: DataFrame,
    latest: DataFrame,
    table: TableConfig,
    target_schema: StructType,
    seq: list[str],
    *,
    from_deleted_keys: bool,
) -> DataFrame:
    """The latest changes (`latest`, from `aligned`) that are deletes.

    `from_deleted_keys`: computed again from the changes of the deleted keys alone, semi-joined with
    their broadcast keys, rather than read from `latest`. For a large batch that is a second shuffle
    and sort of every change, since the MERGE computes `latest` too (1M changes with 10% deletes:
    benchmarks/RESULTS.md). A key's changes are all kept or all left out, so its latest change is
    the same either way.
    """
    if not from_deleted_keys:
        return latest.filter(F.col(OP) == "D")
    keys = [find_column(changes.columns, k) for k in table.keys]
    deleted = changes.filter(F.col(OP) == "D").select(
        *[F.col(quote(k)).alias(f"_ll_deleted{i}") for i, k in enumerate(keys)]
    )
    on = [F.col(quote(k)) == F.col(f"_ll_deleted{i}") for i, k in enumerate(keys)]
    of_deleted_keys = changes.join(F.broadcast(deleted), on=on, how="left_semi")
    return aligned(of_deleted_keys, table, target_schema, seq)[0].filter(F.col(OP) == "D")
