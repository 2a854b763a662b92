"""Config changes on a table that exists (properties, partitioning, keys) and `rebuild`, on real
Iceberg tables: what the config says reaches the table, and what cannot change in place is refused
until a rebuild builds the table again from its raw files."""

from __future__ import annotations

from datetime import datetime, timedelta

import pyarrow as pa
import pytest

from lakeloader import iceberg
from lakeloader.engine import tombstones
from lakeloader.iceberg import commit
from lakeloader.jobs.load import run_tables
from lakeloader.jobs.rebuild import RebuildRefusedError, rebuild_table, reset_input_log, staging_config
from lakeloader.spark.errors import BadInputError
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG, table_exists

# slow (make check leaves it out): tables built again from every raw file, then swapped in
pytestmark = [pytest.mark.spark, pytest.mark.slow]

T0 = datetime(2026, 11, 1, 8, 0, 0)
DMS = pa.schema(
    [
        ("Op", pa.string()),
        ("id", pa.int64()),
        ("region", pa.string()),
        ("name", pa.string()),
        ("last_update_time", pa.timestamp("us")),
    ]
)


def change(op: str, id_: int, region: str, name: str | None, minute: int) -> dict:
    return {
        "Op": op,
        "id": id_,
        "region": region,
        "name": name,
        "last_update_time": T0 + timedelta(minutes=minute),
    }


def target(table) -> str:
    return f"{CATALOG}.{table.target.database}.{table.target.table}"


def files_of(raw, table):
    return list_inputs(str(raw.root), table.source.prefix)


def run(spark, table, raw, *, log_consumed: bool = True):
    (result,) = run_tables(
        spark,
        [table],
        {table.id: files_of(raw, table)},
        catalog=CATALOG,
        run_id="run",
        progress=lambda m: None,
        log_consumed=log_consumed,
    )
    return result


def rows(spark, table) -> list[tuple]:
    query = f"SELECT id, region, name FROM {target(table)} ORDER BY id, region"
    return [tuple(r) for r in spark.sql(query).collect()]


def spec(spark, table) -> set[tuple[str, str]]:
    return set(iceberg.read_state(spark, target(table)).partition_fields)


def two_regions(raw) -> None:
    """Key 1 exists in two regions: one row under keys [id], two under [id, region]."""
    raw.write_parquet(
        "src/0800.parquet",
        [change("I", 1, "eu", "a", 0), change("I", 1, "us", "b", 1), change("I", 2, "eu", "c", 2)],
        DMS,
    )


def test_properties_and_partitioning_in_the_config_reach_a_table_that_exists(spark, raw, make_table):
    table = make_table()
    two_regions(raw)
    assert run(spark, table, raw).status == "ok"
    assert spec(spark, table) == set()
    created = iceberg.table_properties(spark, target(table))
    assert created["commit.retry.num-retries"] == "10"
    assert created["commit.manifest.min-count-to-merge"] == "16"

    changed = make_table(
        id=table.id,
        target={
            **table.target.model_dump(),
            "partition_by": ["bucket(4, id)"],
            "properties": {"commit.manifest.min-count-to-merge": "7"},
        },
        maintenance={"commit_retry": {"num_retries": 3}},
    )
    raw.write_parquet("src/0900.parquet", [change("U", 2, "eu", "c2", 60)], DMS)
    result = run(spark, changed, raw)

    assert result.status == "ok", result.error
    properties = iceberg.table_properties(spark, target(table))
    assert properties["commit.manifest.min-count-to-merge"] == "7"
    assert properties["commit.retry.num-retries"] == "3"
    assert not any("commit.retry" in n for n in result.notes)  # Iceberg's own setting, set quietly
    assert spec(spark, table) == {("bucket[4]", "id")}
    assert any("partitioning evolved" in n for n in result.notes) and any(
        "properties set" in n for n in result.notes
    )

    daily = make_table(  # format-version: a table property to Spark, though not in Iceberg's metadata
        id=table.id,
        target={
            **table.target.model_dump(),
            "partition_by": ["days(last_update_time)"],
            "properties": {"format-version": "2"},
        },
    )
    raw.write_parquet("src/1000.parquet", [change("U", 2, "eu", "c3", 120)], DMS)
    result = run(spark, daily, raw)
    assert result.status == "ok"
    assert not any("format-version" in n for n in result.notes)  # already 2: nothing to set
    assert spec(spark, table) == {("day", "last_update_time")}
    assert rows(spark, table) == [(1, "us", "b"), (2, "eu", "c3")]
    assert run(spark, daily, raw).notes == []  # nothing left to change: no note, no commit


