"""Iceberg table maintenance (`lakeloader maintain`): per table, the configured steps in order, each
retried on commit conflicts with concurrent writers; one table's failure never stops the others.

The steps and their settings: docs/quality_erase_maintain.md "Table maintenance".
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pyspark.sql import SparkSession

from lakeloader import iceberg
from lakeloader.config import CompactionSettings, TableConfig
from lakeloader.control.contract import new_run_id
from lakeloader.engine import tombstones
from lakeloader.iceberg import s3_tables
from lakeloader.iceberg.retry import retry_on_conflict
from lakeloader.jobs import retention
from lakeloader.jobs.lineage import LineageLog
from lakeloader.spark.columns import find_column
from lakeloader.spark.errors import LakeloaderError, first_line
from lakeloader.spark.faults import crash_point
from lakeloader.spark.progress import Progress, no_progress, text_table
from lakeloader.spark.session import table_exists
from lakeloader.spark.sql import literal, timestamp_literal


@dataclass
class StepResult:
    step: str
    status: str = "ok"  # ok | skipped | failed
    attempts: int = 0
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None


@dataclass
class MaintenanceResult:
    table_id: str
    status: str = "ok"  # ok | failed | skipped
    steps: list[StepResult] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None


_SORT_TERM = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_]*)((?:\s+(?:ASC|DESC))?(?:\s+NULLS\s+(?:FIRST|LAST))?)\s*$", re.I
)
_ZORDER = re.compile(r"^\s*zorder\((.*)\)\s*$", re.I)


def sort_order_sql(sort_order: str, columns: list[str]) -> str:
    """The configured sort order with every column resolved against the table and quoted."""

    def column(name: str) -> str:
        actual = find_column(columns, name.strip())
        if actual is None:
            raise LakeloaderError(f"maintenance.compaction.sort_order names unknown column {name.strip()!r}")
        return "`" + actual.replace("`", "``") + "`"

    terms = []
    for term in re.split(r",(?![^(]*\))", sort_order):
        if match := _ZORDER.match(term):
            terms.append("zorder(" + ", ".join(column(c) for c in match.group(1).split(",")) + ")")
        elif match := _SORT_TERM.match(term):
            terms.append(column(match.group(1)) + match.group(2).upper())
        else:
            raise LakeloaderError(f"maintenance.compaction.sort_order: cannot read {term.strip()!r}")
    return ", ".join(terms)


def lake_formation_catalog(spark: SparkSession, catalog: str) -> bool:
    """Does `catalog` take its tables' S3 credentials from Lake Formation (full table access:
    `glue.lakeformation-enabled`, contract.lake_formation_catalog_conf)?"""
    flag = spark.conf.get(f"spark.sql.catalog.{catalog}.glue.lakeformation-enabled", "false")
    return str(flag).strip().lower() == "true"


def orphan_file_arguments(older_than: str, lake_formation: bool) -> list[str]:
    """`remove_orphan_files`' arguments. Under Lake Formation the job role holds no S3 grant on the
    warehouse (infra.job_access): the listing goes through the table's FileIO (`prefix_listing`,
    Iceberg 1.8+), which Lake Formation's credentials serve, instead of Hadoop's file system, which
    would list with the role's own."""
    arguments = [f"older_than => {older_than}"]
    if lake_formation:
        arguments.append("prefix_listing => true")
    return arguments


def _options(options: dict[str, str]) -> str:
    return "map(" + ", ".join(f"{literal(k)}, {literal(v)}" for k, v in options.items()) + ")"


def rewrite_data_arguments(compaction: CompactionSettings, columns: list[str]) -> list[str]:
    """`rewrite_data_files`' arguments: sorted by the configured order (its columns resolved against the
    table's `columns`) or bin-packed, limited to `where`, with the file size and thresholds."""
    if compaction.sort_order:
        args = [
            "strategy => 'sort'",
            f"sort_order => {literal(sort_order_sql(compaction.sort_order, columns))}",
        ]
    else:
        args = ["strategy => 'binpack'"]
    if compaction.where:
        args.append(f"where => {literal(compaction.where)}")
    options = {
        "target-file-size-bytes": str(compaction.target_file_size_mb * 1024 * 1024),
        "min-input-files": str(compaction.min_input_files),
        "delete-file-threshold": str(compaction.delete_file_threshold),
    }
    args.append(f"options => {_options(options)}")
    return args


def left_to_s3_tables(spark: SparkSession, table: TableConfig) -> bool:
    """Does S3 Tables maintain this table itself (target.storage s3_tables, in the session's table
    bucket)? Then it compacts, expires snapshots and removes unreferenced files
    (lakeloader.iceberg.s3_tables.MANAGED_STEPS), as the table's settings tell it (the
    s3_tables_maintenance step), and `maintain` runs none of the three."""
    return s3_tables.in_s3_tables(table) and s3_tables.table_bucket_arn(spark) is not None


