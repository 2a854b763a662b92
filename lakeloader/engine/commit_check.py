"""Reconciliation on every commit, the Spark side: the metrics a batch's passes observe of what its
latest changes asked for, and the check right after the commit, against the snapshot summary it
wrote and its parent's (lakeloader.engine.reconciliation holds the rules, without Spark).

A disagreement either fails the batch (`reconcile.on_mismatch: fail`: the batch was written to an
audit branch, lakeloader.engine.gate, and is never published) or is recorded on the batch's result
(`alarm`): the run record keeps it and the drain publishes the ReconciliationMismatch metric.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from lakeloader import iceberg
from lakeloader.config import TableConfig
from lakeloader.engine import reconciliation
from lakeloader.iceberg.commit import Destination
from lakeloader.spark.columns import OP
from lakeloader.spark.errors import LakeloaderError
from lakeloader.spark.progress import Progress
from lakeloader.spark.session import Metrics
from lakeloader.spark.sql import count_equal

if TYPE_CHECKING:
    from lakeloader.engine.batch_result import BatchResult

OBSERVED_WAIT_SECONDS = 60.0  # a query's observed metrics arrive through Spark's listener bus


class ReconciliationError(LakeloaderError):
    """A commit the table disagrees with, on a table whose `reconcile.on_mismatch` is `fail`: raised on
    the audit branch, before anything is published."""

    def __init__(self, table_id: str, found: reconciliation.CommitReconciliation):
        self.table_id = table_id
        self.reconciliation = found
        super().__init__(
            f"table {table_id!r}: reconciliation mismatch, nothing published (reconcile.on_mismatch: "
            f"fail): {'; '.join(found.mismatches)}"
        )


def asked_metrics() -> dict[str, str]:
    """Observed over a batch's latest change per key (Metrics.on): how many there are, and how many
    delete."""
    return {"asked_rows": "count(1)", "asked_deletes": count_equal(OP, "D")}


def observed(observation: Metrics, timeout: float = OBSERVED_WAIT_SECONDS) -> dict[str, Any] | None:
    """The metrics observed by a query that has run (the MERGE that read its source); None if they
    never come (then what was asked is unknown, and the run says so rather than waiting for ever)."""
    found: dict[str, Any] = {}

    def get() -> None:
        found.update(observation.values)

    waiter = threading.Thread(target=get, name="lakeloader-observed", daemon=True)
    waiter.start()
    waiter.join(timeout)
    return found or None


def asked_merge(
    metrics: dict[str, Any] | None,
    *,
    changes: int,
    late: int,
    expected: tuple[int, int, int] | None = None,
) -> reconciliation.Asked | None:
    """What a `mode: merge` batch's latest changes asked, from `asked_metrics` (None: not observed)."""
    if not metrics:
        return None
    rows, deletes = int(metrics["asked_rows"] or 0), int(metrics["asked_deletes"] or 0)
    return reconciliation.Asked(
        mode="merge",
        upserts=rows - deletes,
        deletes=deletes,
        superseded=max(0, changes - rows),
        late=late,
        expected=expected,
    )


def check_commit(
    spark: SparkSession,
    target: Destination,
    table: TableConfig,
    asked: reconciliation.Asked | None,
    result: BatchResult,
    progress: Progress,
    *,
    summary: dict[str, str] | None = None,
) -> None:
    """Reconcile the commit this batch just made to `target` with what it `asked`; record it on
    `result`, and raise ReconciliationError when they disagree and the table says fail."""
    snapshot_id, committed, parent = iceberg.committed_summaries(spark, target.name)
    if summary is not None and summary != committed:
        committed = summary  # merge_with_commit_counts.write has read and checked it already
    if any(committed.get(k) != v for k, v in target.summary.items()):
        result.notes.append("reconciliation: the table's current snapshot is not this batch's commit")
        return
    if asked is None:
        result.notes.append("reconciliation: what the batch asked was not observed; commit not checked")
        return
    reported = reconciliation.reported_from_summaries(committed, parent)
    found = reconciliation.reconcile(asked, reported, snapshot_id=snapshot_id)
    result.reconciliation = found
    progress(found.describe())
    if found.ok:
        return
    if table.reconcile.on_mismatch == "fail":
        raise ReconciliationError(table.id, found)
    result.notes.append(found.describe())
