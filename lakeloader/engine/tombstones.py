"""Tombstones: a delete is remembered, so an older change delivered later cannot bring the row back.

Kept in the side table ``<database>.<table>__tombstones``, appended before the target's commit and
probed with the batch's keys. The rules, and why a side table: README "Deletes leave tombstones";
their purge and erasure: docs/quality_erase_maintain.md.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeloader import iceberg
from lakeloader.config import TableConfig
from lakeloader.engine.sequence import newer_sql
from lakeloader.spark import table_exists
from lakeloader.sql import qualified, quote

SUFFIX = "__tombstones"
RECORDED_AT = "_ll_recorded_at"
TOMB = "_ll_tomb"  # on the probe side: the key's newest tombstone, a struct of its sequence tuple


def _field(j: int) -> str:
    return f"s{j}"


def side_table(name: str, table: TableConfig) -> str:
    """The tombstone table of the target `name` (a table, or its audit branch): same catalog and database."""
    return qualified(iceberg.catalog_of(name), table.target.database, table.target.table + SUFFIX)


def enabled(table: TableConfig, seq: list[str]) -> bool:
    """Tombstones need an order to compare against: none without sequence columns."""
    return table.tombstones.enabled and table.mode in ("merge", "scd2") and bool(seq)


def _newest(spark: SparkSession, tomb: str, keys: list[str], seq: list[str], seq_types: list[T.DataType]):
    """The tombstone rows as (keys..., TOMB struct); a sequence column the side table lacks reads NULL."""
    held = {f.name.lower(): f.name for f in spark.table(tomb).schema.fields}
    elements = [
        (F.col(quote(held[s.lower()])) if s.lower() in held else F.lit(None)).cast(t).alias(_field(j))
        for j, (s, t) in enumerate(zip(seq, seq_types, strict=True))
    ]
    key_columns = [F.col(quote(held[k.lower()])).alias(k) for k in keys]
    return spark.table(tomb).select(*key_columns, F.struct(*elements).alias(TOMB))


def probe_side(
    spark: SparkSession, table: TableConfig, name: str, target: DataFrame, keys: list[str], seq: list[str]
) -> DataFrame:
    """`target` (merge.classify's probe side: `_ll_t_<i>` keys, `_ll_exists`, `_ll_tseq_<i>`) plus one
    row per tombstone, whose TOMB column holds its sequence tuple. Unchanged when there is none."""
    tomb = side_table(name, table)
    if not enabled(table, seq) or not table_exists(spark, tomb):
        return target
    aliases = [f"_ll_t_{i}" for i in range(len(keys))]
    types = [target.schema[f"_ll_tseq_{j}"].dataType for j in range(len(seq))]
    rows = _newest(spark, tomb, keys, seq, types).select(
        *[
            F.col(quote(k)).cast(target.schema[a].dataType).alias(a)
            for k, a in zip(keys, aliases, strict=True)
        ],
        F.col(TOMB),
    )
    blank = F.lit(None).cast(rows.schema[TOMB].dataType)
    return target.withColumn(TOMB, blank).unionByName(rows, allowMissingColumns=True)


def one_per_key(matched: DataFrame, n_keys: int) -> DataFrame:
    """Fold a key's target row and its tombstones (probe_side) into one row: the newest tombstone."""
    if TOMB not in matched.columns:
        return matched
    keys = [f"_ll_t_{i}" for i in range(n_keys)]
    return matched.groupBy(*keys).agg(*[F.max(c).alias(c) for c in matched.columns if c not in keys])


def buried(columns: list[str], incoming: list[str]) -> Column:
    """True where the key has a tombstone and the `incoming` tuple (quoted SQL) is not newer than it."""
    if TOMB not in columns:
        return F.lit(False)
    held = [f"{quote(TOMB)}.{quote(_field(j))}" for j in range(len(incoming))]
    return F.col(TOMB).isNotNull() & ~F.expr(newer_sql(held, incoming))


def lookup(
    spark: SparkSession,
    table: TableConfig,
    name: str,
    keys: list[str],
    seq: list[str],
    seq_types: list[T.DataType],
    batch_keys: DataFrame,
) -> DataFrame | None:
    """The newest tombstone (TOMB) of each of `batch_keys`' keys, or None when there are none (scd2)."""
    tomb = side_table(name, table)
    if not enabled(table, seq) or not table_exists(spark, tomb):
        return None
    rows = _newest(spark, tomb, keys, seq, seq_types).join(batch_keys, on=keys, how="left_semi")
    return rows.groupBy(*keys).agg(F.max(F.col(TOMB)).alias(TOMB))


def record(
    spark: SparkSession, table: TableConfig, name: str, deletes: DataFrame, keys: list[str], seq: list[str]
) -> None:
    """Append the tombstones of `deletes` (rows with the key and sequence columns, as the target spells
    and types them). Creates the side table on first use and adds columns it lacks."""
    tomb = side_table(name, table)
    columns = list(dict.fromkeys([*keys, *seq]))
    fields = {f.name: f.dataType for f in deletes.schema.fields}
    if not table_exists(spark, tomb):
        spec = ", ".join(f"{quote(c)} {fields[c].simpleString()}" for c in columns)
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {tomb} ({spec}, {quote(RECORDED_AT)} timestamp) USING iceberg "
            "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='copy-on-write', "
            "'write.update.mode'='copy-on-write', 'write.merge.mode'='copy-on-write')"
        )
    held = {f.name.lower() for f in spark.table(tomb).schema.fields}
    missing = [c for c in columns if c.lower() not in held]
    if missing:  # a tie-breaker the target gained later
        spec = ", ".join(f"{quote(c)} {fields[c].simpleString()}" for c in missing)
        spark.sql(f"ALTER TABLE {tomb} ADD COLUMNS ({spec})")
    rows = deletes.select(*[F.col(quote(c)) for c in columns], F.current_timestamp().alias(RECORDED_AT))
    rows.writeTo(tomb).append()


def purge(spark: SparkSession, tomb: str, cutoff: str) -> dict[str, int]:
    """Delete the tombstones recorded before `cutoff` (a SQL timestamp literal); counts for the summary."""
    if not table_exists(spark, tomb):
        return {}
    expired = F.expr(f"{quote(RECORDED_AT)} < {cutoff}")
    counts = (
        spark.table(tomb)
        .agg(F.sum(expired.cast("int")).alias("purged"), F.count(F.lit(1)).alias("held"))
        .first()
    )
    purged = counts["purged"] or 0
    if purged:
        spark.sql(f"DELETE FROM {tomb} WHERE {quote(RECORDED_AT)} < {cutoff}")
    return {"tombstones_purged": purged, "tombstones_kept": counts["held"] - purged}
