"""Load input files into their tables: each table's batch applied in isolation (one table's failure
never stops the others), the run summarised in one table. The CLI and the demos load through
`run_tables`, the Glue/EMR drain (lakeloader.jobs.drain) one batch at a time through `load_table`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields

from pyspark.sql import SparkSession

from lakeloader.config import LakeConfig, TableConfig
from lakeloader.engine import Applied, apply_batch
from lakeloader.errors import LakeloaderError
from lakeloader.inputs import InputFile, list_inputs, resolve_paths
from lakeloader.progress import Progress, stderr_progress, text_table


@dataclass
class TableResult(Applied):
    """What one table's run did, one row of the run summary: what its batches did (files, counts,
    snapshot, notes, quality report), and how the run went."""

    table_id: str
    status: str = "skipped"  # ok | skipped | failed
    seconds: float = 0.0
    error: str | None = None
    bad_file: str | None = None  # the input file the error names (errors.BadInputError.file)

    @classmethod
    def applied(cls, table_id: str, applied: Applied) -> TableResult:
        """The result of a batch the engine applied: skipped when it had no file left to read."""
        done = {f.name: getattr(applied, f.name) for f in fields(Applied)}
        return cls(table_id, status="ok" if applied.files else "skipped", **done)


def assign_inputs(
    config: LakeConfig, tables: list[TableConfig], given: list[str] | None
) -> dict[str, list[InputFile]]:
    """Files per table: discovered under each table's prefix, or the --input paths matched by prefix."""
    wanted = {t.id for t in tables}
    if not given:
        found: dict[str, list[InputFile]] = {}
        for table in tables:
            files = list_inputs(config.raw_root, table.source.prefix)
            # A nested prefix belongs to the table with the longest match.
            found[table.id] = [
                f for f in files if (m := config.match_key(f.name)) is not None and m.id == table.id
            ]
        return found
    assigned: dict[str, list[InputFile]] = {t.id: [] for t in tables}
    unmatched = []
    for file in resolve_paths(given, config.raw_root):
        match = config.match_key(file.name)
        if match is not None and match.id in wanted:
            assigned[match.id].append(file)
        elif len(tables) == 1:
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
) -> list[TableResult]:
    """Load each table in turn (`lakeloader run`, the demos); one table's failure never stops the
    others. `log_consumed`: remember consumed files in the input log (runs that have no ledger)."""
    results = []
    for position, table in enumerate(tables, start=1):

        def table_progress(message: str, _id: str = table.id, _n: int = position) -> None:
            progress(f"[{_n}/{len(tables)} {_id}] {message}")

        results.append(
            load_table(
                spark,
                table,
                inputs.get(table.id, []),
                catalog=catalog,
                run_id=run_id,
                progress=table_progress,
                log_consumed=log_consumed,
            )
        )
    return results


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
) -> TableResult:
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
        result = TableResult.applied(table.id, applied)
    except LakeloaderError as exc:
        # A failed quality gate carries its rule outcomes into the run record.
        report = getattr(exc, "report", None)
        result = TableResult(
            table.id, status="failed", error=str(exc), quality=report, bad_file=getattr(exc, "file", None)
        )
    except Exception as exc:  # Spark/JVM errors: the root cause and the batch's files
        names = [f.name for f in files]
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        where = f"table {table.id!r}, file(s) {shown}" if names else f"table {table.id!r}"
        result = TableResult(table.id, status="failed", error=f"{where}: {_root_cause(exc)}")
    result.seconds = time.monotonic() - started
    progress(f"{result.status}" + (f": {result.error}" if result.error else ""))
    return result


def _root_cause(exc: BaseException) -> str:
    """One line: the innermost Java exception of a Py4J error (the useful part), else the first line."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            while java.getCause() is not None:
                java = java.getCause()
            return str(java.toString()).splitlines()[0]
        except Exception:  # the JVM is gone: fall back to the Python text
            pass
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else repr(exc)}"


def summary_table(results: list[TableResult]) -> str:
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
