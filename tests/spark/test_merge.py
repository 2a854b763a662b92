"""The CDC merge rules, on real Iceberg tables with small hand-made batches (which change of a key
wins: test_merge_ordering.py)."""

from __future__ import annotations

import importlib

import pyarrow as pa
import pytest

from lakeloader import iceberg
from lakeloader.engine import apply_batch, cdc
from lakeloader.jobs.load import run_tables
from lakeloader.spark.errors import BadInputError
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG
from tests.spark.merge_batches import DMS, FULL, T0, at, change, load, rows, snapshots, unchanged_since

pytestmark = pytest.mark.spark


@pytest.fixture(params=["key-list", "semi-join", "large-batch-shuffled"])
def probe(request, spark, monkeypatch):
    """Each way classification finds the batch's keys in the table
    (lakeloader.engine.merge_without_commit_counts.classify): a small batch's key values filter the
    scan; without them, a semi-join with its keys, read in one task; a large batch's keys above
    cdc.BROADCAST_KEYS_MAX are shuffled, not broadcast."""
    if request.param != "key-list":
        monkeypatch.setattr(cdc, "MAX_LISTED_KEYS", 0)
    if request.param == "large-batch-shuffled":
        monkeypatch.setattr(cdc, "SMALL_BATCH_BYTES", 0)
        monkeypatch.setattr(cdc, "BROADCAST_KEYS_MAX", 0)
        for conf in ("spark.sql.autoBroadcastJoinThreshold", "spark.sql.adaptive.autoBroadcastJoinThreshold"):
            previous = spark.conf.get(conf, None)
            spark.conf.set(conf, "-1")
            request.addfinalizer(
                lambda conf=conf, previous=previous: (
                    spark.conf.unset(conf) if previous is None else spark.conf.set(conf, previous)
                )
            )
    return request.param


@pytest.mark.slow
def test_full_load_then_cdc_inserts_updates_and_deletes(spark, raw, make_table, probe):
    table = make_table()
    raw.write_parquet(
        "src/LOAD00000001.parquet",
        [{"id": i, "name": f"n{i}", "last_update_time": at(0)} for i in (1, 2, 3)],
        FULL,
    )
    first = load(spark, table, raw)
    assert (first.files, first.inserted) == (1, 3)

    raw.write_parquet(
        "src/20261101-0900.parquet",
        [change("U", 1, "one", 1), change("D", 2, "n2", 2), change("I", 4, "four", 3)],
        DMS,
    )
    second = load(spark, table, raw)
    assert (second.inserted, second.updated, second.deleted, second.files) == (1, 1, 1, 1)
    assert rows(spark, table) == [(1, "one"), (3, "n3"), (4, "four")]


@pytest.mark.slow
def test_delete_then_reinsert_in_one_batch_and_across_batches(spark, raw, make_table, probe):
    table = make_table()
    raw.write_parquet("src/20261101-0900.parquet", [change("I", 1, "a", 1), change("I", 2, "b", 1)], DMS)
    load(spark, table, raw)
    raw.write_parquet("src/20261101-0901.parquet", [change("D", 1, "a", 2), change("I", 1, "a2", 3)], DMS)
    raw.write_parquet("src/20261101-0902.parquet", [change("D", 2, "b", 2)], DMS)
    load(spark, table, raw)
    assert rows(spark, table) == [(1, "a2")]
    raw.write_parquet("src/20261101-0903.parquet", [change("I", 2, "b2", 4)], DMS)
    load(spark, table, raw)
    assert rows(spark, table) == [(1, "a2"), (2, "b2")]


@pytest.mark.slow
def test_late_file_never_overwrites_newer_rows(spark, raw, make_table, probe):
    table = make_table()
    raw.write_parquet(
        "src/20261101-1000.parquet", [change("I", 1, "new", 30), change("I", 2, "keep", 30)], DMS
    )
    load(spark, table, raw)
    # arrives later, but its changes are older than what the table holds
    raw.write_parquet(
        "src/20261101-0900.parquet", [change("U", 1, "old", 10), change("D", 2, "keep", 10)], DMS
    )
    result = load(spark, table, raw)
    assert (result.inserted, result.updated, result.deleted) == (0, 0, 0)
    assert rows(spark, table) == [(1, "new"), (2, "keep")]


@pytest.mark.slow
def test_deleting_a_missing_key_is_a_no_op(spark, raw, make_table):
    table = make_table()
    raw.write_parquet("src/20261101-0900.parquet", [change("I", 1, "a", 1)], DMS)
    load(spark, table, raw)
    before = snapshots(spark, table)
    raw.write_parquet("src/20261101-0901.parquet", [change("D", 42, None, 2)], DMS)
    result = load(spark, table, raw)
    assert result.deleted == 0 and result.files == 1
    assert rows(spark, table) == [(1, "a")]
    assert unchanged_since(spark, table, before)  # nothing to apply