def _plan(spark: SparkSession, table: TableConfig) -> list[str]:
    """The enabled steps' names, in the order they run (STEPS holds what each does)."""
    settings = table.maintenance
    managed = left_to_s3_tables(spark, table)
    steps = ["commit_retry_properties"]
    if managed:
        steps.append("s3_tables_maintenance")
    steps.append("drop_stale_audit_branches")  # first: expiry then reclaims their snapshots
    if settings.compaction.enabled and not managed:
        steps.append("rewrite_data_files")
    if settings.rewrite_delete_files:
        steps.append("rewrite_position_delete_files")
    if settings.rewrite_manifests:
        steps.append("rewrite_manifests")
    if settings.snapshots.enabled and not managed:
        steps.append("expire_snapshots")
    if settings.orphan_files.enabled and not managed:
        steps.append("remove_orphan_files")
    steps.append("purge_tombstones")
    return steps


@dataclass(frozen=True)
class _Target:
    """What a step works on: the table, its name in the catalog that holds it, and the whole plan."""

    spark: SparkSession
    table: TableConfig
    catalog: str
    name: str
    now: datetime | None
    steps: tuple[str, ...]


def _cutoffs(target: _Target) -> retention.Cutoffs:
    """Taken when a step runs (expiry comes after the rewrites), unless the run was given `now`."""
    return retention.cutoffs(target.table, target.now or datetime.now(UTC))


def _commit_retry_properties(target: _Target) -> dict[str, int]:
    wanted = target.table.maintenance.commit_retry.table_properties()
    return {"properties_set": len(iceberg.ensure_properties(target.spark, target.name, wanted))}


def _s3_tables_maintenance(target: _Target) -> dict[str, int]:
    """The table's compaction and snapshot management, set in the session's table bucket."""
    bucket = s3_tables.table_bucket_arn(target.spark)
    assert bucket is not None  # planned only for a table in the session's table bucket
    return s3_tables.configure_maintenance(bucket, target.table)


def _drop_stale_audit_branches(target: _Target) -> dict[str, int]:
    spark, name = target.spark, target.name
    stale = [
        b for b, at in iceberg.audit_branches(spark, name).items() if at < _cutoffs(target).audit_branches
    ]
    for branch in stale:
        iceberg.discard_branch(spark, name, branch, no_progress)
    return {"stale_audit_branches_dropped": len(stale)}


def _rewrite_data_files(target: _Target) -> dict[str, int]:
    compaction = target.table.maintenance.compaction
    columns = target.spark.table(target.name).columns if compaction.sort_order else []
    args = rewrite_data_arguments(compaction, columns)
    return iceberg.call_procedure(target.spark, target.name, "rewrite_data_files", *args)


def _rewrite_position_delete_files(target: _Target) -> dict[str, int]:
    return iceberg.call_procedure(target.spark, target.name, "rewrite_position_delete_files")


def _rewrite_manifests(target: _Target) -> dict[str, int]:
    return iceberg.call_procedure(target.spark, target.name, "rewrite_manifests")


def _expire(target: _Target, name: str) -> dict[str, int]:
    """expire_snapshots on `name`: the table itself, or its tombstone side table."""
    older = _cutoffs(target).snapshots
    return iceberg.call_procedure(
        target.spark,
        name,
        "expire_snapshots",
        f"older_than => {timestamp_literal(older)}",
        f"retain_last => {target.table.maintenance.snapshots.retain_last}",
    )


def _expire_snapshots(target: _Target) -> dict[str, int]:
    return _expire(target, target.name)


def _remove_orphan_files(target: _Target) -> dict[str, int]:
    older = _cutoffs(target).orphan_files
    lake_formation = lake_formation_catalog(target.spark, target.catalog)
    return iceberg.call_procedure(
        target.spark,
        target.name,
        "remove_orphan_files",
        *orphan_file_arguments(timestamp_literal(older), lake_formation),
    )


def _purge_tombstones(target: _Target) -> dict[str, int]:
    spark = target.spark
    side = tombstones.side_table(target.name, target.table)
    counts = tombstones.purge(spark, side, timestamp_literal(_cutoffs(target).tombstones))
    if not counts:  # no side table: no delete was ever loaded
        return counts
    iceberg.ensure_properties(spark, side, tombstones.PROPERTIES)  # a side table created before them
    rewritten = iceberg.call_procedure(spark, side, "rewrite_data_files")
    counts["tombstone_files_rewritten"] = rewritten.get("rewritten_data_files_count", 0)
    if "expire_snapshots" in target.steps:  # the side table's snapshots, as the table's own
        expired = _expire(target, side)
        counts["tombstone_files_expired"] = sum(v for k, v in expired.items() if k.startswith("deleted_"))
    return counts


# What each planned step does (_plan names them in order), given the table it works on.
STEPS: dict[str, Callable[[_Target], dict[str, int]]] = {
    "commit_retry_properties": _commit_retry_properties,
    "s3_tables_maintenance": _s3_tables_maintenance,
    "drop_stale_audit_branches": _drop_stale_audit_branches,
    "rewrite_data_files": _rewrite_data_files,
    "rewrite_position_delete_files": _rewrite_position_delete_files,
    "rewrite_manifests": _rewrite_manifests,
    "expire_snapshots": _expire_snapshots,
    "remove_orphan_files": _remove_orphan_files,
    "purge_tombstones": _purge_tombstones,
}


