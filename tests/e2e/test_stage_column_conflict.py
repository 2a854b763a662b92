"""A DMS Parquet file whose `amount` is a string where the batch's other files (and then the table) have
double, on the deployed stage: S3 -> Lambda -> Glue on local Spark.

The three good files are applied; the fourth is named with its column and both types and quarantined
(the e2e stage quarantines at the first failure: max_attempts 1, tests/e2e/conftest.py); `status` shows
why, `requeue` gives it back to the runs (where it fails the same way against the table), `skip` gives
it up. Uses `ops.payments` only: no other test reads it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from lakeloader.control.ledger import DONE, QUARANTINED, SKIPPED
from lakeloader_dev.emulator.loop import find_object, lakeloader, upload, wait_for_objects
from tests.e2e.s3_to_iceberg_world import parquet, status_of

pytestmark = pytest.mark.e2e

TABLE, PREFIX = "ops.payments", "ops/public/payments/"
LOAD = f"{PREFIX}LOAD00000001.parquet"
CDC = [f"{PREFIX}20261103-09{minute}.parquet" for minute in ("10", "20", "30")]
BAD = CDC[1]
SWEEP_AT_ONCE = 1.0


def payment(payment_id: int, amount: float | str, minute: int, op: str | None = None) -> dict[str, Any]:
    row = {"payment_id": payment_id, "amount": amount, "last_update_time": datetime(2026, 11, 3, 9, minute)}
    return ({"Op": op} if op else {}) | row


@pytest.fixture(scope="module")
def landed(e2e) -> dict[str, str]:
    """A full load of 1-3; then: update 2; update 3 with amount a string; insert 4."""
    files = [
        (parquet([payment(n, float(n), 0) for n in (1, 2, 3)]), LOAD),
        (parquet([payment(2, 20.5, 10, "U")]), CDC[0]),
        (parquet([payment(3, "30.25", 20, "U")]), BAD),  # amount: string
        (parquet([payment(4, 40.0, 30, "I")]), CDC[2]),
    ]
    upload(e2e.stack, files)
    return wait_for_objects(e2e.stack, {TABLE: [LOAD, *CDC]}, timeout=900, expected_failures=[TABLE])[TABLE]


def test_three_files_load_and_the_fourth_is_quarantined_naming_amount_string_and_double(e2e, landed):
    from lakeloader_dev.emulator.read_tables import read_tables

    assert landed == {LOAD: DONE, CDC[0]: DONE, BAD: QUARANTINED, CDC[2]: DONE}
    (rows,) = read_tables(
        e2e.stack.warehouse, [TABLE], env=e2e.env, database_prefix=e2e.stack.database_prefix
    ).values()
    assert sorted((r["payment_id"], r["amount"]) for r in rows) == [(1, 1.0), (2, 20.5), (3, 3.0), (4, 40.0)]
    bad = find_object(e2e.stack.ledger(), TABLE, BAD)
    assert f"file '{BAD}', column 'amount': string where " in bad.error, bad.error
    assert "has double" in bad.error and "declare amount: double in source.schema" in bad.error, bad.error


def test_status_shows_it_requeue_retries_it_and_skip_gives_it_up(e2e, landed):
    stuck = status_of(TABLE)
    assert [(s["key"], s["status"]) for s in stuck["stuck"]] == [(BAD, QUARANTINED)]
    assert "column 'amount': string where" in stuck["stuck"][0]["error"]

    code, out = lakeloader("requeue", "--stage", "dev", "--table", TABLE, "--reason", "retry")
    assert code == 0 and f"{TABLE}: 1 requeued" in out, out
    again = wait_for_objects(
        e2e.stack, {TABLE: [BAD]}, timeout=900, sweep_after=SWEEP_AT_ONCE, expected_failures=[TABLE]
    )
    assert again[TABLE] == {BAD: QUARANTINED}  # against the table now: string where the table has double
    retried = find_object(e2e.stack.ledger(), TABLE, BAD)
    assert "column 'amount': string where the table has double" in retried.error, retried.error

    code, out = lakeloader("skip", "--stage", "dev", "--table", TABLE, "--reason", "bad export")
    assert code == 0 and f"{TABLE}: 1 skipped" in out, out
    assert find_object(e2e.stack.ledger(), TABLE, BAD).status == SKIPPED
    assert status_of(TABLE)["counts"] == {"done": 3, "skipped": 1}
