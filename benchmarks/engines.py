"""The three ways of applying a CDC batch that the benchmark compares.

* ``lakeloader``  -- :func:`lakeloader.engine.apply_batch`, exactly as a job runs it.
* ``aws-sample``  -- the pattern of the usual AWS samples, on the same SparkSession:
  window dedup (row_number by key, latest ``last_update_time``), ``count()`` before
  writing, one MERGE for upserts, then a MERGE ... DELETE for the deletes (two commits,
  no newer-than guard).
* ``pyiceberg``   -- pure Python as in a Lambda: pyarrow dedup, then ``Table.upsert`` and
  ``delete`` in one PyIceberg transaction against a SqlCatalog (sqlite on local disk).

Each engine owns its tables: ``create`` loads the base table from the base parquet files
and remembers the snapshot, ``reset`` rolls back to it (untimed), ``apply`` is what is
timed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.data import Batch

MOR = {
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
}
COW = {
    "write.merge.mode": "copy-on-write",
    "write.update.mode": "copy-on-write",
    "write.delete.mode": "copy-on-write",
}  # spelled out: a new lakeloader table defaults to merge-on-read (docs/performance.md "Table defaults")
# Merge-on-read on Iceberg format 3: deletion vectors in place of position-delete files (glue-6.0+).
MOR_V3 = {**MOR, "format-version": "3"}
DB = "bench"
# A table's checksum: its rows, the sum of its keys, and the sum of its amounts in whole cents. Every
# amount is a whole number of cents (benchmarks.data); a sum of the doubles themselves depends on the
# order Spark adds them in, so two tables holding the same rows in other files could differ in the cent.
CHECKSUM_SQL = "SELECT count(*), sum(id), sum(CAST(round(amount * 100) AS BIGINT)) FROM {table}"


@dataclass
class Applied:
    seconds: float
    phases: dict[str, float] = field(default_factory=dict)
    counts: tuple[int, int, int] | None = None  # inserted, updated, deleted where the engine says
    cpu: float = 0.0  # filled in by the harness: CPU seconds of the JVM + this process
    jobs: int = 0  # filled in by the harness: Spark jobs the run started


def tombstones_of(label: str) -> str:
    from lakeloader.engine.tombstones import SUFFIX

    return f"{label}{SUFFIX}"


class SparkTables:
    """Shared by the two Spark engines: create, reset, checksum and file counts of `lakeloader.bench.*`."""

    def __init__(self, spark: Any, *, replay_tombstones: bool = False):
        self.spark = spark
        self.replay_tombstones = replay_tombstones
        self.base_snapshot: dict[str, int] = {}
        self.tombstones_base: dict[str, int] = {}

    def qualified(self, label: str) -> str:
        from lakeloader.spark.session import CATALOG

        return f"{CATALOG}.{DB}.{label}"

    def create(self, label: str, base_files: list[Path], properties: dict[str, str], config: Any) -> None:
        from lakeloader.engine.schema import create_table
        from lakeloader.iceberg import current_snapshot_id

        name = self.qualified(label)
        self.spark.sql(f"DROP TABLE IF EXISTS {name}")
        self.spark.sql(f"DROP TABLE IF EXISTS {self.qualified(tombstones_of(label))}")
        self.tombstones_base.pop(label, None)
        data = self.spark.read.parquet(*[str(p) for p in base_files])
        create_table(self.spark, name, config, data)
        data.writeTo(name).append()
        self.base_snapshot[label] = current_snapshot_id(self.spark, name)

    def reset(self, label: str) -> None:
        from lakeloader.spark.session import CATALOG

        snap = self.base_snapshot[label]
        current = self.spark.sql(
            f"SELECT snapshot_id FROM {self.qualified(label)}.history WHERE is_current_ancestor "
            "ORDER BY made_current_at DESC LIMIT 1"
        ).first()[0]
        if current != snap:
            self.spark.sql(f"CALL {CATALOG}.system.rollback_to_snapshot('{DB}.{label}', {snap})")
        self.reset_tombstones(label)

    def reset_tombstones(self, label: str) -> None:
        """Every run of a case starts from the side table the first run left: one batch's tombstones,
        not one more batch of them per run. As a stage's next batch would find them, they are made a
        day older, so they cannot bury the batch and the probe may be skipped; `replay_tombstones`
        keeps them as they are (the batch is re-delivered: its own tombstones, probed every run)."""
        from lakeloader.iceberg import current_snapshot_id
        from lakeloader.spark.session import CATALOG, table_exists
        from lakeloader.spark.sql import quote

        side = tombstones_of(label)
        if not table_exists(self.spark, self.qualified(side)):
            return
        if label not in self.tombstones_base and not self.replay_tombstones:
            stamp = quote("last_update_time")
            self.spark.sql(f"UPDATE {self.qualified(side)} SET {stamp} = {stamp} - INTERVAL 1 DAY")
        current = current_snapshot_id(self.spark, self.qualified(side))
        base = self.tombstones_base.setdefault(label, current)
        if current != base:
            self.spark.sql(f"CALL {CATALOG}.system.rollback_to_snapshot('{DB}.{side}', {base})")

    def compact(self, label: str) -> None:
        """Rewrite every data file and position-delete file of the table: all of what maintain compacts."""
        from lakeloader import iceberg

        for procedure in ("rewrite_data_files", "rewrite_position_delete_files"):
            iceberg.call_procedure(
                self.spark, self.qualified(label), procedure, "options => map('rewrite-all', 'true')"
            )

    def checksum(self, label: str) -> tuple[int, int, int]:
        """CHECKSUM_SQL's three figures."""
        row = self.spark.sql(CHECKSUM_SQL.format(table=self.qualified(label))).first()
        return int(row[0]), int(row[1]), int(row[2])

    def files(self, label: str) -> dict[str, int]:
        rows = self.spark.sql(
            f"SELECT content, count(*) AS n FROM {self.qualified(label)}.files GROUP BY content"
        ).collect()
        kinds = {0: "data", 1: "position-deletes", 2: "equality-deletes"}
        return {kinds[r.content]: r.n for r in rows}


