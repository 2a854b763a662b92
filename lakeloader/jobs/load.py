"""Load input files into their tables: each table's batch applied in isolation (one table's failure
never stops the others), the run summarised in one table. The CLI and the demos load through
`run_tables`, the Glue/EMR drain (lakeloader.jobs.drain) one batch at a time through `load_table`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields

from pyspark.sql import SparkSession

from lakeloader.config import LakeConfig, TableConfig
from lakeloader.engine import BatchResult, apply_batch
from lakeloader.iceberg import commit
from lakeloader.jobs.lineage import COUNTS, LineageLog, TableRun
from lakeloader.spark.errors import LakeloaderError, blamed_files, root_cause
from lakeloader.spark.inputs import InputFile, list_inputs, resolve_paths
from lakeloader.spark.progress import Progress, stderr_progress, text_table


@dataclass
class LoadResult(BatchResult):
    """What loading one table did in a run, one row of the run summary: what its batches did (files,
    counts, snapshot, notes, quality report: the engine's BatchResult, added up over the drain's
    batches), and how the load went (status, seconds, error, the files set aside)."""

    table_id: str
    status: str = "skipped"  # ok | skipped | failed
    seconds: float = 0.0
    error: str | None = None
    # The input files the error proves guilty, each with its own message (errors.blamed_files): set
    # aside while the batch's other files go on.
    bad_files: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_batch(cls, table_id: str, batch: BatchResult) -> LoadResult:
        """The result of a batch the engine applied: skipped when it had no file left to read."""
        done = {f.name: getattr(batch, f.name) for f in fields(BatchResult)}
        return cls(table_id, status="ok" if batch.files else "skipped", **done)


def assign_inputs(
    config: LakeConfig, tables: list[TableConfig], given: list[str] | None
) -> dict[str, list[InputFile]]:
    """Files per table: discovered under each table's prefix, or the --input paths matched by prefix."""
    wanted = {t.id for t in tables}
    if not given:
        found: dict[str, list[InputFile]] = {}
        for table in tables:
            files = list_inputs(config.raw_root, table.source.prefix)
            # A nested prefix belongs to the table(s) with the longest match.
            found[table.id] = [f for f in files if table in config.match_key(f.name)]
        return found
    assigned: dict[str, list[InputFile]] = {t.id: [] for t in tables}
    unmatched = []
    for file in resolve_paths(given, config.raw_root):
        matched = [t.id for t in config.match_key(file.name) if t.id in wanted]
        for table_id in matched:
            assigned[table_id].append(file)
        if matched:
            continue
        if len(tables) == 1:
            assigned[tables[0].id].append(file)
        else:
            unmatched.append(file.name)
    if unmatched:
        raise LakeloaderError(
            "these inputs match no selected table's source.prefix (name one table with --table to load them "
            "into it): " + ", ".join(unmatched)
        )
    return assigned


def run_tables(
    spark: SparkSession,
    tables: list[TableConfig],
    inputs: dict[str, list[InputFile]],
    *,
    catalog: str,
    run_id: str,
    progress: Progress = stderr_progress,
    log_consumed: bool = False,
    lineage: LineageLog | None = None,
) -> list[LoadResult]:
    """Load each table in turn (`lakeloader run`, the demos); one table's failure never stops the
    others. `log_consumed`: remember consumed files in the input log (runs that have no ledger);
    `lineage`: each table's START and COMPLETE/FAIL events go there."""
    results = []
    for position, table in enumerate(tables, start=1):

        def table_progress(message: str, _id: str = table.id, _n: int = position) -> None:
            progress(f"[{_n}/{len(tables)} {_id}] {message}")

        files = inputs.get(table.id, [])
        if log_consumed:
            files = _without_skipped(spark, table, files, catalog, table_progress)
        run = lineage.start("ingest", table, run_id) if lineage else None
        result = _load_setting_aside(
            spark,
            table,
            files,
            catalog=catalog,
            run_id=run_id,
            progress=table_progress,
            log_consumed=log_consumed,
        )
        if run is not None:
            finish_lineage(spark, catalog, run, result)
        results.append(result)
    return results


def finish_lineage(spark: SparkSession, catalog: str, run: TableRun, result: LoadResult) -> None:
    """The table run's COMPLETE or FAIL event: its counts, the raw files it read, its snapshot and the
    table's schema as it is now."""
    run.finish(
        status=result.status,
        counts={name: getattr(result, name) for name in COUNTS},
        raw_files=result.read,
        snapshot_id=result.snapshot_id,
        schema=output_schema(spark, catalog, run.table),
        error=result.error,
    )


def output_schema(spark: SparkSession, catalog: str, table: TableConfig) -> list[tuple[str, str]] | None:
    """The target's columns and Spark types, or None when the table does not exist (yet)."""
    from lakeloader.iceberg.s3_tables import target_name

    name = target_name(spark, catalog, table)
    if not spark.catalog.tableExists(name):
        return None
    return [(f.name, f.dataType.simpleString()) for f in spark.table(name).schema.fields]


def skip_files(
    spark: SparkSession,
    catalog: str,
    table_id: str,
    files: list[InputFile],
    run_id: str,
    reason: str,
    progress: Progress,
) -> None:
    """Give up on files for good (`lakeloader run --skip`): the input log keeps them with the reason."""
    commit.log_inputs(
        spark,
        catalog,
        table_id,
        files,
        run_id,
        status=commit.SKIPPED,
        reasons={f.name: reason for f in files},
    )
    for file in files:
        progress(f"{table_id}: {file.name} skipped for good ({reason})")


