"""PendingAgeSeconds: how long each table's oldest file still to load has waited, measured by the
sweep and written as CloudWatch embedded-metric log lines (no API call, no extra permission); and,
for a table with `trigger.freshness_minutes`, PendingAgeOverFreshness: that wait over its freshness.

Dimensions Ledger (the stage's ledger table: stages of one account never mix) and TableId. The stack
has one alarm at PendingAgeOverFreshness >= 1 over every table (infra.monitoring): one threshold serves
tables of any freshness.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from lakeloader.control.contract import (
    METRIC_DIMENSIONS,
    METRICS_NAMESPACE,
    PENDING_AGE_METRIC,
    PENDING_AGE_OVER_FRESHNESS_METRIC,
    TABLE_HELD_METRIC,
)
from lakeloader.control.ledger import LedgerObject


def pending_age_seconds(objects: Sequence[LedgerObject], now: float) -> float:
    """Seconds since the oldest of `objects` arrived; 0 when there is none."""
    arrivals = [o.event_time or o.first_seen for o in objects if o.event_time or o.first_seen]
    if not arrivals:
        return 0.0
    oldest = datetime.fromisoformat(min(arrivals).replace("Z", "+00:00")).timestamp()
    return max(0.0, now - oldest)


def publish_table_held(ledger_table: str, table_id: str) -> None:
    """TableHeld = 1, once: when the Lambda records a found table it cannot load (no keys)."""
    with single_metric(
        name=TABLE_HELD_METRIC,
        unit=MetricUnit.Count,
        value=1,
        namespace=METRICS_NAMESPACE,
        default_dimensions=dict(zip(METRIC_DIMENSIONS, (ledger_table, table_id), strict=True)),
    ):
        pass  # written when the block closes


def publish_pending_age(
    ledger_table: str,
    open_objects: Mapping[str, Sequence[LedgerObject]],
    now: float,
    freshness_seconds: Mapping[str, int],
) -> None:
    """Each table's PendingAgeSeconds, and PendingAgeOverFreshness where `freshness_seconds` has the
    table (its trigger.freshness_minutes in seconds)."""
    for table_id, objects in open_objects.items():
        age = pending_age_seconds(objects, now)
        dimensions = dict(zip(METRIC_DIMENSIONS, (ledger_table, table_id), strict=True))
        with single_metric(
            name=PENDING_AGE_METRIC,
            unit=MetricUnit.Seconds,
            value=age,
            namespace=METRICS_NAMESPACE,
            default_dimensions=dimensions,
        ):
            pass  # written when the block closes
        if freshness_seconds.get(table_id):
            with single_metric(
                name=PENDING_AGE_OVER_FRESHNESS_METRIC,
                unit=MetricUnit.NoUnit,
                value=age / freshness_seconds[table_id],
                namespace=METRICS_NAMESPACE,
                default_dimensions=dimensions,
            ):
                pass