def table_config(label: str, properties: dict[str, str], *, tombstones: bool = True) -> Any:
    """lakeloader's config of a benchmark table; a format-version property becomes target.format_version."""
    from lakeloader.config import TableConfig

    version = int(properties.get("format-version", 2))
    own = {k: v for k, v in properties.items() if k != "format-version"}
    return TableConfig.model_validate(
        {
            "id": f"{DB}.{label}",
            "source": {"prefix": "cdc/", "format": "parquet", "cdc": "dms"},
            "target": {"database": DB, "table": label, "properties": own, "format_version": version},
            "keys": ["id"],
            "tombstones": {"enabled": tombstones},
        }
    )


class SparkEngine:
    spark_based = True
    tombstones = True  # lakeloader's config: deletes leave tombstones (the default)

    def __init__(self, tables: SparkTables):
        self.tables = tables
        self.configs: dict[str, Any] = {}

    def create(self, label: str, base_files: list[Path], properties: dict[str, str]) -> None:
        self.configs[label] = table_config(label, properties, tombstones=self.tombstones)
        self.tables.create(label, base_files, properties, self.configs[label])

    def reset(self, label: str) -> None:
        self.tables.reset(label)

    def checksum(self, label: str) -> tuple[int, int, int]:
        return self.tables.checksum(label)

    def files(self, label: str) -> dict[str, int]:
        return self.tables.files(label)


def input_files(batch: Batch, version: str) -> list:
    """The batch's files as lakeloader's inputs (`version` tells re-deliveries of the same bytes apart)."""
    from lakeloader.spark.inputs import InputFile

    return [
        InputFile(f"cdc/{p.parent.name}/{p.name}", str(p), p.stat().st_size, version) for p in batch.files
    ]


# The progress messages of lakeloader.engine that open each phase of a batch, in the order they come.
# "classify+probe" includes the tombstone probe (a join inside classification, not timed apart) and a
# small batch's tombstone append, which runs meanwhile ("tombstones" is then the wait for its commit);
# "merge+commit" is the one MERGE statement, which commits as it ends.
PHASE_MARKS = (
    ("reading ", "read+validate"),
    ("read ", "schema"),
    ("classifying", "classify+probe"),
    ("recording ", "tombstones"),
    ("merging", "merge+commit"),
    ("applied", "metadata"),
)


def phase_seconds(marks: list[tuple[str, float]], ended: float) -> dict[str, float]:
    """Each phase's seconds: from its mark to the next (a phase marked twice, e.g. a re-write, adds up)."""
    phases: dict[str, float] = {}
    for (phase, at), (_, until) in zip(marks, [*marks[1:], ("", ended)], strict=True):
        phases[phase] = phases.get(phase, 0.0) + until - at
    return phases


class LakeloaderEngine(SparkEngine):
    name = "lakeloader"

    def apply(self, label: str, batch: Batch, attempt: str) -> Applied:
        from lakeloader.engine import apply_batch
        from lakeloader.spark.session import CATALOG

        # a new version per attempt: the same bytes are not "already committed" after a rollback
        files = input_files(batch, attempt)
        marks: list[tuple[str, float]] = [("state", time.perf_counter())]

        def progress(message: str) -> None:
            phase = next((name for prefix, name in PHASE_MARKS if message.startswith(prefix)), None)
            if phase:
                marks.append((phase, time.perf_counter()))

        result = apply_batch(
            self.tables.spark, self.configs[label], files, catalog=CATALOG, run_id=attempt, progress=progress
        )
        ended = time.perf_counter()
        return Applied(
            ended - marks[0][1],
            phase_seconds(marks, ended),
            (result.inserted, result.updated, result.deleted),
        )