def _without_skipped(
    spark: SparkSession, table: TableConfig, files: list[InputFile], catalog: str, progress: Progress
) -> list[InputFile]:
    """The files a user has not given up on (`lakeloader run --skip`, kept in the input log)."""
    skipped = commit.skipped_files(spark, catalog, table.id)
    given_up = [f for f in files if commit.file_id(f) in skipped]
    for file in given_up:
        progress(f"{file.name}: skipped for good ({skipped[commit.file_id(file)]})")
    return [f for f in files if f not in given_up]


def _load_setting_aside(
    spark: SparkSession,
    table: TableConfig,
    files: list[InputFile],
    *,
    catalog: str,
    run_id: str,
    progress: Progress,
    log_consumed: bool,
) -> LoadResult:
    """One table's files on a run without a ledger: a batch that fails naming its guilty files (bad
    input, unreadable) is loaded again without them, so one bad file never blocks the others. The
    result is failed when any file was set aside, listing each with its reason; with `log_consumed`
    the input log records them, and a later run retries them (fixed in place, they load then)."""
    aside: dict[str, str] = {}
    remaining, seconds = files, 0.0
    while True:
        result = load_table(
            spark,
            table,
            remaining,
            catalog=catalog,
            run_id=run_id,
            progress=progress,
            log_consumed=log_consumed,
        )
        seconds += result.seconds
        blamed = {name: error for name, error in result.bad_files.items() if name not in aside}
        if result.status != "failed" or not blamed:
            break
        aside |= blamed
        remaining = [f for f in remaining if f.name not in aside]
        progress(f"set aside {len(blamed)} file(s); {len(remaining)} left to load")
        if not remaining:
            result = LoadResult(table.id)
            break
    if aside and log_consumed:
        guilty = [f for f in files if f.name in aside]
        commit.log_inputs(spark, catalog, table.id, guilty, run_id, status=commit.SET_ASIDE, reasons=aside)
    if aside or result.status == "failed":
        loaded = result.files if result.status == "ok" else 0
        pending = len(remaining) if result.status == "failed" else 0
        result.error = outcome_line(
            loaded, aside, pending, result.error if result.status == "failed" else None
        )
        result.status, result.bad_files = "failed", aside
    result.seconds = seconds
    return result


def outcome_line(loaded: int, aside: dict[str, str], pending: int, error: str | None) -> str:
    """What a table's run did, for the summary's `!` line: a failure (nothing loaded, the files set
    aside and the ones left pending), every file set aside, or some loaded and others set aside."""
    listing = "; ".join(aside.values())
    retry = "a later run retries them (lakeloader run --skip FILE --reason TEXT gives one up)"
    if error is not None:
        parts = [f"{n} file(s) {what}" for n, what in ((len(aside), "set aside"), (pending, "pending")) if n]
        told = f" ({', '.join(parts)}; {retry})" if parts else ""
        return f"failed, nothing loaded{told}: {error}" + (f"; set aside: {listing}" if aside else "")
    if not loaded:
        return f"nothing loaded: {len(aside)} file(s) set aside, none left to load; {retry}: {listing}"
    return f"{loaded} file(s) loaded, {len(aside)} set aside; {retry}: {listing}"


def load_table(
    spark: SparkSession,
    table: TableConfig,
    files: list[InputFile],
    *,
    catalog: str,
    run_id: str,
    progress: Progress,
    log_consumed: bool = False,
    before_publish: Callable[[], None] = lambda: None,
) -> LoadResult:
    """One batch of one table, its failure a result: the one place a table is isolated from the
    others (run_tables, the Glue/EMR drain). `before_publish`: the last check before `main` moves."""
    started = time.monotonic()
    try:
        applied = apply_batch(
            spark,
            table,
            files,
            catalog=catalog,
            run_id=run_id,
            progress=progress,
            log_consumed=log_consumed,
            before_publish=before_publish,
        )
        result = LoadResult.of_batch(table.id, applied)
    except LakeloaderError as exc:
        # A failed quality gate carries its rule outcomes into the run record, a failed reconciliation
        # (reconcile.on_mismatch: fail) what it found.
        report = getattr(exc, "report", None)
        result = LoadResult(
            table.id,
            status="failed",
            error=str(exc),
            quality=report,
            bad_files=blamed_files(exc),
            reconciliation=getattr(exc, "reconciliation", None),
        )
    except Exception as exc:  # Spark/JVM errors no file explains (engine.unreadable looked): the root cause
        result = LoadResult(table.id, status="failed", error=f"table {table.id!r}: {root_cause(exc)}")
    result.seconds = time.monotonic() - started
    progress(f"{result.status}" + (f": {result.error}" if result.error else ""))
    return result


def summary_table(results: list[LoadResult]) -> str:
    """The run summary as a plain-text table."""
    header = ("table", "status", "files", "changes", "inserted", "updated", "deleted", "snapshot", "seconds")
    rows = [
        (
            r.table_id,
            r.status,
            str(r.files),
            f"{r.changes:,}",
            f"{r.inserted:,}",
            f"{r.updated:,}",
            f"{r.deleted:,}",
            str(r.snapshot_id or "-"),
            f"{r.seconds:.1f}",
        )
        for r in results
    ]
    lines = text_table(header, rows)
    for r in results:
        if r.error:
            lines.append(f"! {r.table_id}: {r.error}")
        lines.extend(f"  {r.table_id}: {note}" for note in r.notes)
    return "\n".join(lines)