def maintain_table(
    spark: SparkSession,
    table: TableConfig,
    *,
    catalog: str,
    progress: Progress = no_progress,
    now: datetime | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> MaintenanceResult:
    """Run the table's maintenance steps. A failed step is recorded and the next steps still run."""
    started = time.monotonic()
    result = MaintenanceResult(table.id)
    name = s3_tables.target_name(spark, catalog, table)
    if not table_exists(spark, name):
        result.status = "skipped"
        result.error = f"table {table.qualified_target} does not exist yet (nothing loaded)"
        progress(result.error)
        return result
    steps = _plan(spark, table)
    target = _Target(spark, table, catalog, name, now, tuple(steps))
    for step_name in steps:
        step = StepResult(step_name)
        step_started = time.monotonic()
        progress(f"{step_name} ...")

        def attempt(run: Callable = STEPS[step_name], step: StepResult = step) -> dict[str, int]:
            step.attempts += 1
            return run(target)

        try:
            step.counts = retry_on_conflict(
                attempt,
                what=f"table {table.id!r}: {step_name}",
                settings=table.maintenance.retry,
                progress=progress,
                sleep=sleep,
            )
            crash_point(f"maintain:{step_name}")
        except Exception as exc:  # recorded with the step, reported in the summary, exit code 1
            step.status, step.error = "failed", first_line(exc)
            result.status = "failed"
            result.error = result.error or f"{step_name}: {step.error}"
        step.seconds = time.monotonic() - step_started
        shown = ", ".join(f"{k}={v:,}" for k, v in step.counts.items() if v) or "nothing to do"
        progress(
            f"{step_name}: {step.status} ({shown}) in {step.seconds:.1f}s"
            + (f": {step.error}" if step.error else "")
        )
        result.steps.append(step)
    result.seconds = time.monotonic() - started
    return result


def maintain_tables(
    spark: SparkSession,
    tables: list[TableConfig],
    *,
    catalog: str,
    progress: Progress = no_progress,
    lineage: LineageLog | None = None,
) -> list[MaintenanceResult]:
    """`maintain_table` for each table; one table's failure never stops the others. `lineage`: each
    table's START and COMPLETE/FAIL events (job `lakeloader.maintain.<table>`, type MAINTENANCE)."""
    from lakeloader.jobs.load import output_schema

    results = []
    run_id = new_run_id()
    for position, table in enumerate(tables, start=1):

        def table_progress(message: str, _id: str = table.id, _n: int = position) -> None:
            progress(f"[{_n}/{len(tables)} {_id}] {message}")

        run = lineage.start("maintain", table, run_id) if lineage else None
        try:
            result = maintain_table(spark, table, catalog=catalog, progress=table_progress)
        except Exception as exc:  # one table's failure never stops the others
            result = MaintenanceResult(table.id, status="failed", error=first_line(exc))
            table_progress(f"failed: {first_line(exc)}")
        if run is not None:
            schema = output_schema(spark, catalog, table)
            run.finish(status=result.status, counts={}, schema=schema, error=result.error)
        results.append(result)
    return results


SUMMARY_COUNTS = {
    "rewrite_data_files": ("rewritten_data_files_count", "added_data_files_count"),
    "rewrite_position_delete_files": ("rewritten_delete_files_count", "added_delete_files_count"),
    "rewrite_manifests": ("rewritten_manifests_count", "added_manifests_count"),
}


def summary_table(results: list[MaintenanceResult]) -> str:
    """One line per table: files/deletes/manifests rewritten (in -> out), snapshots and orphans removed."""
    header = (
        "table",
        "status",
        "data files",
        "delete files",
        "manifests",
        "expired files",
        "orphans",
        "tombstones purged",
        "retries",
        "seconds",
    )
    rows = []
    for r in results:
        steps = {s.step: s for s in r.steps}

        def pair(step: str, _steps: dict = steps) -> str:
            s = _steps.get(step)
            if s is None:
                return "-"
            before, after = SUMMARY_COUNTS[step]
            return f"{s.counts.get(before, 0)}->{s.counts.get(after, 0)}"

        expired = steps.get("expire_snapshots")
        orphans = steps.get("remove_orphan_files")
        purged = steps.get("purge_tombstones")
        rows.append(
            (
                r.table_id,
                r.status,
                pair("rewrite_data_files"),
                pair("rewrite_position_delete_files"),
                pair("rewrite_manifests"),
                str(sum(v for k, v in expired.counts.items() if k.startswith("deleted_")))
                if expired
                else "-",
                str(orphans.counts.get("orphan_files_removed", 0)) if orphans else "-",
                str(purged.counts.get("tombstones_purged", 0)) if purged else "-",
                str(sum(max(0, s.attempts - 1) for s in r.steps)),
                f"{r.seconds:.1f}",
            )
        )
    lines = text_table(header, rows)
    for r in results:
        for s in r.steps:
            if s.error:
                lines.append(f"! {r.table_id} {s.step}: {s.error}")
        if r.error and not any(s.error for s in r.steps):
            lines.append(f"! {r.table_id}: {r.error}")
    return "\n".join(lines)