class LakeloaderWithoutTombstones(LakeloaderEngine):
    """lakeloader with `tombstones: {enabled: false}`: lakeloader ÷ this is what tombstones cost."""

    name = "lakeloader-no-tombstones"
    tombstones = False


class AwsSampleEngine(SparkEngine):
    name = "aws-sample"

    def apply(self, label: str, batch: Batch, attempt: str) -> Applied:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        spark = self.tables.spark
        name = self.tables.qualified(label)
        started = time.perf_counter()
        df = spark.read.parquet(*[str(p) for p in batch.files])
        window = Window.partitionBy("id").orderBy(F.col("last_update_time").desc())
        latest = df.withColumn("rn", F.row_number().over(window)).filter("rn = 1").drop("rn")
        upserts = latest.filter(F.col("Op") != "D").drop("Op")
        deletes = latest.filter(F.col("Op") == "D").drop("Op")
        n_upserts = upserts.count()
        if n_upserts > 0:
            upserts.createOrReplaceTempView("aws_upserts")
            spark.sql(
                f"MERGE INTO {name} t USING aws_upserts s ON t.id = s.id "
                "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
            )
        n_deletes = deletes.count()
        if n_deletes > 0:
            deletes.createOrReplaceTempView("aws_deletes")
            spark.sql(f"MERGE INTO {name} t USING aws_deletes s ON t.id = s.id WHEN MATCHED THEN DELETE")
        return Applied(time.perf_counter() - started)


class PyIcebergEngine:
    name = "pyiceberg"
    spark_based = False

    def __init__(self, folder: Path):
        from pyiceberg.catalog.sql import SqlCatalog

        folder.mkdir(parents=True, exist_ok=True)
        (folder / "warehouse").mkdir(exist_ok=True)
        self.catalog = SqlCatalog(
            "bench", uri=f"sqlite:///{folder / 'catalog.db'}", warehouse=f"file://{folder / 'warehouse'}"
        )
        self.catalog.create_namespace_if_not_exists(DB)
        self.base_snapshot: dict[str, int] = {}

    def create(self, label: str, base_files: list[Path], properties: dict[str, str]) -> None:
        from benchmarks.data import BASE_SCHEMA

        ident = f"{DB}.{label}"
        if self.catalog.table_exists(ident):
            self.catalog.purge_table(ident)
        table = self.catalog.create_table(ident, schema=BASE_SCHEMA)
        for path in base_files:
            table.append(pq.read_table(path))
        self.base_snapshot[label] = table.current_snapshot().snapshot_id

    def reset(self, label: str) -> None:
        table = self.catalog.load_table(f"{DB}.{label}")
        if table.current_snapshot().snapshot_id != self.base_snapshot[label]:
            table.manage_snapshots().rollback_to_snapshot(self.base_snapshot[label]).commit()

    def apply(self, label: str, batch: Batch, attempt: str) -> Applied:
        from pyiceberg.expressions import In

        started = time.perf_counter()
        changes = pa.concat_tables(pq.read_table(p) for p in sorted(batch.files))
        changes = changes.append_column("_pos", pa.array(range(changes.num_rows), pa.int64()))
        changes = changes.sort_by(
            [("id", "ascending"), ("last_update_time", "ascending"), ("_pos", "ascending")]
        )
        ids = changes["id"].combine_chunks()
        last_of_key = pa.concat_arrays(
            [pc.not_equal(ids.slice(0, len(ids) - 1), ids.slice(1)), pa.array([True])]
        )
        latest = changes.filter(last_of_key)
        is_delete = pc.equal(latest["Op"], "D")
        upserts = latest.filter(pc.invert(is_delete)).drop_columns(["Op", "_pos"])
        delete_ids = latest.filter(is_delete)["id"].to_pylist()
        table = self.catalog.load_table(f"{DB}.{label}")
        with table.transaction() as tx:
            if upserts.num_rows:
                tx.upsert(upserts, join_cols=["id"])
            if delete_ids:
                tx.delete(In("id", delete_ids))
        return Applied(time.perf_counter() - started)

    def checksum(self, label: str) -> tuple[int, int, int]:
        """CHECKSUM_SQL's three figures, from PyArrow."""
        data = self.catalog.load_table(f"{DB}.{label}").scan(selected_fields=("id", "amount")).to_arrow()
        cents = pc.cast(pc.round(pc.multiply(data["amount"], 100)), pa.int64())
        return data.num_rows, pc.sum(data["id"]).as_py(), pc.sum(cents).as_py()

    def files(self, label: str) -> dict[str, int]:
        table = self.catalog.load_table(f"{DB}.{label}")
        return {"data": len(list(table.scan().plan_files()))}
