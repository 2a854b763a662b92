"""Iceberg format 3 on glue-6.0 and glue-6.1 (target.format_version: 3): merge-on-read writes deletion
vectors (Puffin blobs) where format 2 writes position-delete files, and lakeloader's reads, SCD2,
erasure, maintenance and rebuild stay correct on them; an outside reader (PyIceberg) reads the table.
A format-2 table is never upgraded. Runs where format 3 is allowed (lakeloader.config.format_versions);
`make test RUNTIME=glue-6.0` runs it.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from lakeloader.config.format_versions import FORMAT_3_RUNTIMES
from lakeloader.control import runtimes
from lakeloader.engine import apply_batch
from lakeloader.jobs.erase import erase
from lakeloader.jobs.maintenance import maintain_table, summary_table
from lakeloader.jobs.rebuild import rebuild_table, reset_input_log
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.skipif(
        runtimes.local().name not in FORMAT_3_RUNTIMES,
        reason=f"format 3 runs on {', '.join(FORMAT_3_RUNTIMES)} only (runtime {runtimes.local().name})",
    ),
]

T0 = datetime(2026, 11, 1, 8, 0, 0)
DMS = pa.schema(
    [("Op", pa.string()), ("id", pa.int64()), ("name", pa.string()), ("last_update_time", pa.timestamp("us"))]
)
V3 = {"format_version": 3}


def change(op: str, id_: int, name: str, minute: int) -> dict:
    return {"Op": op, "id": id_, "name": name, "last_update_time": T0.replace(minute=minute)}


def name_of(table) -> str:
    return f"{CATALOG}.{table.target.database}.{table.target.table}"


def load(spark, table, raw, batch: list[dict], n: int, progress=lambda m: None):
    raw.write_parquet(f"src/2026110{n}-0900.parquet", batch, DMS)
    files = list_inputs(str(raw.root), table.source.prefix)
    return apply_batch(spark, table, files, catalog=CATALOG, run_id=f"r{n}", progress=progress)


def load_history(spark, table, raw) -> None:
    """Three batches: inserts, then an update and a delete, then another delete."""
    load(spark, table, raw, [change("I", i, f"v{i}", 1) for i in range(1, 7)], 0)
    load(spark, table, raw, [change("U", 2, "v2b", 2), change("D", 3, "v3", 2)], 1)
    load(spark, table, raw, [change("D", 5, "v5", 3)], 2)


def rows(spark, table) -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"SELECT id, name FROM {name_of(table)} ORDER BY id").collect()]


def delete_files(spark, table, metadata: str = "delete_files") -> list[tuple]:
    """(content, file_format, path) of the table's delete files: content 1 is positional (a position-delete
    file or, on format 3, a deletion vector)."""
    query = f"SELECT content, file_format, file_path FROM {name_of(table)}.{metadata}"
    return [tuple(r) for r in spark.sql(query).collect()]


def format_version(spark, table) -> str:
    props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {name_of(table)}").collect()}
    return props["format-version"]


def local_path(uri: str) -> Path:
    return Path(uri.removeprefix("file:"))


EXPECTED = [(1, "v1"), (2, "v2b"), (4, "v4"), (6, "v6")]


def test_a_delete_batch_writes_a_deletion_vector_where_format_2_writes_a_position_delete_file(
    spark, raw, make_table
):
    v3 = make_table(target=V3)
    load_history(spark, v3, raw)
    assert format_version(spark, v3) == "3"
    assert rows(spark, v3) == EXPECTED
    deletes = delete_files(spark, v3)
    assert deletes and {(content, fmt) for content, fmt, _ in deletes} == {(1, "PUFFIN")}
    assert all(path.endswith(".puffin") for _, _, path in deletes)

    v2 = make_table()  # the same batches on a format-2 table: position-delete files (Parquet)
    raw.root.joinpath("src").rename(raw.root / "v3-src")
    load_history(spark, v2, raw)
    assert format_version(spark, v2) == "2" and rows(spark, v2) == EXPECTED
    assert {(content, fmt) for content, fmt, _ in delete_files(spark, v2)} == {(1, "PARQUET")}


def test_an_outside_reader_reads_the_format_3_table_with_its_deletion_vectors(spark, raw, make_table):
    """PyIceberg (requirements-dev.txt's pin) reads the table's current snapshot from its metadata file,
    deletion vectors applied."""
    from pyiceberg.table import StaticTable

    table = make_table(target=V3)
    load_history(spark, table, raw)
    metadata = spark.sql(
        f"SELECT file FROM {name_of(table)}.metadata_log_entries ORDER BY timestamp"
    ).collect()
    static = StaticTable.from_metadata(metadata[-1].file)
    assert static.format_version == 3
    read = static.scan(selected_fields=("id", "name")).to_arrow().sort_by("id")
    assert list(zip(read["id"].to_pylist(), read["name"].to_pylist(), strict=True)) == EXPECTED


def test_scd2_on_format_3(spark, raw, make_table):
    table = make_table(mode="scd2", target=V3)
    load(spark, table, raw, [change("I", 1, "a", 1), change("I", 2, "b", 1)], 0)
    load(spark, table, raw, [change("U", 1, "a2", 2), change("D", 2, "b", 2)], 1)
    query = f"SELECT id, name, is_current FROM {name_of(table)} ORDER BY id, valid_from"
    assert [tuple(r) for r in spark.sql(query).collect()] == [
        (1, "a", False),
        (1, "a2", True),
        (2, "b", False),
    ]
    assert format_version(spark, table) == "3"


def test_erasure_purges_the_deletion_vectors_from_time_travel_and_disk(spark, raw, make_table):
    table = make_table(target=V3)
    load_history(spark, table, raw)
    name = name_of(table)
    vectors = {path for _, fmt, path in delete_files(spark, table, "all_delete_files") if fmt == "PUFFIN"}
    assert vectors and all(local_path(p).exists() for p in vectors)
    old = [r.snapshot_id for r in spark.sql(f"SELECT snapshot_id FROM {name}.snapshots").collect()]

    result = erase(spark, table, catalog=CATALOG, keys=["2"], who="tester")

    assert result.verified and result.rows_erased == 1
    assert rows(spark, table) == [(1, "v1"), (4, "v4"), (6, "v6")]
    remaining = {r.snapshot_id for r in spark.sql(f"SELECT snapshot_id FROM {name}.snapshots").collect()}
    assert remaining.isdisjoint(old)
    for snapshot in old:
        with pytest.raises(Exception, match="(?i)snapshot"):
            spark.sql(f"SELECT * FROM {name} VERSION AS OF {snapshot}").collect()
    assert [p for p in vectors if local_path(p).exists()] == []  # the old vectors are gone from disk too


def test_maintenance_and_rebuild_keep_a_format_3_table_correct(spark, raw, make_table):
    table = make_table(
        target=V3,
        maintenance={
            "compaction": {"min_input_files": 2, "target_file_size_mb": 64},
            "snapshots": {"older_than_days": 0.000001, "retain_last": 1},
        },
    )
    load_history(spark, table, raw)
    result = maintain_table(spark, table, catalog=CATALOG)
    assert result.status == "ok", summary_table([result])
    assert rows(spark, table) == EXPECTED and format_version(spark, table) == "3"

    files = list_inputs(str(raw.root), table.source.prefix)
    rebuilt = rebuild_table(spark, table, files, catalog=CATALOG, run_id="rebuild-1")
    reset_input_log(spark, CATALOG, table.id, files, "rebuild-1")
    assert rebuilt.files == 3
    assert rows(spark, table) == EXPECTED and format_version(spark, table) == "3"


def test_a_format_2_table_is_never_upgraded(spark, raw, make_table):
    table = make_table()
    load(spark, table, raw, [change("I", 1, "a", 1)], 0)
    asked = table.model_copy(update={"target": table.target.model_copy(update={"format_version": 3})})
    notes: list[str] = []
    load(spark, asked, raw, [change("D", 1, "a", 2)], 1, progress=notes.append)
    assert format_version(spark, table) == "2"
    assert {fmt for _, fmt, _ in delete_files(spark, table)} <= {"PARQUET"}
    assert any("the table is format 2 and target.format_version says 3" in n for n in notes), notes
