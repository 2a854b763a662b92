"""Reconciliation on every commit (issue 41, part 2), on real Iceberg tables and both runtimes: a
normal batch with deletes, late and duplicate changes reconciles clean; a table made to disagree on
purpose (a row written behind the engine's back with plain Spark SQL) is caught, and the table's
`reconcile.on_mismatch` decides: `alarm` publishes and records it, `fail` publishes nothing."""

from __future__ import annotations

import pytest

from lakeloader.engine import merge, merge_statement
from lakeloader.jobs.load import run_tables
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG
from tests.faults import oracle
from tests.faults.rounds import deliver
from tests.spark.merge_batches import DMS, DMS_SEQ, FULL, at, change, rows, seq_change

pytestmark = pytest.mark.spark


def name_of(table) -> str:
    return f"{CATALOG}.{table.target.database}.{table.target.table}"


def run(spark, table, raw, run_id: str):
    (result,) = run_tables(
        spark,
        [table],
        {table.id: list_inputs(str(raw.root), table.source.prefix)},
        catalog=CATALOG,
        run_id=run_id,
        progress=lambda message: None,
    )
    return result


def main_snapshot(spark, table) -> int:
    return spark.sql(f"SELECT snapshot_id FROM {name_of(table)}.refs WHERE name = 'main'").first()[0]


@pytest.mark.slow
def test_batches_with_deletes_late_and_duplicate_changes_reconcile_clean(spark, raw, make_table):
    """Seed 23: five batches that insert, update and delete, with late files, replays, re-deliveries
    and changes older than their key's delete: every commit agrees, with the oracle's counts."""
    table = make_table()
    work = oracle.workload(23, keys=12, events=50, safe=False)
    delivered = deliver(spark, table, raw, work, 23)
    expected = oracle.expected_counts([files for files, _ in delivered])
    found = []
    for (_, result), counts in zip(delivered, expected, strict=True):
        reconciled = result.reconciliation
        if reconciled is None:  # a batch that changes nothing commits nothing on Spark 3.5
            assert counts == (0, 0, 0) and not merge.counts_in_commit(spark)
            continue
        assert reconciled.ok and reconciled.commits == 1, reconciled.describe()
        assert (reconciled.inserted, reconciled.updated, reconciled.deleted) == counts
        assert reconciled.live_delta == counts[0] - counts[2]
        found.append(reconciled)
    assert sum(r.superseded for r in found) > 0  # a key's older changes within one batch
    assert sum(r.deletes_asked for r in found) >= sum(d for _, _, d in expected) > 0


@pytest.mark.slow
def test_late_superseded_and_absent_deletes_are_counted_and_reconcile(spark, raw, make_table):
    table = make_table()
    first = [change("I", 1, "a", 0), change("I", 2, "b", 0), change("I", 4, "d", 0)]
    raw.write_parquet("src/20261101-0800.parquet", first, DMS)
    raw.write_parquet("src/20261101-0810.parquet", [change("D", 1, None, 10)], DMS)
    assert run(spark, table, raw, "first").status == "ok"
    # key 1's update is older than its delete (late); key 2's first update is superseded by its second;
    # key 3 is not in the table (its delete leaves a tombstone, deletes no row); key 4's insert is
    # replayed (asked, and skipped: not newer than the row)
    raw.write_parquet(
        "src/20261101-0900.parquet",
        [
            change("U", 1, "late", 9),
            change("U", 2, "b1", 5),
            change("U", 2, "b2", 6),
            change("D", 3, None, 7),
            change("I", 4, "d", 0),
        ],
        DMS,
    )
    result = run(spark, table, raw, "second")
    assert result.status == "ok", result.error
    found = result.reconciliation
    assert found is not None and found.ok, found and found.describe()
    asked = (found.upserts_asked, found.deletes_asked, found.superseded, found.late)
    assert (asked, (found.inserted, found.updated, found.deleted, found.live_delta)) == (
        (3, 1, 1, 1),
        (0, 1, 0, 0),
    )
    assert rows(spark, table) == [(2, "b2"), (4, "d")]


@pytest.mark.slow
def test_scd2_versions_opened_closed_replaced_and_closed_by_delete_reconcile(spark, raw, make_table):
    table = make_table(mode="scd2", sequence_by="last_update_time")  # then DMS's AR_H_CHANGE_SEQ
    first = [seq_change("I", 1, "a", 0, 1), seq_change("I", 2, "b", 0, 2), seq_change("I", 3, "c", 0, 3)]
    raw.write_parquet("src/20261101-0800.parquet", first, DMS_SEQ)
    assert run(spark, table, raw, "first").status == "ok"
    # key 1 replaced at its own valid_from by a later change of the same instant (the version dropped,
    # a new one opened); key 2 closed and a chain of two versions opened; key 3 closed by its delete
    second = [
        seq_change("U", 1, "a2", 0, 4),
        seq_change("U", 2, "b2", 5, 5),
        seq_change("D", 3, None, 5, 6),
        seq_change("U", 2, "b3", 6, 7),
    ]
    raw.write_parquet("src/20261101-0900.parquet", second, DMS_SEQ)
    result = run(spark, table, raw, "second")
    assert result.status == "ok", result.error
    found = result.reconciliation
    assert found is not None and found.ok, found and found.describe()
    assert (found.inserted, found.updated, found.deleted, found.live_delta) == (3, 2, 1, 2)


