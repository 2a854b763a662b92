"""A truncated Parquet file among good files, on the deployed stage: S3 -> Lambda -> Glue on local Spark.

Every good file is applied and the table matches the oracle; the truncated file is named alone, with
the reader's reason, and quarantined (the e2e stage quarantines at the first failure: max_attempts 1,
tests/e2e/conftest.py), and FilesQuarantined is published for the table's alarm. Uses `ops.shipments`
only: no other test reads it.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeloader.control.contract import FILES_QUARANTINED_METRIC, METRIC_DIMENSIONS, METRICS_NAMESPACE
from lakeloader.control.ledger import DONE, QUARANTINED
from lakeloader_dev.emulator.loop import find_object, upload, wait_for_objects

pytestmark = pytest.mark.e2e

TABLE, PREFIX = "ops.shipments", "ops/public/shipments/"
LOAD = f"{PREFIX}LOAD00000001.parquet"
CDC = [f"{PREFIX}20261103-09{minute}.parquet" for minute in ("10", "20", "30")]
CUT = CDC[1]


def parquet(rows: list[dict[str, Any]]) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    return buffer.getvalue()


def shipment(shipment_id: int, status: str | None, minute: int, op: str | None = None) -> dict[str, Any]:
    row = {"shipment_id": shipment_id, "status": status, "last_update_time": datetime(2026, 11, 3, 9, minute)}
    return ({"Op": op} if op else {}) | row


@pytest.fixture(scope="module")
def landed(e2e) -> dict[str, str]:
    """A full load of 1-3, then: update 2; update 3 (cut in half, as an interrupted upload leaves it);
    insert 4 and delete 1."""
    whole = parquet([shipment(3, "lost", 20, "U")])
    files = [
        (parquet([shipment(n, "new", 0) for n in (1, 2, 3)]), LOAD),
        (parquet([shipment(2, "sent", 10, "U")]), CDC[0]),
        (whole[: len(whole) // 2], CUT),
        (parquet([shipment(4, "new", 30, "I"), shipment(1, None, 30, "D")]), CDC[2]),
    ]
    upload(e2e.stack, files)
    return wait_for_objects(e2e.stack, {TABLE: [LOAD, *CDC]}, timeout=900, expected_failures=[TABLE])[TABLE]


def test_every_good_file_is_applied_and_the_table_matches_the_oracle(e2e, landed):
    from lakeloader_dev.emulator.read_tables import read_tables

    assert landed == {LOAD: DONE, CDC[0]: DONE, CUT: QUARANTINED, CDC[2]: DONE}
    (rows,) = read_tables(
        e2e.stack.warehouse, [TABLE], env=e2e.env, database_prefix=e2e.stack.database_prefix
    ).values()
    assert sorted((r["shipment_id"], r["status"]) for r in rows) == [(2, "sent"), (3, "new"), (4, "new")]


def test_the_error_names_the_truncated_file_only_with_the_readers_reason(e2e, landed):
    cut = find_object(e2e.stack.ledger(), TABLE, CUT)
    assert cut is not None and cut.status == QUARANTINED, cut
    assert f"file '{CUT}': cannot be read" in cut.error and "Parquet" in cut.error, cut.error
    for other in (LOAD, CDC[0], CDC[2]):
        assert other not in cut.error


def test_the_quarantine_publishes_the_alarms_metric(e2e, landed):
    now = datetime.now(UTC)
    dimensions = [
        {"Name": name, "Value": value}
        for name, value in zip(METRIC_DIMENSIONS, (e2e.stack.ledger_table, TABLE), strict=True)
    ]
    points = boto3.client("cloudwatch").get_metric_statistics(
        Namespace=METRICS_NAMESPACE,
        MetricName=FILES_QUARANTINED_METRIC,
        Dimensions=dimensions,
        StartTime=now - timedelta(hours=1),
        EndTime=now + timedelta(minutes=5),
        Period=3600,
        Statistics=["Sum"],
    )["Datapoints"]
    assert sum(p["Sum"] for p in points) == 1
