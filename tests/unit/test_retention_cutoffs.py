"""maintain's cut-offs in their units: tombstones and snapshots in days, orphan files in hours."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lakeloader.config import TableConfig
from lakeloader.jobs.retention import cutoffs

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def table(**overrides) -> TableConfig:
    spec = {
        "id": "crm.customers",
        "source": {"prefix": "crm/", "cdc": "dms"},
        "target": {"database": "crm", "table": "customers"},
        "keys": ["id"],
        **overrides,
    }
    return TableConfig.model_validate(spec)


def test_the_defaults():
    cut = cutoffs(table(), NOW)
    assert cut.tombstones == NOW - timedelta(days=7)
    assert cut.snapshots == NOW - timedelta(days=7)
    assert cut.orphan_files == NOW - timedelta(hours=72)
    assert cut.audit_branches == NOW - timedelta(hours=2)  # the table lock's lease


@pytest.mark.parametrize("days", [0.5, 2, 30])
def test_tombstones_and_snapshots_count_days(days):
    cut = cutoffs(
        table(tombstones={"retain_days": days}, maintenance={"snapshots": {"older_than_days": days}}), NOW
    )
    assert cut.tombstones == cut.snapshots == NOW - timedelta(days=days)


@pytest.mark.parametrize("hours", [24, 36.5, 200])
def test_orphan_files_count_hours(hours):
    cut = cutoffs(table(maintenance={"orphan_files": {"older_than_hours": hours}}), NOW)
    assert cut.orphan_files == NOW - timedelta(hours=hours)


def test_each_cutoff_reads_its_own_setting():
    cut = cutoffs(
        table(
            tombstones={"retain_days": 1},
            maintenance={"snapshots": {"older_than_days": 2}, "orphan_files": {"older_than_hours": 30}},
        ),
        NOW,
    )
    assert (NOW - cut.tombstones, NOW - cut.snapshots, NOW - cut.orphan_files) == (
        timedelta(days=1),
        timedelta(days=2),
        timedelta(hours=30),
    )