def test_same_input_twice_leaves_the_table_unchanged(spark, raw, make_table):
    table = make_table()
    raw.write_parquet("src/LOAD00000001.parquet", [{"id": 1, "name": "a", "last_update_time": at(0)}], FULL)
    raw.write_parquet("src/20261101-0900.parquet", [change("U", 1, "b", 1), change("I", 2, "c", 1)], DMS)
    load(spark, table, raw, run_id="first")
    before = (rows(spark, table), snapshots(spark, table))
    again = load(spark, table, raw, run_id="retry")
    assert again.files == 0
    assert (rows(spark, table), snapshots(spark, table)) == before


@pytest.mark.slow
def test_redelivered_full_load_updates_rather_than_duplicates(spark, raw, make_table):
    table = make_table(sequence_by="version", source={"cdc": "none"})
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    raw.write_parquet("src/LOAD00000001.parquet", [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}], schema)
    load(spark, table, raw)
    # the exporter re-sends the full load (a new file) with one value changed
    raw.write_parquet("src/LOAD00000002.parquet", [{"id": 1, "name": "a"}, {"id": 2, "name": "B"}], schema)
    result = load(spark, table, raw)
    assert result.inserted == 0
    assert rows(spark, table) == [(1, "a"), (2, "B")]


@pytest.mark.slow
def test_composite_keys_csv_and_partitioned_target(spark, raw, make_table):
    table = make_table(
        keys=["order_id", "line_no"],
        source={
            "format": "csv",
            "schema": {
                "order_id": "bigint",
                "line_no": "int",
                "qty": "int",
                "order_date": "date",
                "last_update_time": "timestamp",
            },
        },
        target={"partition_by": ["days(order_date)", "bucket(4, order_id)"]},
    )
    raw.write_text(
        "src/LOAD00000001.csv",
        "order_id,line_no,qty,order_date,last_update_time\n"
        "1,1,5,2026-10-01,2026-11-01 08:00:00\n1,2,6,2026-10-01,2026-11-01 08:00:00\n"
        "2,1,7,2026-10-02,2026-11-01 08:00:00\n",
    )
    raw.write_text(
        "src/20261101-0900.csv",
        "Op,order_id,line_no,qty,order_date,last_update_time\n"
        "U,1,2,60,2026-10-01,2026-11-01 09:00:00\nD,2,1,7,2026-10-02,2026-11-01 09:00:01\n"
        "I,2,2,8,2026-10-02,2026-11-01 09:00:02\n",
    )
    load(spark, table, raw)
    assert rows(spark, table, "order_id, line_no, qty") == [(1, 1, 5), (1, 2, 60), (2, 2, 8)]
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    spec = spark.sql(f"SELECT partition FROM {name}.partitions").schema["partition"].dataType.fieldNames()
    assert spec == ["order_date_day", "order_id_bucket"]


@pytest.mark.slow
def test_headerless_dms_csv_with_leading_op_column(spark, raw, make_table):
    table = make_table(
        source={"format": "csv", "csv": {"header": False, "columns": ["id", "name", "last_update_time"]}},
    )
    raw.write_text("src/LOAD00000001.csv", "1,a,2026-11-01 08:00:00\n2,b,2026-11-01 08:00:00\n")
    raw.write_text("src/20261101-0900.csv", "U,1,a2,2026-11-01 09:00:00\nD,2,b,2026-11-01 09:00:00\n")
    load(spark, table, raw)
    assert rows(spark, table) == [("1", "a2")]


@pytest.mark.slow
def test_debezium_json_ops_and_deleted_flag(spark, raw, make_table):
    table = make_table(keys=["id"], source={"format": "json", "cdc": "debezium"})
    raw.write_json(
        "src/0001.json",
        [
            {"id": 1, "name": "a", "__op": "r", "__source_ts_ms": 1, "__deleted": "false"},
            {"id": 2, "name": "b", "__op": "c", "__source_ts_ms": 1, "__deleted": "false"},
            {"id": 3, "name": "c", "__op": "c", "__source_ts_ms": 1, "__deleted": "false"},
        ],
    )
    raw.write_json(
        "src/0002.json",
        [
            {"id": 1, "name": "a2", "__op": "u", "__source_ts_ms": 2, "__deleted": "false"},
            {"id": 2, "name": "b", "__op": "d", "__source_ts_ms": 2, "__deleted": "true"},
            {"id": 3, "name": "c", "__op": "u", "__source_ts_ms": 2, "__deleted": "true"},
        ],
    )
    load(spark, table, raw)
    assert rows(spark, table) == [(1, "a2")]
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    columns = spark.table(name).columns
    assert "__op" not in columns and "__deleted" not in columns and "__source_ts_ms" in columns