@pytest.mark.parametrize("change_of", ["keys", "mode"])
def test_a_keys_or_mode_change_is_refused_and_points_at_rebuild(spark, raw, make_table, change_of):
    table = make_table()
    two_regions(raw)
    run(spark, table, raw)
    before = iceberg.current_snapshot_id(spark, target(table))

    edited = make_table(
        id=table.id,
        target=table.target.model_dump(),
        **({"keys": ["id", "region"]} if change_of == "keys" else {"mode": "append", "keys": []}),
    )
    raw.write_parquet("src/0900.parquet", [change("U", 2, "eu", "c2", 60)], DMS)
    result = run(spark, edited, raw)

    assert result.status == "failed"
    assert f"lakeloader rebuild --table {table.id}" in result.error and change_of in result.error
    assert iceberg.current_snapshot_id(spark, target(table)) == before  # nothing read, nothing committed


def test_rebuild_re_keys_the_table_from_every_raw_file_in_one_commit(spark, raw, make_table):
    table = make_table()
    two_regions(raw)
    raw.write_parquet("src/0900.parquet", [change("D", 2, "eu", None, 60)], DMS)
    gone = raw.write_parquet("src/0930.parquet", [change("I", 9, "eu", "z", 90)], DMS)
    run(spark, table, raw)
    assert rows(spark, table) == [(1, "us", "b"), (9, "eu", "z")]
    gone.unlink()  # a raw file no longer in the raw zone is not in the rebuilt table, nor in its records
    old_snapshot = iceberg.current_snapshot_id(spark, target(table))

    rekeyed = make_table(id=table.id, target=table.target.model_dump(), keys=["id", "region"])
    files = files_of(raw, rekeyed)
    result = rebuild_table(spark, rekeyed, files, catalog=CATALOG, run_id="rebuild-1")
    reset_input_log(spark, CATALOG, table.id, files, "rebuild-1")

    assert rows(spark, table) == [(1, "eu", "a"), (1, "us", "b")]
    assert result.files == 2 and result.snapshot_id == iceberg.current_snapshot_id(spark, target(table))
    state = iceberg.read_state(spark, target(table))
    assert state.committed_file_ids == {commit.file_id(f) for f in files}  # the rebuild's, and no others
    assert commit.logged_file_ids(spark, CATALOG, table.id) == {commit.file_id(f) for f in files}
    history = {
        r.snapshot_id for r in spark.sql(f"SELECT snapshot_id FROM {target(table)}.snapshots").collect()
    }
    assert old_snapshot in history  # the replaced rows stay in history until maintenance expires them
    assert not table_exists(spark, target(staging_config(rekeyed)))
    tombs = spark.sql(f"SELECT id, region FROM {target(table)}{tombstones.SUFFIX}").collect()
    assert [tuple(t) for t in tombs] == [(2, "eu")]

    assert run(spark, rekeyed, raw).files == 0  # a run after the rebuild loads nothing twice
    raw.write_parquet("src/1000.parquet", [change("U", 1, "eu", "a2", 120)], DMS)
    assert run(spark, rekeyed, raw).status == "ok"
    assert rows(spark, table) == [(1, "eu", "a2"), (1, "us", "b")]  # merged under the new keys


def test_a_rebuild_that_fails_leaves_the_table_as_it_was(spark, raw, make_table):
    table = make_table()
    two_regions(raw)
    run(spark, table, raw)
    before = (iceberg.current_snapshot_id(spark, target(table)), rows(spark, table))
    raw.write_parquet("src/0900.parquet", [change("U", None, "eu", "x", 60)], DMS)  # a NULL key

    rekeyed = make_table(id=table.id, target=table.target.model_dump(), keys=["id", "region"])
    with pytest.raises(BadInputError, match="0900.parquet"):
        rebuild_table(spark, rekeyed, files_of(raw, rekeyed), catalog=CATALOG, run_id="rebuild-2")
    assert (iceberg.current_snapshot_id(spark, target(table)), rows(spark, table)) == before

    with pytest.raises(RebuildRefusedError, match="no raw files"):
        rebuild_table(spark, rekeyed, [], catalog=CATALOG, run_id="rebuild-3")


def test_a_rebuild_is_refused_while_erasures_are_on_record(spark, raw, make_table):
    from lakeloader.jobs.erase import erase

    table = make_table()
    two_regions(raw)
    run(spark, table, raw)
    erase(spark, table, catalog=CATALOG, keys=["2"], who="test")

    with pytest.raises(RebuildRefusedError, match="erasure"):
        rebuild_table(spark, table, files_of(raw, table), catalog=CATALOG, run_id="rebuild-4")
    assert rows(spark, table) == [(1, "us", "b")]  # the erased subject is not back

    rebuild_table(
        spark, table, files_of(raw, table), catalog=CATALOG, run_id="rebuild-5", raw_zone_erased=True
    )
    assert rows(spark, table) == [(1, "us", "b"), (2, "eu", "c")]  # what the raw zone held: the user's call
