"""Tombstones: a delete is remembered, so an older change delivered later cannot bring the row back.

Kept in the side table ``<database>.<table>__tombstones``, appended before the target's commit and
probed with the batch's keys. The rules, and why a side table: README "Deletes leave tombstones";
their purge and erasure: docs/quality_erase_maintain.md.
"""

from __future__ import annotations

from pyspark import InheritableThread
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeloader import iceberg
from lakeloader.config import TableConfig
from lakeloader.control.contract import TOMBSTONES_SUFFIX
from lakeloader.engine.sequence import newer_sql
from lakeloader.spark.session import table_exists
from lakeloader.spark.sql import in_lists, qualified, quote, tblproperties

SUFFIX = TOMBSTONES_SUFFIX
# Copy-on-write (its rows are only appended, and purged by maintain), and few manifests: the skip
# check (iceberg.may_hold) plans every manifest of the side table before each batch, and with
# Iceberg's default every append left one of its own until 100 were merged -- 0.27 s at 99
# (benchmarks/RESULTS.md). Set at creation, and by maintain on a side table created before.
PROPERTIES = {
    "format-version": "2",
    "write.delete.mode": "copy-on-write",
    "write.update.mode": "copy-on-write",
    "write.merge.mode": "copy-on-write",
    "commit.manifest.min-count-to-merge": "8",
}
RECORDED_AT = "_ll_recorded_at"
TOMB = "_ll_tomb"  # lookup: the key's newest tombstone, a struct of its sequence tuple


def _field(j: int) -> str:
    return f"s{j}"


def side_table(name: str, table: TableConfig) -> str:
    """The tombstone table of the target `name` (a table, or its audit branch): same catalog and database."""
    return qualified(iceberg.catalog_of(name), table.target.database, table.target.table + SUFFIX)


def enabled(table: TableConfig, seq: list[str]) -> bool:
    """Tombstones need an order to compare against: none without sequence columns."""
    return table.tombstones.enabled and table.mode in ("merge", "scd2") and bool(seq)


def _newest(
    spark: SparkSession,
    tomb: str,
    keys: list[str],
    key_types: list[T.DataType],
    seq: list[str],
    seq_types: list[T.DataType],
    snapshot_id: int | None,
) -> DataFrame:
    """The tombstone rows (as of `snapshot_id`, else now) as (keys..., TOMB struct), typed as the batch
    types them (the side table keeps the types of its creation); a sequence column the side table
    lacks reads NULL."""
    side = (
        spark.table(tomb)
        if snapshot_id is None
        else spark.sql(f"SELECT * FROM {tomb} VERSION AS OF {snapshot_id}")
    )
    held = {f.name.lower(): f.name for f in side.schema.fields}
    elements = [
        (F.col(quote(held[s.lower()])) if s.lower() in held else F.lit(None)).cast(t).alias(_field(j))
        for j, (s, t) in enumerate(zip(seq, seq_types, strict=True))
    ]
    key_columns = [
        F.col(quote(held[k.lower()])).cast(t).alias(k) for k, t in zip(keys, key_types, strict=True)
    ]
    return side.select(*key_columns, F.struct(*elements).alias(TOMB))


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
    *,
    key_values: dict[str, list[str]] | None = None,
    bounds: dict[str, tuple] | None = None,
    small: bool = False,
    ahead: Ahead | None = None,
) -> DataFrame | None:
    """The newest tombstone (TOMB) of each key of `batch_keys` (columns: the `keys`, in order, by any
    name) that has one, as (keys..., TOMB) rows to left-join onto the batch. None when no tombstone
    can match: then the side table's data is not read.

    Skipped (None) without a Spark job when the side table is absent, holds no file, or holds no file
    whose bounds meet `bounds` (lakeloader.iceberg.may_hold): each key column's lowest and highest
    value in the batch, and the lowest first sequence value of its inserts and updates -- a tombstone
    below it buries none of them, so a batch newer than every delete recorded so far, the ordinary
    case, skips. Otherwise the tombstones are narrowed to the batch's keys first -- by `key_values`
    (SQL literals of every value a key column takes, as merge_without_commit_counts.classify filters
    the target), else a
    semi-join with `batch_keys` -- and only those are folded to one row per key.
    `small`: the batch is one partition; so are the few tombstones, so neither the fold nor the
    caller's join needs a shuffle (or a broadcast job) of its own. `ahead`: the batch's own tombstones
    are being appended meanwhile; the side table is read as it was before.
    """
    tomb = side_table(name, table)
    if not enabled(table, seq):
        return None
    if ahead is not None and ahead.snapshot_id is None:
        return None
    if ahead is None and not table_exists(spark, tomb):
        return None
    snapshot_id = ahead.snapshot_id if ahead is not None else None
    if not iceberg.may_hold(spark, tomb, bounds or {}, snapshot_id):
        return None
    key_types = [f.dataType for f in batch_keys.schema.fields]
    rows = _newest(spark, tomb, keys, key_types, seq, seq_types, snapshot_id)
    listed = {k: v for k, v in (key_values or {}).items() if k in keys}
    if listed:
        rows = rows.filter(in_lists(listed))
    else:
        on = [rows[quote(k)] == batch_keys[quote(c)] for k, c in zip(keys, batch_keys.columns, strict=True)]
        rows = rows.join(batch_keys, on=on, how="left_semi")
    if small:
        rows = rows.coalesce(1)
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
            + tblproperties(PROPERTIES)
        )
    held = {f.name.lower() for f in spark.table(tomb).schema.fields}
    missing = [c for c in columns if c.lower() not in held]
    if missing:  # a tie-breaker the target gained later
        spec = ", ".join(f"{quote(c)} {fields[c].simpleString()}" for c in missing)
        spark.sql(f"ALTER TABLE {tomb} ADD COLUMNS ({spec})")
    rows = deletes.select(*[F.col(quote(c)) for c in columns], F.current_timestamp().alias(RECORDED_AT))
    rows.writeTo(tomb).append()


class Ahead:
    """A small batch's tombstones, appended (`record`) on a thread of their own while the batch is
    classified, instead of after: the append's Spark job and commit overlap classification's.

    `deletes`: the latest change of each key that is a delete, whatever the table holds -- a delete
    older than the key's row leaves a tombstone too, which buries nothing the row does not already
    outdate. The probe reads the side table as of `snapshot_id`, the one before this append (None:
    there was nothing to read), so it never meets the batch's own. `wait` before the target's commit
    keeps the order `record` promises.
    """

    def __init__(
        self,
        spark: SparkSession,
        table: TableConfig,
        name: str,
        deletes: DataFrame,
        keys: list[str],
        seq: list[str],
    ):
        tomb = side_table(name, table)
        self.snapshot_id = iceberg.current_snapshot_id(spark, tomb) if table_exists(spark, tomb) else None
        self._error: BaseException | None = None
        self._thread = InheritableThread(target=self._record, args=(spark, table, name, deletes, keys, seq))
        self._thread.start()

    def _record(self, *args: object) -> None:
        try:
            record(*args)
        except BaseException as error:  # noqa: BLE001 - raised again by wait, on the batch's own thread
            self._error = error

    def wait(self) -> None:
        """Until the append has committed; raises its error."""
        self._thread.join()
        if self._error is not None:
            raise self._error


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
