"""The quality gate: commit a batch straight to its table, or (with quality rules) write it to an
audit branch, check the rules there, quarantine or reject, and decide to publish.

The commit path (lakeloader.iceberg.commit) only offers the destinations, the branch and publishing;
what a batch must pass before `main` moves is decided here. docs/quality_erase_maintain.md.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from lakeloader import iceberg
from lakeloader.engine import modes, quality
from lakeloader.engine.modes import WritePlan
from lakeloader.iceberg import commit
from lakeloader.iceberg.retry import retry_on_conflict
from lakeloader.spark.faults import crash_point


def commit_batch(
    main: commit.Destination, batch: DataFrame, plan: WritePlan, *, run_id: str
) -> quality.QualityReport | None:
    """Commit `batch` as the table's mode writes it (`modes.write` with `plan`); with quality rules,
    via an audit branch checked before it is published. Commit conflicts are retried per
    `table.maintenance.retry`, each attempt re-planned.

    A table whose `reconcile.on_mismatch` is `fail` goes through the audit branch too, rules or none:
    a commit the table disagrees with (engine.commit_check) fails there, before `main` moves.

    Returns the quality report (None when the table has no rules); raises QualityError when the
    batch is rejected, ReconciliationError when the table disagrees with the commit.
    """
    table, progress = plan.table, plan.progress
    what = f"table {table.id!r}: commit"
    if not table.quality.rules and table.reconcile.on_mismatch != "fail":
        retry_on_conflict(
            lambda: modes.write(main, batch, plan),
            what=what,
            settings=table.maintenance.retry,
            progress=progress,
        )
        return None
    return retry_on_conflict(
        lambda: _audit_once(main, batch, plan, run_id),
        what=what,
        settings=table.maintenance.retry,
        progress=progress,
    )


def _audit_once(
    main: commit.Destination, batch: DataFrame, plan: WritePlan, run_id: str
) -> quality.QualityReport | None:
    """Write to a fresh audit branch, check the rules there, quarantine or fail, publish to `main`.
    A table without rules (there for reconciliation alone) is published as written, with no report."""
    spark, name, table, progress = main.spark, main.name, plan.table, plan.progress
    base = iceberg.ref_snapshot(spark, name, "main")
    branch = commit.open_branch(main, run_id)
    report = quality.QualityReport(branch=branch.name)
    quarantine_target = quality.quarantine_name(name, table)
    published = False
    try:
        progress(f"writing the batch to audit branch {branch.name}")
        # raises ReconciliationError on a mismatch (on_mismatch: fail)
        modes.write(branch.destination, batch, plan)
        if not table.quality.rules:
            crash_point("before_publish")
            branch.publish(progress)
            published = True
            return None
        check = quality.evaluate(spark, name, branch.name, base, table, batch, run_id=run_id)
        report.outcomes = check.outcomes
        if not check.passed:
            if table.quality.on_failure == "fail":
                report.action = "failed"
                raise quality.QualityError(table.id, report, "quality rules failed (on_failure: fail)")
            if check.table_level_failed:
                report.action = "failed"
                raise quality.QualityError(table.id, report, "a table-level quality rule failed")
            assert check.failing_rows is not None and check.quarantine is not None
            progress("quality rules failed; quarantining the failing rows and re-writing the rest")
            failing = check.failing_rows.localCheckpoint(eager=True)
            branch.reset(progress)
            modes.write(branch.destination, quality.exclude(batch, failing, table), plan)
            again = quality.evaluate(spark, name, branch.name, base, table, batch, run_id=run_id)
            if not again.passed:
                report.action = "failed"
                report.outcomes = again.outcomes
                raise quality.QualityError(
                    table.id, report, "quality rules still fail without the quarantined rows"
                )
            report.quarantined_rows = quality.write_quarantine(spark, quarantine_target, check.quarantine)
            report.quarantine_table = quarantine_target
            report.action = "quarantined"
        crash_point("before_publish")
        branch.publish(progress)
        published = True
        progress(report.describe())
        return report
    finally:
        try:
            # dropping the branch is a commit too: a writer committing at the same time is retried
            # like the batch's own commit, so no branch is left behind for maintain to find
            retry_on_conflict(
                branch.drop if published else lambda: branch.discard(progress),
                what=f"table {table.id!r}: dropping audit branch {branch.name}",
                settings=table.maintenance.retry,
                progress=progress,
            )
            # this attempt's quarantine rows describe a batch that was not published
            if not published and report.action == "quarantined":
                quality.delete_quarantined(spark, quarantine_target, branch.name)
        except Exception as exc:  # noqa: BLE001 - never hide the original error behind a cleanup error
            progress(f"could not clean up audit branch {branch.name}: {exc}")
