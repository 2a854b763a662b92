"""What one batch did to its table (`BatchResult`): what apply_batch and the modes' writes (merge, scd2)
fill in, and what the job's LoadResult (one table's load in a run) extends. In a module of its own so
that the writes and apply_batch, which calls them, both import it and neither the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakeloader.engine import reconciliation
from lakeloader.engine.quality import QualityReport, combine_reports
from lakeloader.engine.reconciliation import CommitReconciliation

COUNTED = ("files", "changes", "inserted", "updated", "deleted")  # what several batches add up to


@dataclass(kw_only=True)
class BatchResult:
    """What one batch did to its table (the job's LoadResult extends it into a row of its run summary)."""

    files: int = 0  # the files read; those an earlier commit consumed are not counted
    read: list[str] = field(default_factory=list)  # their names (relative to the raw root), for lineage
    changes: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    snapshot_id: int | None = None
    notes: list[str] = field(default_factory=list)
    quality: QualityReport | None = None  # rule outcomes when the table has quality rules
    # cdc: snapshot: the files whose snapshot is not complete yet; not consumed, a later run takes them
    waiting: list[str] = field(default_factory=list)
    # each commit's counts held against what the table reports of it (merge, scd2; engine.commit_check)
    reconciliation: CommitReconciliation | None = None

    def add(self, other: BatchResult) -> None:
        """Take in what a later batch of the same table did (a run's batches, a batch's snapshots): its
        counts add up, its notes follow, its snapshot is the newest (where it has one)."""
        for counted in COUNTED:
            setattr(self, counted, getattr(self, counted) + getattr(other, counted))
        self.snapshot_id = other.snapshot_id or self.snapshot_id
        self.read.extend(other.read)
        self.notes.extend(other.notes)
        self.quality = combine_reports(self.quality, other.quality)
        self.reconciliation = reconciliation.combine(self.reconciliation, other.reconciliation)
