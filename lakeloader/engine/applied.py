"""What one batch did to its table (`Applied`): what apply_batch and the modes' writes (merge, scd2)
fill in, and what the job's TableResult extends. In a module of its own so that the writes and
apply_batch, which calls them, both import it and neither the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakeloader.engine.quality import QualityReport
from lakeloader.reconciliation import Reconciliation


@dataclass(kw_only=True)
class Applied:
    """What one batch did to its table (the job's TableResult extends it into a row of its run summary)."""

    files: int = 0  # the files read; those an earlier commit consumed are not counted
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
    reconciliation: Reconciliation | None = None