def test_full_load_creates_the_table_with_partitioning_and_properties(spark, raw, make_table):
    table = make_table(
        target={"partition_by": ["bucket(8, id)"], "properties": {"write.merge.mode": "merge-on-read"}}
    )
    raw.write_parquet("src/LOAD00000001.parquet", [{"id": 1, "name": "a", "last_update_time": at(0)}], FULL)
    load(spark, table, raw)
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
    assert props["write.merge.mode"] == "merge-on-read"
    partition_fields = spark.sql(f"SELECT * FROM {name}.partitions").schema["partition"].dataType.fields
    assert [f.name for f in partition_fields] == ["id_bucket"]
    assert spark.sql(f"SELECT partition.id_bucket FROM {name}.partitions").first()[0] in range(8)


def test_commit_summary_records_consumed_files(spark, raw, make_table):
    table = make_table()
    raw.write_parquet("src/20261101-0900.parquet", [change("I", 1, "a", 1)], DMS)
    result = load(spark, table, raw, run_id="run-42")
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    summary = spark.sql(
        f"SELECT summary FROM {name}.snapshots WHERE snapshot_id = {result.snapshot_id}"
    ).first()[0]
    assert summary["lakeloader.run-id"] == "run-42"
    assert summary["lakeloader.table-id"] == table.id
    assert "src/20261101-0900.parquet" in summary["lakeloader.input-files"]


@pytest.mark.slow
def test_the_snapshot_reported_is_the_batchs_own_when_another_writer_commits_right_after(
    spark, raw, make_table, monkeypatch
):
    """The snapshot id the run's ledger row records is read from the table as the batch's commit left
    it, without asking the catalog again (on AWS a Glue GetTable fewer a batch): a commit by another
    writer (another catalog over the same warehouse) right after it does not take its place."""
    batch_module = importlib.import_module("lakeloader.engine.batch")
    prefix = f"spark.sql.catalog.{CATALOG}"
    for key, value in spark.sparkContext.getConf().getAll():
        if key == prefix or key.startswith(prefix + "."):
            spark.conf.set(key.replace(prefix, "spark.sql.catalog.other_writer", 1), value)
    table = make_table()
    other = f"other_writer.{table.target.database}.{table.target.table}"
    raw.write_parquet("src/20261101-0900.parquet", [change("I", 1, "a", 1)], DMS)
    load(spark, table, raw)

    def commit_right_after(point: str) -> None:
        if point == "after_commit":
            spark.sql(f"UPDATE {other} SET name = 'other' WHERE id = 1")

    monkeypatch.setattr(batch_module, "crash_point", commit_right_after)
    raw.write_parquet("src/20261101-0901.parquet", [change("I", 2, "b", 2)], DMS)
    result = load(spark, table, raw, run_id="run-7")
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    spark.sql(f"REFRESH TABLE {name}")
    history = {r.snapshot_id: r for r in spark.sql(f"SELECT * FROM {name}.snapshots").collect()}
    theirs = history[iceberg.current_snapshot_id(spark, name)]
    ours = history[theirs.parent_id]
    assert ours.summary["lakeloader.run-id"] == "run-7" and "lakeloader.run-id" not in theirs.summary
    assert result.snapshot_id == ours.snapshot_id


@pytest.mark.slow
def test_a_batch_frees_its_checkpoints_once_committed(spark, raw, make_table, monkeypatch):
    """The read's and the classification's localCheckpoints hold a batch's rows in the block manager;
    they are freed when the batch has committed, not left until the JVM collects them. Checked right
    after the commit, while apply_batch still holds its frames."""
    batch_module = importlib.import_module("lakeloader.engine.batch")
    tracked = spark.sparkContext._jsc.sc()

    def stored() -> set[int]:
        return {info.id() for info in tracked.getRDDStorageInfo()}

    table = make_table()
    raw.write_parquet("src/20261101-0900.parquet", [change("I", 1, "a", 1), change("I", 2, "b", 1)], DMS)
    load(spark, table, raw)
    before = stored()
    left: list[set[int]] = []
    monkeypatch.setattr(batch_module, "crash_point", lambda point: left.append(stored() - before))
    raw.write_parquet("src/20261101-0901.parquet", [change("U", 1, "c", 2), change("D", 2, "b", 2)], DMS)
    result = load(spark, table, raw)
    assert (result.updated, result.deleted) == (1, 1)
    after_read, after_commit = left  # crash_point("after_read"), then ("after_commit")
    assert after_read  # the read's checkpoint is held while the batch runs
    assert after_commit == set()


