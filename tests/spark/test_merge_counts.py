"""What a batch reports it inserted, updated and deleted equals the oracle's count, under disorder.

Both runtimes run this (make test, make test RUNTIME=glue-6.0): on Spark 3.5 the counts come from the
classification pass, on Spark 4.1 from the MERGE's own commit summary
(lakeloader.engine.merge_with_commit_counts);
the run history and the ledger report these same numbers.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from lakeloader.spark.session import CATALOG
from tests.faults import oracle
from tests.faults.oracle import T0, Change, RawFile
from tests.faults.rounds import deliver, deliver_rounds


@pytest.mark.slow
def test_each_batchs_counts_equal_the_oracles_under_disorder(spark, raw, make_table):
    """Seed 23: five batches that insert, update and delete, with late files, replays, re-deliveries
    and changes older than their key's delete."""
    table = make_table()
    work = oracle.workload(23, keys=12, events=50, safe=False)
    delivered = deliver(spark, table, raw, work, 23)
    expected = oracle.expected_counts([files for files, _ in delivered])
    reported = [(result.inserted, result.updated, result.deleted) for _, result in delivered]
    assert reported == expected
    assert (
        sum(i - d for i, _, d in expected)
        == spark.table(f"{CATALOG}.{table.target.database}.{table.target.table}").count()
    )


def _change(op: str, key: int, minute: int, n: int) -> Change:
    return Change(key, op, f"k{key}m{minute}", "Leeds", T0 + timedelta(minutes=minute), f"{n:035d}")


def test_a_batchs_reported_counts_equal_the_oracles_each_kind_a_different_number(spark, raw, make_table):
    """A batch reports what it inserted (4), updated (3) and deleted (2), and what it asked of the table:
    superseded changes (a newer change of the same key in the batch: 1) and late ones (older than their
    key's delete in an earlier batch: 5), each as the oracle counts them. Different numbers of each, so
    reporting one count as another (updated as deleted, late as superseded) fails."""
    load = RawFile("LOAD00000001.parquet", [Change(k, "L", f"k{k}", "Leeds", T0, None) for k in range(1, 11)])
    deletes = RawFile("202611010801.parquet", [_change("D", k, 30, k) for k in (6, 7, 8, 9, 10)])
    batch = [
        *[_change("I", k, 40, 100 + k) for k in (11, 12, 13, 14)],  # inserted
        *[_change("U", k, 40, 100 + k) for k in (1, 2, 3)],  # updated, key 1 twice (superseded)
        _change("U", 1, 41, 120),
        *[_change("D", k, 40, 100 + k) for k in (4, 5)],  # deleted
        *[_change("U", k, 20, 200 + k) for k in (6, 7, 8, 9, 10)],  # late: older than the deletes
    ]
    rounds = [[load], [deletes], [RawFile("202611010802.parquet", batch)]]
    expected = oracle.expected_batches(rounds)[-1]
    assert (expected.inserted, expected.updated, expected.deleted) == (4, 3, 2)
    assert (expected.superseded, expected.late) == (1, 5)

    *_, (_, result) = deliver_rounds(spark, make_table(), raw, rounds)

    found = result.reconciliation
    assert found is not None and found.ok, found
    reported = oracle.BatchCounts(
        result.inserted, result.updated, result.deleted, found.superseded, found.late
    )
    assert reported == expected
