"""The one place a batch is committed: commit-conflict retry, the optional audit branch (quality gate),
the caller's last check right before `main` moves, and which raw files a commit consumed.

The mode (merge, scd2, append, overwrite) only says how to write a batch to a `Destination`; this module
decides where the write goes and when it reaches `main`. docs/merge_and_commit.md.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakeloader import iceberg, quality, table_state
from lakeloader.config import TableConfig
from lakeloader.faults import crash_point
from lakeloader.inputs import InputFile
from lakeloader.progress import Progress, no_progress
from lakeloader.retry import RetryPolicy, retry_on_conflict
from lakeloader.spark import table_exists
from lakeloader.sql import literal, qualified

INPUT_LOG = ("lakeloader_meta", "input_files")
NAMES_IN_SUMMARY = 50


@dataclass(frozen=True)
class Destination:
    """Where one attempt writes a batch: the table itself, or its audit branch (`name` says which)."""

    spark: SparkSession
    name: str
    summary: dict[str, str]  # recorded in the snapshot summary of the commit (table_state.SUMMARY_*)
    publishes: bool  # a commit here moves `main`
    before_publish: Callable[[], None]

    def commit(self, statement: Callable[[], object]) -> None:
        """Run the one statement that commits the batch. When it moves `main`, `before_publish` runs
        right before it and may raise to stop it."""
        if self.publishes:
            self.before_publish()
        with iceberg.commit_properties(self.spark, self.summary):
            statement()


Write = Callable[[Destination, DataFrame], None]
"""Writes a batch (the normalised change rows) to a Destination, committing through `Destination.commit`."""


def commit_batch(
    spark: SparkSession,
    name: str,
    table: TableConfig,
    batch: DataFrame,
    write: Write,
    *,
    run_id: str,
    summary: dict[str, str],
    progress: Progress = no_progress,
    before_publish: Callable[[], None] = lambda: None,
) -> quality.QualityReport | None:
    """Commit `batch` through `write`; with quality rules, via an audit branch checked before it is
    published. Commit conflicts are retried per `table.maintenance.retry`, each attempt re-planned.

    `before_publish` runs right before the commit that moves `main` (a drain that lost its table
    lock must not commit what the run that took over applied already). Returns the quality report
    (None when the table has no rules); raises QualityError when the batch is rejected.
    """
    iceberg.ensure_properties(spark, name, table.maintenance.commit_retry.table_properties())
    policy = RetryPolicy.from_settings(table.maintenance.retry)
    what = f"table {table.id!r}: commit"
    main = Destination(spark, name, summary, True, before_publish)
    if not table.quality.rules:
        retry_on_conflict(lambda: write(main, batch), what=what, policy=policy, progress=progress)
        return None
    return retry_on_conflict(
        lambda: _audit_once(main, table, batch, write, run_id, progress),
        what=what,
        policy=policy,
        progress=progress,
    )


def audit_branch_name(run_id: str) -> str:
    run = re.sub(r"[^A-Za-z0-9_]", "_", run_id)[:60]
    return f"{iceberg.AUDIT_BRANCH_PREFIX}{run}_{uuid.uuid4().hex[:8]}"


def _audit_once(
    main: Destination, table: TableConfig, batch: DataFrame, write: Write, run_id: str, progress: Progress
) -> quality.QualityReport:
    """Write to a fresh audit branch, check the rules there, quarantine or fail, publish to `main`."""
    spark, name = main.spark, main.name
    branch = audit_branch_name(run_id)
    base = iceberg.ref_snapshot(spark, name, "main")
    target = replace(main, name=iceberg.branch_target(name, branch), publishes=False)
    report = quality.QualityReport(branch=branch)
    quarantine_target = quality.quarantine_name(name, table)
    iceberg.create_branch(spark, name, branch)
    published = False
    try:
        progress(f"writing the batch to audit branch {branch}")
        write(target, batch)
        check = quality.evaluate(spark, name, branch, base, table, batch, run_id=run_id)
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
            iceberg.discard_branch(spark, name, branch, progress)
            iceberg.create_branch(spark, name, branch)
            write(target, quality.exclude(batch, failing, table))
            again = quality.evaluate(spark, name, branch, base, table, batch, run_id=run_id)
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
        progress(f"publishing {branch} to main (fast_forward)")
        heads = iceberg.ref_snapshots(spark, name, (branch, "main"))
        if heads.get(branch) != heads.get("main"):
            main.before_publish()
            iceberg.fast_forward(spark, name, branch)
        published = True
        progress(report.describe())
        return report
    finally:
        try:
            if published:
                iceberg.drop_branch(spark, name, branch)
            else:
                iceberg.discard_branch(spark, name, branch, progress)
                # this attempt's quarantine rows describe a batch that was not published
                if report.action == "quarantined":
                    quality.delete_quarantined(spark, quarantine_target, branch)
        except Exception as exc:  # noqa: BLE001 - never hide the original error behind a cleanup error
            progress(f"could not clean up audit branch {branch}: {exc}")


# ------------------------------------------------------------------------------------ consumed files


def file_id(file: InputFile) -> str:
    return hashlib.sha1(file.identity.encode()).hexdigest()[:16]


def batch_summary(run_id: str, table_id: str, files: list[InputFile]) -> dict[str, str]:
    """What the batch's commit records in its snapshot summary: the run, the table, its input files."""
    return {
        table_state.SUMMARY_RUN_ID: run_id,
        table_state.SUMMARY_TABLE_ID: table_id,
        table_state.SUMMARY_FILE_IDS: ",".join(file_id(f) for f in files),
        table_state.SUMMARY_FILE_NAMES: json.dumps([f.name for f in files[:NAMES_IN_SUMMARY]]),
    }


def logged_file_ids(spark: SparkSession, catalog: str, table_id: str) -> set[str]:
    """The table's files in the input log (see `log_inputs`)."""
    log = qualified(catalog, *INPUT_LOG)
    if not table_exists(spark, log):
        return set()
    rows = spark.sql(f"SELECT file_id FROM {log} WHERE table_id = {literal(table_id)}").collect()
    return {row.file_id for row in rows}


def consumed_file_ids(
    spark: SparkSession, name: str, *, catalog: str | None = None, table_id: str = ""
) -> set[str]:
    """Input files committed to the table, plus (given `catalog`) the input log's."""
    ids = set(iceberg.read_state(spark, name).committed_file_ids)
    return ids | logged_file_ids(spark, catalog, table_id) if catalog else ids


def log_inputs(spark: SparkSession, catalog: str, table_id: str, files: list[InputFile], run_id: str) -> None:
    """Append consumed files to the input log, which outlives snapshot expiry and erasure.

    Runs without a ledger (the local CLI) need it: snapshot summaries vanish with
    expired snapshots, and a raw file loaded again would undo an erasure.
    """
    log = qualified(catalog, *INPUT_LOG)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {qualified(catalog, INPUT_LOG[0])}")
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {log} (table_id string, file_id string, name string, run_id string, "
        "logged_at timestamp) USING iceberg TBLPROPERTIES ('format-version'='2')"
    )
    rows = [(table_id, file_id(f), f.name, run_id) for f in files]
    frame = spark.createDataFrame(rows, "table_id string, file_id string, name string, run_id string")
    frame.withColumn("logged_at", F.current_timestamp()).writeTo(log).append()
