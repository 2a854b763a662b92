"""What a batch reports it inserted, updated and deleted equals the oracle's count, under disorder.

Both runtimes run this (make test, make test RUNTIME=glue-6.0): on Spark 3.5 the counts come from the
classification pass, on Spark 4.1 from the MERGE's own commit summary
(lakeloader.engine.merge_with_commit_counts);
the run history and the ledger report these same numbers.
"""

from __future__ import annotations

import pytest

from lakeloader.spark.session import CATALOG
from tests.faults import oracle
from tests.faults.rounds import deliver


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
