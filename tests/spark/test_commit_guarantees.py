"""What a commit promises, pinned directly on real Iceberg tables: a file consumed commits ago is
never applied again, in every mode, also once the snapshots that recorded it are expired (the input
log remembers); and the last check before `main` moves (the drain's lock re-check) stops the commit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lakeloader.control.ledger import LockLostError
from lakeloader.engine import apply_batch
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG
from lakeloader.spark.sql import timestamp_literal
from tests.spark.merge_batches import DMS, change, rows, snapshots

# slow (make check leaves it out): every mode through snapshot expiry and the commit's last check
pytestmark = [pytest.mark.spark, pytest.mark.slow]

MODES = ["merge", "append", "overwrite", "scd2"]


def apply(spark, table, raw, *names: str, log_consumed: bool = True):
    files = [f for f in list_inputs(str(raw.root), table.source.prefix) if f.name.split("/")[-1] in names]
    assert len(files) == len(names)
    return apply_batch(spark, table, files, catalog=CATALOG, run_id="run", log_consumed=log_consumed)


def table_rows(spark, table) -> list[tuple]:
    return (
        rows(spark, table, "id, name") if table.mode != "scd2" else rows(spark, table, "id, name, is_current")
    )


@pytest.mark.parametrize("mode", MODES)
def test_a_file_consumed_commits_ago_is_skipped_also_after_snapshot_expiry(spark, raw, make_table, mode):
    table = make_table(mode=mode)
    for name, changes in (
        ("a.parquet", [change("I", 1, "a", 1)]),
        ("b.parquet", [change("U", 1, "b", 2)]),
        ("c.parquet", [change("I", 2, "c", 3)]),
    ):
        raw.write_parquet(f"src/{name}", changes, DMS)
        apply(spark, table, raw, name)
    raw.write_parquet("src/d.parquet", [change("I", 3, "d", 4)], DMS)
    expected = {  # after d alone
        "merge": [(1, "b"), (2, "c"), (3, "d")],
        "append": [(1, "a"), (1, "b"), (2, "c"), (3, "d")],
        "overwrite": [(3, "d")],
        "scd2": [(1, "a", False), (1, "b", True), (2, "c", True), (3, "d", True)],
    }[mode]

    # a: consumed three commits ago; the table's own history says so (on AWS the ledger, not the
    # input log, keeps the rest of the record)
    again = apply(spark, table, raw, "a.parquet", "d.parquet", log_consumed=False)
    assert again.files == 1 and table_rows(spark, table) == expected

    name = f"{CATALOG}.{table.target.database}.{table.target.table}"
    future = timestamp_literal(datetime.now(UTC) + timedelta(days=1))
    spark.sql(
        f"CALL {CATALOG}.system.expire_snapshots(table => '{name}', older_than => {future}, retain_last => 1)"
    )
    assert snapshots(spark, table) == 1  # no snapshot but the last records a, b or c any more
    raw.write_parquet("src/e.parquet", [change("I", 4, "e", 5)], DMS)

    late = apply(spark, table, raw, "a.parquet", "b.parquet", "c.parquet", "d.parquet", "e.parquet")
    assert late.files == 1  # only e: the input log remembers what the expired snapshots recorded
    assert (4, "e") in {r[:2] for r in table_rows(spark, table)}
    assert len(table_rows(spark, table)) == len(expected) + (0 if mode == "overwrite" else 1)


@pytest.mark.parametrize("mode", MODES)
def test_the_last_check_before_main_moves_stops_the_commit(spark, raw, make_table, mode):
    """The drain's lock re-check raises right before the commit: nothing of the batch is committed."""
    table = make_table(mode=mode)
    raw.write_parquet("src/a.parquet", [change("I", 1, "a", 1)], DMS)
    apply(spark, table, raw, "a.parquet")
    before, commits = table_rows(spark, table), snapshots(spark, table)
    raw.write_parquet("src/b.parquet", [change("U", 1, "b", 2), change("I", 2, "new", 2)], DMS)
    checks: list[int] = []

    def lost_the_lock() -> None:
        checks.append(snapshots(spark, table))
        raise LockLostError(f"table {table.id!r}: run 'run' no longer holds the table lock")

    files = [f for f in list_inputs(str(raw.root), table.source.prefix) if f.name.endswith("b.parquet")]
    with pytest.raises(LockLostError):
        apply_batch(spark, table, files, catalog=CATALOG, run_id="run", before_publish=lost_the_lock)
    assert checks == [commits]  # asked once, with the batch ready and nothing committed yet
    assert table_rows(spark, table) == before and snapshots(spark, table) == commits
