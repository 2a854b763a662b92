"""Which change of a key wins: the sequence tuple, its tie breakers, replays, and the merge's guard
against a commit that lands after classification; on real Iceberg tables."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakeloader.engine import merge, merge_statement
from lakeloader.spark.session import CATALOG
from tests.spark.merge_batches import (
    DMS,
    DMS_SEQ,
    at,
    change,
    load,
    rows,
    seq_change,
    snapshots,
    unchanged_since,
)

pytestmark = pytest.mark.spark


def test_latest_change_per_key_wins_within_a_batch(spark, raw, make_table):
    table = make_table()
    raw.write_parquet(
        "src/20261101-0900.parquet",
        [change("I", 1, "a", 1), change("U", 1, "b", 3), change("U", 1, "c", 2), change("U", 2, "x", 1)],
        DMS,
    )
    load(spark, table, raw)
    assert rows(spark, table) == [(1, "b"), (2, "x")]


def test_equal_sequence_ties_are_broken_by_file_then_row_order(spark, raw, make_table):
    table = make_table()
    raw.write_parquet(
        "src/20261101-0900.parquet", [change("I", 1, "first", 1), change("U", 1, "second", 1)], DMS
    )
    raw.write_parquet("src/20261101-0901.parquet", [change("U", 2, "early", 1)], DMS)
    raw.write_parquet("src/20261101-0902.parquet", [change("U", 2, "late-file", 1)], DMS)
    load(spark, table, raw)
    assert rows(spark, table) == [(1, "second"), (2, "late-file")]


@pytest.mark.slow
def test_equal_time_with_a_higher_change_sequence_in_a_later_batch_applies(spark, raw, make_table):
    table = make_table()  # DMS default: last_update_time, then AR_H_CHANGE_SEQ
    raw.write_parquet("src/20261101-0900.parquet", [seq_change("I", 1, "a", 1, 1)], DMS_SEQ)
    load(spark, table, raw)
    # same transaction (same timestamp), the next change lands in the next file
    raw.write_parquet("src/20261101-0901.parquet", [seq_change("U", 1, "b", 1, 2)], DMS_SEQ)
    result = load(spark, table, raw)
    assert (result.updated, rows(spark, table)) == (1, [(1, "b")])
    raw.write_parquet("src/20261101-0902.parquet", [seq_change("D", 1, "b", 1, 3)], DMS_SEQ)
    assert load(spark, table, raw).deleted == 1 and rows(spark, table) == []


@pytest.mark.slow
def test_exact_replay_of_the_last_change_is_a_no_op(spark, raw, make_table):
    table = make_table()
    raw.write_parquet(
        "src/20261101-0900.parquet", [seq_change("I", 1, "a", 1, 1), seq_change("U", 1, "b", 1, 2)], DMS_SEQ
    )
    load(spark, table, raw)
    before = (rows(spark, table), snapshots(spark, table))
    raw.write_parquet("src/20261101-0901.parquet", [seq_change("U", 1, "b", 1, 2)], DMS_SEQ)  # re-delivered
    result = load(spark, table, raw)
    assert (result.inserted, result.updated, result.deleted) == (0, 0, 0)
    assert rows(spark, table) == before[0] and unchanged_since(spark, table, before[1])


@pytest.mark.slow
def test_replayed_earlier_change_with_an_equal_time_does_not_regress(spark, raw, make_table):
    table = make_table()
    raw.write_parquet(
        "src/20261101-0900.parquet",
        [seq_change("I", 1, "a", 1, 1), seq_change("U", 1, "b", 1, 2), seq_change("I", 2, "x", 1, 3)],
        DMS_SEQ,
    )
    raw.write_parquet("src/20261101-0901.parquet", [seq_change("U", 2, "y", 1, 4)], DMS_SEQ)
    load(spark, table, raw)
    assert rows(spark, table) == [(1, "b"), (2, "y")]
    # the earlier changes arrive again: same time, lower change numbers (a delete among them)
    raw.write_parquet(
        "src/20261101-0902.parquet", [seq_change("U", 1, "a", 1, 1), seq_change("D", 2, "x", 1, 3)], DMS_SEQ
    )
    result = load(spark, table, raw)
    assert (result.inserted, result.updated, result.deleted) == (0, 0, 0)
    assert rows(spark, table) == [(1, "b"), (2, "y")]


def test_within_a_batch_the_tuple_decides_before_file_and_row_order(spark, raw, make_table):
    table = make_table()
    raw.write_parquet(
        "src/20261101-0900.parquet",
        [seq_change("U", 1, "newest", 1, 9), seq_change("U", 1, "older", 1, 5)],
        DMS_SEQ,
    )
    raw.write_parquet(
        "src/20261101-0901.parquet",
        [seq_change("U", 1, "later-file", 1, 7), seq_change("U", 2, "t", 1, 1)],
        DMS_SEQ,
    )
    load(spark, table, raw)
    assert rows(spark, table) == [(1, "newest"), (2, "t")]


@pytest.mark.slow
def test_a_tie_breaker_column_appearing_later_is_added_and_orders_from_then_on(spark, raw, make_table):
    table = make_table()
    raw.write_parquet("src/20261101-0900.parquet", [change("I", 1, "a", 1)], DMS)  # no header column yet
    load(spark, table, raw)
    # the DMS task starts adding AR_H_CHANGE_SEQ: held rows read NULL there, the oldest
    raw.write_parquet("src/20261101-0901.parquet", [seq_change("U", 1, "b", 1, 5)], DMS_SEQ)
    assert load(spark, table, raw).updated == 1
    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    assert "AR_H_CHANGE_SEQ" in spark.table(name).columns
    # a file without the column again (say, a re-sent full load at that time): NULL is older, skipped
    raw.write_parquet("src/20261101-0902.parquet", [change("U", 1, "stale", 1)], DMS)
    assert load(spark, table, raw).updated == 0
    raw.write_parquet("src/20261101-0903.parquet", [seq_change("U", 1, "c", 1, 6)], DMS_SEQ)
    assert load(spark, table, raw).updated == 1
    assert rows(spark, table, "id, name, AR_H_CHANGE_SEQ") == [(1, "c", f"2026110108000000{6:019d}")]


@pytest.mark.slow
def test_debezium_source_position_breaks_equal_source_times(spark, raw, make_table):
    table = make_table(source={"format": "json", "cdc": "debezium"})
    raw.write_json(
        "src/0001.json", [{"id": 1, "name": "a", "__op": "c", "__source_ts_ms": 5, "__source_lsn": 100}]
    )
    load(spark, table, raw)
    raw.write_json(
        "src/0002.json", [{"id": 1, "name": "b", "__op": "u", "__source_ts_ms": 5, "__source_lsn": 101}]
    )
    assert load(spark, table, raw).updated == 1
    raw.write_json(
        "src/0003.json", [{"id": 1, "name": "a", "__op": "u", "__source_ts_ms": 5, "__source_lsn": 100}]
    )
    assert load(spark, table, raw).updated == 0
    assert rows(spark, table) == [(1, "b")]


@pytest.mark.slow
def test_sequence_by_list_without_a_cdc_flavour(spark, raw, make_table):
    table = make_table(source={"cdc": "none"}, sequence_by=["updated_on", "revision"])
    schema = pa.schema(
        [("id", pa.int64()), ("name", pa.string()), ("updated_on", pa.int32()), ("revision", pa.int32())]
    )
    raw.write_parquet("src/a.parquet", [{"id": 1, "name": "r2", "updated_on": 7, "revision": 2}], schema)
    load(spark, table, raw)
    raw.write_parquet(
        "src/b.parquet",
        [
            {"id": 1, "name": "r1", "updated_on": 7, "revision": 1},
            {"id": 1, "name": "r10", "updated_on": 7, "revision": 10},
        ],
        schema,
    )
    load(spark, table, raw)
    assert rows(spark, table) == [(1, "r10")]  # 10 > 2 as numbers: the column's own type orders


@pytest.mark.slow
@pytest.mark.parametrize(
    ("concurrent", "expected"),
    [
        ((2, 9, "concurrent-newer"), "concurrent-newer"),  # newer than the batch's change: kept
        ((2, 3, "concurrent-older"), "batch"),  # same time, lower change number: the batch's wins
    ],
)
def test_the_merge_guard_keeps_a_commit_that_lands_after_classification(
    spark, raw, make_table, monkeypatch, concurrent, expected
):
    table = make_table()
    raw.write_parquet("src/20261101-0900.parquet", [seq_change("I", 1, "first", 1, 1)], DMS_SEQ)
    load(spark, table, raw)
    minute, change_no, value = concurrent

    def commit_concurrently(session, target):
        # another writer commits between this run's classification and its MERGE
        number = f"2026110108000000{change_no:019d}"
        session.sql(
            f"UPDATE {target} SET name = '{value}', last_update_time = TIMESTAMP '{at(minute)}', "
            f"AR_H_CHANGE_SEQ = '{number}' WHERE id = 1"
        )

    monkeypatch.setattr(merge_statement, "before_merge", commit_concurrently)
    raw.write_parquet("src/20261101-0901.parquet", [seq_change("U", 1, "batch", 2, 5)], DMS_SEQ)
    result = load(spark, table, raw)
    # Classification saw the row before the concurrent commit and counted its update; where the MERGE
    # counts itself, the count is what it did.
    assert result.updated == (expected == "batch" if merge.counts_in_commit(spark) else 1)
    assert rows(spark, table) == [(1, expected)]