class Twin:
    """Once armed, right before the batch's MERGE (merge_statement.before_merge, where the batch writes:
    main, or its audit branch), a second row of key 2 is INSERTed with plain Spark SQL, once: behind the
    engine's back, after it looked at the table (Spark 3.5's classification would otherwise fail the MERGE
    on the duplicate: MERGE_CARDINALITY_VIOLATION)."""

    def __init__(self, monkeypatch):
        self.monkeypatch = monkeypatch
        self.written_to: list[str] = []

    def arm(self) -> None:
        def insert_twin(spark, target: str) -> None:
            if not self.written_to:
                spark.sql(f"INSERT INTO {target} VALUES (2, 'twin', TIMESTAMP '2026-11-01 08:00:00')")
                self.written_to.append(target)

        self.monkeypatch.setattr(merge_statement, "before_merge", insert_twin)


@pytest.fixture
def twin(monkeypatch) -> Twin:
    return Twin(monkeypatch)


def _load_then_change(spark, raw, table, twin: Twin):
    """Keys 1-3 loaded, then a batch that updates key 2 and inserts key 4, its MERGE preceded by a twin."""
    raw.write_parquet(
        "src/LOAD00000001.parquet",
        [{"id": i, "name": n, "last_update_time": at(0)} for i, n in ((1, "a"), (2, "b"), (3, "c"))],
        FULL,
    )
    assert run(spark, table, raw, "load").status == "ok"
    twin.arm()
    raw.write_parquet("src/20261101-0900.parquet", [change("U", 2, "b2", 5), change("I", 4, "d", 5)], DMS)


@pytest.mark.slow
def test_a_row_written_behind_the_engines_back_alarms_and_publishes(spark, raw, make_table, twin):
    table = make_table()  # reconcile.on_mismatch: alarm, the default
    _load_then_change(spark, raw, table, twin)
    result = run(spark, table, raw, "batch")
    assert twin.written_to
    assert result.status == "ok", result.error
    assert rows(spark, table) == [(1, "a"), (2, "b2"), (2, "b2"), (3, "c"), (4, "d")]  # published
    found = result.reconciliation
    assert found is not None and found.mismatched_commits == 1 and not found.ok
    assert found.snapshot_id == main_snapshot(spark, table)
    assert any("MISMATCH" in note for note in result.notes), result.notes
    assert found.run_counts()["reconcile_mismatched_commits"] == 1


@pytest.mark.slow
def test_a_row_written_behind_the_engines_back_fails_the_batch_unpublished(spark, raw, make_table, twin):
    table = make_table(reconcile={"on_mismatch": "fail"})
    _load_then_change(spark, raw, table, twin)
    before, held = main_snapshot(spark, table), rows(spark, table)
    result = run(spark, table, raw, "batch")
    assert "branch_audit_" in twin.written_to[0]  # written where the batch was: its audit branch
    assert result.status == "failed"
    assert "reconciliation mismatch, nothing published" in (result.error or "")
    assert result.reconciliation is not None and result.reconciliation.mismatched_commits == 1
    assert (main_snapshot(spark, table), rows(spark, table)) == (before, held)
    branches = spark.sql(f"SELECT name FROM {name_of(table)}.refs WHERE type = 'BRANCH'").collect()
    assert [b.name for b in branches] == ["main"]  # the audit branch is gone with its snapshot


def test_a_clean_batch_is_published_through_the_audit_branch_when_set_to_fail(spark, raw, make_table):
    table = make_table(reconcile={"on_mismatch": "fail"})
    raw.write_parquet("src/LOAD00000001.parquet", [{"id": 1, "name": "a", "last_update_time": at(0)}], FULL)
    raw.write_parquet("src/20261101-0900.parquet", [change("U", 1, "a2", 5), change("I", 2, "b", 5)], DMS)
    result = run(spark, table, raw, "batch")
    assert result.status == "ok", result.error
    assert result.reconciliation is not None and result.reconciliation.ok
    assert result.quality is None  # no rules: no quality report
    assert rows(spark, table) == [(1, "a2"), (2, "b")]
    assert result.snapshot_id == main_snapshot(spark, table)


@pytest.mark.slow
def test_scd2_a_second_current_version_written_behind_the_engines_back_is_caught(spark, raw, make_table):
    table = make_table(mode="scd2", sequence_by="last_update_time")
    raw.write_parquet("src/20261101-0800.parquet", [change("I", 1, "a", 0), change("I", 2, "b", 0)], DMS)
    first = run(spark, table, raw, "first")
    assert first.status == "ok" and first.reconciliation is not None and first.reconciliation.ok
    spark.sql(
        f"INSERT INTO {name_of(table)} SELECT id, name, last_update_time, valid_from, valid_to, is_current, "
        f"concat(version_key, '-twin'), row_hash FROM {name_of(table)} WHERE id = 1"
    )
    raw.write_parquet("src/20261101-0900.parquet", [change("U", 1, "a2", 5)], DMS)
    result = run(spark, table, raw, "second")
    assert result.status == "ok", result.error
    found = result.reconciliation
    assert found is not None and found.mismatched_commits == 1, found and found.describe()