@pytest.mark.parametrize(
    ("rows_", "message"),
    [
        ([{"Op": "U", "id": None, "name": "x", "last_update_time": T0}], "column 'id': key column is NULL"),
        ([{"Op": "X", "id": 1, "name": "x", "last_update_time": T0}], "unknown change operation 'X'"),
    ],
)
def test_bad_rows_fail_with_file_and_column_and_commit_nothing(spark, raw, make_table, rows_, message):
    table = make_table()
    raw.write_parquet("src/20261101-0800.parquet", [change("I", 1, "a", 1)], DMS)
    load(spark, table, raw)
    before = snapshots(spark, table)
    bad = raw.write_parquet("src/20261101-0900.parquet", rows_, DMS)
    with pytest.raises(BadInputError) as err:
        load(spark, table, raw)
    assert message in str(err.value)
    assert "file 'src/20261101-0900.parquet'" in str(err.value)
    assert snapshots(spark, table) == before and bad.exists()


def test_declared_type_mismatch_names_file_column_and_value(spark, raw, make_table):
    table = make_table(source={"format": "csv", "schema": {"id": "bigint", "last_update_time": "timestamp"}})
    raw.write_text(
        "src/LOAD00000001.csv", "id,name,last_update_time\n1,a,2026-11-01 08:00:00\nabc,b,2026-11-01\n"
    )
    with pytest.raises(
        BadInputError, match=r"file 'src/LOAD00000001.csv', column 'id': value 'abc' is not a valid"
    ):
        load(spark, table, raw)


def test_one_failing_table_does_not_stop_the_others(spark, raw, make_table):
    good, bad = make_table(), make_table(source={"prefix": "other/"})
    raw.write_parquet("src/20261101-0900.parquet", [change("I", 1, "a", 1)], DMS)
    raw.write_text("other/20261101-0900.parquet", "this is not parquet")
    inputs = {t.id: list_inputs(str(raw.root), t.source.prefix) for t in (bad, good)}
    results = run_tables(spark, [bad, good], inputs, catalog=CATALOG, run_id="r", progress=lambda m: None)
    assert [r.status for r in results] == ["failed", "ok"]
    (error,) = results[0].bad_files.values()
    assert "file 'other/20261101-0900.parquet': cannot be read" in error
    assert "not a Parquet file" in error  # the JVM's root cause, not py4j's wrapper
    assert rows(spark, good) == [(1, "a")]
    assert (raw.root / "other/20261101-0900.parquet").exists()


@pytest.mark.slow
def test_append_and_overwrite_modes(spark, raw, make_table):
    appended = make_table(mode="append")
    raw.write_parquet("src/20261101-0900.parquet", [change("I", 1, "a", 1), change("U", 1, "b", 2)], DMS)
    load(spark, appended, raw)
    assert rows(spark, appended) == [(1, "a"), (1, "b")]

    replaced = make_table(mode="overwrite")
    load(spark, replaced, raw)
    raw.write_parquet("src/20261101-1000.parquet", [change("I", 2, "z", 3)], DMS)
    load(spark, replaced, raw)
    assert rows(spark, replaced) == [(2, "z")]


@pytest.mark.slow
def test_input_log_outlives_expiry_so_an_erasure_is_not_undone(spark, raw, make_table):
    table = make_table()
    raw.write_parquet("src/20261101-0900.parquet", [change("I", 1, "a", 1)], DMS)
    files = list_inputs(str(raw.root), table.source.prefix)
    apply_batch(spark, table, files, catalog=CATALOG, run_id="r1", log_consumed=True)
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    spark.sql(f"DELETE FROM {name} WHERE id = 1")
    spark.sql(
        f"CALL {CATALOG}.system.expire_snapshots(table => '{table.target.database}.{table.target.table}', "
        "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"
    )
    assert snapshots(spark, table) == 1  # the summary that listed the file is gone

    again = apply_batch(spark, table, files, catalog=CATALOG, run_id="r2", log_consumed=True)
    assert again.files == 0 and rows(spark, table) == []


@pytest.mark.slow
def test_a_batch_of_a_thousand_files_loads_in_one_commit(spark, raw, make_table):
    """A run takes up to trigger.max_files_per_run (1000) files: a backfill's first run does. Each row
    is tagged with its file's position for the order of changes; that tagging must not grow with the
    number of files in a way the JVM cannot plan (it overflowed the stack at 1000)."""
    import pyarrow.parquet as pq

    table = make_table()
    files = 1200
    folder = raw.root / "src"
    folder.mkdir(parents=True)
    for n in range(files):
        pq.write_table(
            pa.Table.from_pylist([change("I", n, f"v{n}", n % 60)], schema=DMS), folder / f"{n:05d}.parquet"
        )

    result = load(spark, table, raw)

    assert (result.files, result.inserted) == (files, files)
    assert len(rows(spark, table)) == files
