"""What a batch needs to know of its table, read from the table's metadata JSON as plain data.

No PySpark: lakeloader.iceberg reads the metadata (one catalog round trip) and hands it here, so the
walk of `main`'s ancestry is unit- and mutation-tested without a JVM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# What lakeloader records in the summary of every snapshot that commits a batch.
SUMMARY_FILE_IDS = "lakeloader.input-ids"  # the input files the commit consumed
SUMMARY_FILE_NAMES = "lakeloader.input-files"
SUMMARY_RUN_ID = "lakeloader.run-id"
SUMMARY_TABLE_ID = "lakeloader.table-id"


@dataclass(frozen=True)
class TableState:
    """`committed_file_ids`: the input files recorded by the snapshots `main` descends from. Only main's
    ancestry counts: an audit branch that a killed run never published consumed nothing."""

    snapshot_id: int | None = None
    records: int = 0  # the rows the table's data files hold (snapshot summary's total-records)
    committed_file_ids: frozenset[str] = frozenset()

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any]) -> TableState:
        """From Iceberg's table metadata JSON, as iceberg.read_state reads it."""
        snapshots = {s["snapshot-id"]: s for s in metadata.get("snapshots", [])}
        current = snapshots.get(metadata.get("current-snapshot-id"))
        ids: set[str] = set()
        snapshot = current
        while snapshot is not None:
            recorded = snapshot.get("summary", {}).get(SUMMARY_FILE_IDS)
            ids.update(recorded.split(",") if recorded else ())
            snapshot = snapshots.get(snapshot.get("parent-snapshot-id"))
        if current is None:
            return cls()
        records = int(current.get("summary", {}).get("total-records") or 0)
        return cls(current["snapshot-id"], records, frozenset(ids))
