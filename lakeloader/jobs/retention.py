"""The cut-offs `maintain` removes history before, from the table's retention settings and a clock.

Plain Python (no PySpark), so the units (tombstones and snapshots in days, orphan files in hours)
are unit-tested at their boundaries and mutation-tested without a JVM.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from lakeloader.config import TableConfig
from lakeloader.control.ledger.lock import DEFAULT_LOCK_TTL_SECONDS


@dataclass(frozen=True)
class Cutoffs:
    """Older than these goes: tombstones recorded, snapshots committed, orphan files written, and
    audit branches last written (a run that wrote its branch longer ago than the table lock's lease
    was killed before it published: its lock lapsed, so its last check before publishing fails)."""

    tombstones: datetime
    snapshots: datetime
    orphan_files: datetime
    audit_branches: datetime


def cutoffs(table: TableConfig, now: datetime) -> Cutoffs:
    settings = table.maintenance
    return Cutoffs(
        tombstones=now - timedelta(days=table.tombstones.retain_days),
        snapshots=now - timedelta(days=settings.snapshots.older_than_days),
        orphan_files=now - timedelta(hours=settings.orphan_files.older_than_hours),
        audit_branches=now - timedelta(seconds=DEFAULT_LOCK_TTL_SECONDS),
    )
