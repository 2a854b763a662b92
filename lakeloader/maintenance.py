"""Iceberg table maintenance: `lakeloader maintain`.

Per table, in this order (each step configurable under the table's `maintenance:`):

1. commit retry properties (``commit.retry.*``) set on the table, so Iceberg
   itself re-applies a commit whose base moved;
2. ``rewrite_data_files`` -- bin-pack (or sort, with ``sort_order``) small files
   towards ``target_file_size_mb``; optional ``where`` scope; data files carrying
   ``delete_file_threshold`` delete files are rewritten too;
3. ``rewrite_position_delete_files`` -- compact merge-on-read delete files and
   drop dangling ones;
4. ``rewrite_manifests``;
5. ``expire_snapshots`` -- older than ``older_than_days``, keeping ``retain_last``;
6. ``remove_orphan_files`` -- files no snapshot references, older than
   ``older_than_hours`` (at least 24: a younger file may belong to a commit still
   in flight);
7. ``purge_tombstones`` -- deletes the tombstones (:mod:`lakeloader.tombstones`)
   recorded more than ``tombstones.retain_days`` ago, then compacts the side table's
   small appended files and expires its snapshots like the table's.

Writers and maintenance collide: a step whose commit conflicts with a concurrent
commit (``CommitFailedException``, ``ValidationException`` "found conflicting
files"...) is re-run with bounded exponential backoff and jitter
(:mod:`lakeloader.retry`, ``maintenance.retry``); after the last attempt the step
fails with a message saying so. One table's failure never stops the others; each
step reports progress and the run ends with a summary table.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession

from lakeloader import cdc, tombstones
from lakeloader.config import TableConfig
from lakeloader.errors import LakeloaderError
from lakeloader.faults import crash_point
from lakeloader.retry import RetryPolicy, retry_on_conflict
from lakeloader.spark import table_exists
from lakeloader.sql import literal, qualified

Progress = Callable[[str], None]
STEPS = (
    "commit_retry_properties",
    "rewrite_data_files",
    "rewrite_position_delete_files",
    "rewrite_manifests",
    "expire_snapshots",
    "remove_orphan_files",
    "purge_tombstones",
)


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


def timestamp_literal(moment: datetime) -> str:
    """A Spark TIMESTAMP literal for an aware datetime, independent of the session time zone."""
    utc = moment.astimezone(UTC)
    return f"TIMESTAMP '{utc:%Y-%m-%d %H:%M:%S.%f}+00:00'"


def procedure_table(table: TableConfig) -> str:
    """The `table =>` argument of Iceberg procedures: a quoted multi-part identifier as a string."""
    return literal(qualified(table.target.database, table.target.table))


def table_properties(spark: SparkSession, name: str) -> dict[str, str]:
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}


def ensure_commit_retry_properties(spark: SparkSession, name: str, table: TableConfig) -> dict[str, str]:
    """Set the configured commit.retry.* properties where they differ; returns what was changed."""
    wanted = table.maintenance.commit_retry.table_properties()
    current = table_properties(spark, name)
    changed = {k: v for k, v in wanted.items() if current.get(k) != v}
    if changed:
        props = ", ".join(f"{literal(k)}={literal(v)}" for k, v in changed.items())
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ({props})")
    return changed


_SORT_TERM = re.compile(
    r"^\s*([A-Za-z_][A-Za-z0-9_]*)((?:\s+(?:ASC|DESC))?(?:\s+NULLS\s+(?:FIRST|LAST))?)\s*$", re.I
)
_ZORDER = re.compile(r"^\s*zorder\((.*)\)\s*$", re.I)


def sort_order_sql(sort_order: str, columns: list[str]) -> str:
    """The configured sort order with every column resolved against the table and quoted."""

    def column(name: str) -> str:
        actual = cdc.find_column(columns, name.strip())
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


def _options(options: dict[str, str]) -> str:
    return "map(" + ", ".join(f"{literal(k)}, {literal(v)}" for k, v in options.items()) + ")"


def call_procedure(spark: SparkSession, catalog: str, procedure: str, args: list[str]) -> dict[str, int]:
    """CALL an Iceberg procedure; its numeric outputs summed by name (orphan locations counted)."""
    rows = spark.sql(f"CALL {qualified(catalog)}.system.{procedure}({', '.join(args)})").collect()
    counts: dict[str, int] = {}
    for row in rows:
        for key, value in row.asDict().items():
            if isinstance(value, int) and not isinstance(value, bool):
                counts[key] = counts.get(key, 0) + value
            elif key == "orphan_file_location":
                counts["orphan_files_removed"] = counts.get("orphan_files_removed", 0) + 1
    return counts


def _plan(
    spark: SparkSession, table: TableConfig, catalog: str, now: datetime | None
) -> list[tuple[str, Callable]]:
    """The enabled steps as (name, callable returning counts)."""
    settings = table.maintenance
    name = qualified(catalog, table.target.database, table.target.table)
    target = procedure_table(table)
    steps: list[tuple[str, Callable[[], dict[str, int]]]] = []

    def retry_props() -> dict[str, int]:
        return {"properties_set": len(ensure_commit_retry_properties(spark, name, table))}

    steps.append(("commit_retry_properties", retry_props))

    compaction = settings.compaction
    if compaction.enabled:

        def rewrite_data() -> dict[str, int]:
            args = [f"table => {target}"]
            if compaction.sort_order:
                columns = spark.table(name).columns
                args += [
                    "strategy => 'sort'",
                    f"sort_order => {literal(sort_order_sql(compaction.sort_order, columns))}",
                ]
            else:
                args.append("strategy => 'binpack'")
            if compaction.where:
                args.append(f"where => {literal(compaction.where)}")
            options = {
                "target-file-size-bytes": str(compaction.target_file_size_mb * 1024 * 1024),
                "min-input-files": str(compaction.min_input_files),
                "delete-file-threshold": str(compaction.delete_file_threshold),
            }
            args.append(f"options => {_options(options)}")
            return call_procedure(spark, catalog, "rewrite_data_files", args)

        steps.append(("rewrite_data_files", rewrite_data))
    if settings.rewrite_delete_files:
        steps.append(
            (
                "rewrite_position_delete_files",
                lambda: call_procedure(
                    spark, catalog, "rewrite_position_delete_files", [f"table => {target}"]
                ),
            )
        )
    if settings.rewrite_manifests:
        steps.append(
            (
                "rewrite_manifests",
                lambda: call_procedure(spark, catalog, "rewrite_manifests", [f"table => {target}"]),
            )
        )
    if settings.snapshots.enabled:

        def expire() -> dict[str, int]:  # the cut-off is taken when the step runs, after the rewrites
            older = (now or datetime.now(UTC)) - timedelta(days=settings.snapshots.older_than_days)
            args = [
                f"table => {target}",
                f"older_than => {timestamp_literal(older)}",
                f"retain_last => {settings.snapshots.retain_last}",
            ]
            return call_procedure(spark, catalog, "expire_snapshots", args)

        steps.append(("expire_snapshots", expire))
    if settings.orphan_files.enabled:

        def remove_orphans() -> dict[str, int]:
            older = (now or datetime.now(UTC)) - timedelta(hours=settings.orphan_files.older_than_hours)
            args = [f"table => {target}", f"older_than => {timestamp_literal(older)}"]
            return call_procedure(spark, catalog, "remove_orphan_files", args)

        steps.append(("remove_orphan_files", remove_orphans))

    def purge_tombstones() -> dict[str, int]:
        side_name = table.target.table + tombstones.SUFFIX
        side = qualified(catalog, table.target.database, side_name)
        cutoff = (now or datetime.now(UTC)) - timedelta(days=table.tombstones.retain_days)
        counts = tombstones.purge(spark, side, timestamp_literal(cutoff))
        if not counts:  # no side table: no delete was ever loaded
            return counts
        side_arg = f"table => {literal(qualified(table.target.database, side_name))}"
        rewritten = call_procedure(spark, catalog, "rewrite_data_files", [side_arg])
        counts["tombstone_files_rewritten"] = rewritten.get("rewritten_data_files_count", 0)
        if settings.snapshots.enabled:
            older = (now or datetime.now(UTC)) - timedelta(days=settings.snapshots.older_than_days)
            args = [
                side_arg,
                f"older_than => {timestamp_literal(older)}",
                f"retain_last => {settings.snapshots.retain_last}",
            ]
            expired = call_procedure(spark, catalog, "expire_snapshots", args)
            counts["tombstone_files_expired"] = sum(v for k, v in expired.items() if k.startswith("deleted_"))
        return counts

    steps.append(("purge_tombstones", purge_tombstones))
    return steps


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def maintain_table(
    spark: SparkSession,
    table: TableConfig,
    *,
    catalog: str,
    progress: Progress = lambda message: None,
    now: datetime | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> MaintenanceResult:
    """Run the table's maintenance steps. A failed step is recorded and the next steps still run."""
    started = time.monotonic()
    result = MaintenanceResult(table.id)
    name = qualified(catalog, table.target.database, table.target.table)
    if not table_exists(spark, name):
        result.status = "skipped"
        result.error = f"table {table.qualified_target} does not exist yet (nothing loaded)"
        progress(result.error)
        return result
    policy = RetryPolicy.from_settings(table.maintenance.retry)
    for step_name, run in _plan(spark, table, catalog, now):
        step = StepResult(step_name)
        step_started = time.monotonic()
        progress(f"{step_name} ...")

        def attempt(run: Callable[[], dict[str, int]] = run, step: StepResult = step) -> dict[str, int]:
            step.attempts += 1
            return run()

        try:
            step.counts = retry_on_conflict(
                attempt,
                what=f"table {table.id!r}: {step_name}",
                policy=policy,
                progress=progress,
                sleep=sleep,
            )
            crash_point(f"maintain:{step_name}")
        except Exception as exc:  # recorded with the step, reported in the summary, exit code 1
            step.status, step.error = "failed", _first_line(exc)
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
    progress: Progress = lambda message: None,
) -> list[MaintenanceResult]:
    results = []
    for position, table in enumerate(tables, start=1):

        def table_progress(message: str, _id: str = table.id, _n: int = position) -> None:
            progress(f"[{_n}/{len(tables)} {_id}] {message}")

        try:
            results.append(maintain_table(spark, table, catalog=catalog, progress=table_progress))
        except Exception as exc:  # one table's failure never stops the others
            results.append(MaintenanceResult(table.id, status="failed", error=_first_line(exc)))
            table_progress(f"failed: {_first_line(exc)}")
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
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in rows)
    for r in results:
        for s in r.steps:
            if s.error:
                lines.append(f"! {r.table_id} {s.step}: {s.error}")
        if r.error and not any(s.error for s in r.steps):
            lines.append(f"! {r.table_id}: {r.error}")
    return "\n".join(lines)
