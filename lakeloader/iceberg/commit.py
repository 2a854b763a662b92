"""The commit path: where an attempt writes a batch (`Destination`: the table, or an audit `Branch` of
it), the caller's last check right before `main` moves, publishing a branch, and which raw files a
commit consumed.

It decides nothing about a batch: the engine (lakeloader.engine) writes to a destination, runs the
quality gate on a branch and says when to publish. docs/merge_and_commit.md.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakeloader import iceberg
from lakeloader.iceberg import table_state
from lakeloader.spark.inputs import InputFile
from lakeloader.spark.progress import Progress
from lakeloader.spark.session import table_exists
from lakeloader.spark.sql import literal, qualified

INPUT_LOG = ("lakeloader_meta", "input_files")
NAMES_IN_SUMMARY = 50


@dataclass(frozen=True)
class Destination:
    """Where one attempt writes a batch: the table itself, or its audit branch (`name` says which)."""

    spark: SparkSession
    name: str
    summary: dict[str, str]  # recorded in the snapshot summary of the commit (table_state.SUMMARY_*)
    publishes: bool  # a commit here moves `main`
    before_publish: Callable[[], None]  # the caller's last check before `main` moves; raises to stop it

    @contextmanager
    def committing(self) -> Iterator[None]:
        """Around the one statement that commits the batch: the snapshot summary, and (when it moves
        `main`) `before_publish` right before it."""
        if self.publishes:
            self.before_publish()
        with iceberg.commit_properties(self.spark, self.summary):
            yield


@dataclass(frozen=True)
class Branch:
    """An audit branch of a table: written like the table, then published to `main` or discarded."""

    main: Destination
    name: str

    @property
    def destination(self) -> Destination:
        return replace(self.main, name=iceberg.branch_target(self.main.name, self.name), publishes=False)

    def reset(self, progress: Progress) -> None:
        """Empty the branch again: back to `main` as it was when the branch was opened."""
        spark, table = self.main.spark, self.main.name
        iceberg.discard_branch(spark, table, self.name, progress)
        iceberg.create_branch(spark, table, self.name)

    def publish(self, progress: Progress) -> None:
        """Fast-forward `main` to the branch, the caller's last check right before it."""
        spark, table = self.main.spark, self.main.name
        progress(f"publishing {self.name} to main (fast_forward)")
        heads = iceberg.ref_snapshots(spark, table, (self.name, "main"))
        if heads.get(self.name) != heads.get("main"):
            self.main.before_publish()
            iceberg.fast_forward(spark, table, self.name)

    def drop(self) -> None:
        """Drop a published branch (its snapshots are `main`'s now)."""
        iceberg.drop_branch(self.main.spark, self.main.name, self.name)

    def discard(self, progress: Progress) -> None:
        """Drop an unpublished branch and the snapshots only it held."""
        iceberg.discard_branch(self.main.spark, self.main.name, self.name, progress)


def open_branch(main: Destination, run_id: str) -> Branch:
    """A fresh audit branch of `main`'s table, named after the run."""
    run = re.sub(r"[^A-Za-z0-9_]", "_", run_id)[:60]
    branch = Branch(main, f"{iceberg.AUDIT_BRANCH_PREFIX}{run}_{uuid.uuid4().hex[:8]}")
    iceberg.create_branch(main.spark, main.name, branch.name)
    return branch


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


def snapshot_summary(folder: str, order: str) -> dict[str, str]:
    """cdc: snapshot: what a commit records of the snapshot it applied (TableState.snapshot_sequence)."""
    return {table_state.SUMMARY_SNAPSHOT: folder, table_state.SNAPSHOT_SEQUENCE: order}


def repair_summary(run_id: str, table_id: str, repair: dict[str, object]) -> dict[str, str]:
    """`lakeloader reconcile --repair`: what its commit records of the repair (table_state.SUMMARY_REPAIR)."""
    return {
        table_state.SUMMARY_RUN_ID: run_id,
        table_state.SUMMARY_TABLE_ID: table_id,
        table_state.SUMMARY_REPAIR: json.dumps(repair, sort_keys=True, default=str),
    }


def record_snapshot_sequence(spark: SparkSession, name: str, order: str) -> None:
    """A snapshot that changed nothing has no commit to record it in: the table property does."""
    spark.sql(
        f"ALTER TABLE {name} SET TBLPROPERTIES ({literal(table_state.SNAPSHOT_SEQUENCE)} = {literal(order)})"
    )


# What the input log says of a file: consumed by a commit (older rows carry no status), set aside by
# a run because it could not be loaded (a later run retries it), or skipped for good by `run --skip`.
CONSUMED, SET_ASIDE, SKIPPED = "consumed", "set_aside", "skipped"


def logged_file_ids(spark: SparkSession, catalog: str, table_id: str) -> set[str]:
    """The table's files the input log holds as consumed (see `log_inputs`)."""
    return set(_logged(spark, catalog, table_id, "status IS NULL OR status = 'consumed'"))


def skipped_files(spark: SparkSession, catalog: str, table_id: str) -> dict[str, str]:
    """The table's files a user gave up on (`lakeloader run --skip`): file id -> reason."""
    return _logged(spark, catalog, table_id, f"status = {literal(SKIPPED)}")


def _logged(spark: SparkSession, catalog: str, table_id: str, where: str) -> dict[str, str]:
    log = qualified(catalog, *INPUT_LOG)
    if not table_exists(spark, log):
        return {}
    _ensure_log_columns(spark, log)
    rows = spark.sql(
        f"SELECT file_id, reason FROM {log} WHERE table_id = {literal(table_id)} AND ({where})"
    ).collect()
    return {row.file_id: row.reason or "" for row in rows}


def consumed_file_ids(
    spark: SparkSession, name: str, *, catalog: str | None = None, table_id: str = ""
) -> set[str]:
    """Input files committed to the table, plus (given `catalog`) the input log's."""
    ids = set(iceberg.read_state(spark, name).committed_file_ids)
    return ids | logged_file_ids(spark, catalog, table_id) if catalog else ids


def log_inputs(
    spark: SparkSession,
    catalog: str,
    table_id: str,
    files: list[InputFile],
    run_id: str,
    *,
    status: str = CONSUMED,
    reasons: dict[str, str] | None = None,
) -> None:
    """Append files to the input log, which outlives snapshot expiry and erasure: consumed ones,
    or (`status`) those a run set aside or a user skipped, with `reasons` by file name.

    Runs without a ledger (the local CLI) need it: snapshot summaries vanish with
    expired snapshots, and a raw file loaded again would undo an erasure.
    """
    log = qualified(catalog, *INPUT_LOG)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {qualified(catalog, INPUT_LOG[0])}")
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {log} (table_id string, file_id string, name string, run_id string, "
        "logged_at timestamp, status string, reason string) "
        "USING iceberg TBLPROPERTIES ('format-version'='2')"
    )
    _ensure_log_columns(spark, log)
    reasons = reasons or {}
    rows = [(table_id, file_id(f), f.name, run_id, status, reasons.get(f.name)) for f in files]
    frame = spark.createDataFrame(
        rows, "table_id string, file_id string, name string, run_id string, status string, reason string"
    )
    frame.withColumn("logged_at", F.current_timestamp()).writeTo(log).append()


def _ensure_log_columns(spark: SparkSession, log: str) -> None:
    """An input log written before files could be set aside or skipped gains their columns."""
    missing = [c for c in ("status", "reason") if c not in spark.table(log).columns]
    if missing:
        spark.sql(f"ALTER TABLE {log} ADD COLUMNS ({', '.join(f'{c} string' for c in missing)})")
