"""`lakeloader reconcile --table ID --snapshot URI [--repair]`: compare a table with a full copy of its
source (a DMS full load, an export), and with `--repair` make it equal through the normal merge path.

The snapshot (a file or a folder, local or s3://) is read as the table's own files are (its `source`
format, CSV options, declared schema, columns include/exclude; a DMS full load has no Op column and
reads as inserts), and compared with the table's current rows (SCD2: current versions) by
lakeloader.engine.full_copy's diff, the one `cdc: snapshot` applies: a key only the snapshot holds is
*missing*, a key only the table holds is *extra*, a key whose compared columns differ is *different*.

`--repair` writes those inserts, updates and deletes in ONE commit through the merge (or SCD2) path
and the quality gate (lakeloader.engine.repair): deletes leave tombstones, SCD2 closes history, and
the changes carry the repair sequence, just after the highest the table knows, so they apply, their
tombstones bury older late changes, and the source's later changes still apply. The commit's summary
records what was repaired (`lakeloader.repair`); on a stage the repair is also a run of the table in
its run history. docs/operate.md "Reconcile a table with its source".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from lakeloader.config import TableConfig
from lakeloader.spark.errors import LakeloaderError
from lakeloader.spark.inputs import InputFile, list_inputs
from lakeloader.spark.progress import Progress, no_progress, text_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakeloader.control.ledger.interfaces import RunLease

KINDS = ("missing", "extra", "different")
WHAT = {
    "missing": "in the snapshot, not in the table",
    "extra": "in the table, not in the snapshot",
    "different": "compared columns differ",
}
DEFAULT_SAMPLES = 10
TICK_SECONDS = 30.0  # how often a long comparison or repair says how far its Spark job is


@dataclass
class Repaired:
    """What `--repair` committed."""

    snapshot_id: int | None
    sequence: str | None  # the repair sequence its changes carry (None: the table orders nothing)
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass
class SourceReconciliation:
    """A table compared with a full copy of its source (`lakeloader reconcile --snapshot`)."""

    table_id: str
    snapshot: str  # the URI
    files: int
    rows: int  # the snapshot's rows, those marked deleted left out
    compared: list[str]  # the compared columns (source spelling)
    keys: list[str]
    counts: dict[str, int]  # missing, extra, different
    samples: dict[str, list[dict[str, Any]]]  # per kind, a few keys (column -> value), in key order
    extra_kept: bool = False  # source.deletes: ignore: extra keys are expected, not a difference
    notes: list[str] = field(default_factory=list)
    repaired: Repaired | None = None

    @property
    def differing(self) -> int:
        """The keys that make the table differ from the snapshot."""
        kinds = [k for k in KINDS if not (k == "extra" and self.extra_kept)]
        return sum(self.counts[k] for k in kinds)

    @property
    def equal(self) -> bool:
        return self.differing == 0

    def describe(self) -> str:
        rows = []
        for kind in KINDS:
            what = WHAT[kind] + (" (kept: deletes: ignore)" if kind == "extra" and self.extra_kept else "")
            shown = "; ".join(key_text(k) for k in self.samples[kind])
            more = self.counts[kind] - len(self.samples[kind])
            shown += f"; ... {more:,} more" if shown and more > 0 else ""
            rows.append([kind, f"{self.counts[kind]:,}", what, shown or "-"])
        lines = [
            f"table {self.table_id} vs snapshot {self.snapshot} ({self.files} file(s), {self.rows:,} row(s))",
            *text_table(["keys", "count", "meaning", "sample keys"], rows),
            f"compared columns: {', '.join(self.compared) or '(none: keys only)'}",
            *self.notes,
        ]
        verdict = "EQUAL" if self.equal else f"DIFFERENT: {self.differing:,} key(s) differ"
        lines.append(verdict)
        if self.repaired is not None:
            r = self.repaired
            at = f" (repair sequence {r.sequence})" if r.sequence is not None else ""
            lines += [
                f"repaired in one commit (Iceberg snapshot {r.snapshot_id}): {r.inserted:,} inserted, "
                f"{r.updated:,} updated, {r.deleted:,} deleted{at}",
                *r.notes,
            ]
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        repaired = None
        if self.repaired is not None:
            r = self.repaired
            repaired = {
                "snapshot_id": r.snapshot_id,
                "sequence": r.sequence,
                "inserted": r.inserted,
                "updated": r.updated,
                "deleted": r.deleted,
                "notes": r.notes,
            }
        return {
            "table": self.table_id,
            "snapshot": self.snapshot,
            "files": self.files,
            "snapshot_rows": self.rows,
            "keys": self.keys,
            "compared_columns": self.compared,
            "equal": self.equal,
            "differing": self.differing,
            **{
                kind: {"count": self.counts[kind], "samples": self.samples[kind], "meaning": WHAT[kind]}
                for kind in KINDS
            },
            "extra_kept": self.extra_kept,
            "notes": self.notes,
            "repaired": repaired,
        }


def key_text(key: dict[str, Any]) -> str:
    """A sample key as `lakeloader erase --key` takes it: id=42, or order_id=1,line_no=2."""
    return ",".join(f"{k}={v}" for k, v in key.items())


# ------------------------------------------------------------------------------------------ the snapshot


def snapshot_files(uri: str) -> list[InputFile]:
    """The data files of a snapshot: the file `uri` names, or every data file under the folder it names
    (hidden and `_`-prefixed files such as _SUCCESS left out), named relative to that folder."""
    if uri.startswith(("s3://", "s3a://")):
        files = _s3_snapshot_files(uri)
    else:
        path = Path(uri)
        if path.is_file():
            stat = path.stat()
            return [InputFile(path.name, str(path.resolve()), stat.st_size, str(stat.st_mtime_ns))]
        if not path.is_dir():
            raise FileNotFoundError(f"--snapshot {uri}: no such file or folder")
        files = list_inputs(str(path))
    if not files:
        raise LakeloaderError(f"--snapshot {uri}: no data file there")
    return files


def _s3_snapshot_files(uri: str) -> list[InputFile]:
    import boto3
    from botocore.exceptions import ClientError

    parsed = urlparse(uri)
    key = parsed.path.lstrip("/")
    if key and not key.endswith("/"):
        try:
            head = boto3.client("s3").head_object(Bucket=parsed.netloc, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
                raise
        else:
            name = key.rsplit("/", 1)[-1]
            return [
                InputFile(name, f"s3://{parsed.netloc}/{key}", head["ContentLength"], head["ETag"].strip('"'))
            ]
    return list_inputs(f"s3://{parsed.netloc}/{key.rstrip('/')}/" if key else f"s3://{parsed.netloc}/")


# ------------------------------------------------------------------------------------------ progress


@contextmanager
def spark_ticker(
    spark: SparkSession, progress: Progress, what: str, every: float = TICK_SECONDS
) -> Iterator[None]:
    """While the block runs, every `every` seconds: how many tasks of the running Spark stages are done
    (a comparison of a large table takes minutes)."""
    if progress is no_progress:
        yield
        return
    done = threading.Event()
    started = time.monotonic()
    tracker = spark.sparkContext.statusTracker()

    def tick() -> None:
        while not done.wait(every):
            stages = [s for s in map(tracker.getStageInfo, tracker.getActiveStageIds()) if s is not None]
            tasks = sum(s.numTasks for s in stages)
            finished = sum(s.numCompletedTasks for s in stages)
            state = f"{finished:,}/{tasks:,} task(s) of {len(stages)} stage(s) done" if stages else "planning"
            progress(f"{what}: {state}, {time.monotonic() - started:,.0f} s")

    thread = threading.Thread(target=tick, name="lakeloader-reconcile-ticker", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


# ------------------------------------------------------------------------------------------ reconcile


def reconcile(
    spark: SparkSession,
    table: TableConfig,
    uri: str,
    *,
    catalog: str,
    samples: int = DEFAULT_SAMPLES,
    repair: bool = False,
    run_id: str = "reconcile",
    who: str = "",
    progress: Progress = no_progress,
    before_publish: Callable[[], None] = lambda: None,
    tick_seconds: float = TICK_SECONDS,
) -> SourceReconciliation:
    """Compare `table` with the snapshot at `uri`; with `repair`, commit the difference (one commit)."""
    from lakeloader.engine import compare_snapshot, repair_difference

    files = snapshot_files(uri)
    progress(f"snapshot {uri}")
    with spark_ticker(spark, progress, "comparing", tick_seconds):
        comparison = compare_snapshot(spark, table, files, catalog=catalog, repair=repair, progress=progress)
    try:
        counts = comparison.counts
        result = SourceReconciliation(
            table.id,
            uri,
            len(files),
            comparison.rows,
            comparison.compared,
            list(table.keys),
            counts,
            comparison.samples(table.keys, samples),
            extra_kept=table.source.deletes == "ignore",
            notes=comparison.notes,
        )
        progress(f"compared: {', '.join(f'{counts[k]:,} {k}' for k in KINDS)}")
        if repair and not result.equal:
            audit = {
                "snapshot": uri,
                "by": who,
                "at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                **counts,
                "extra_kept": result.extra_kept,
                "sequence": comparison.sequence,
            }
            progress(f"repairing {result.differing:,} key(s) in one commit")
            with spark_ticker(spark, progress, "repairing", tick_seconds):
                applied = repair_difference(
                    spark,
                    table,
                    comparison,
                    run_id=run_id,
                    audit=audit,
                    progress=progress,
                    before_publish=before_publish,
                )
            result.repaired = Repaired(
                applied.snapshot_id,
                comparison.sequence,
                applied.inserted,
                applied.updated,
                applied.deleted,
                list(applied.notes),
            )
    finally:
        comparison.release()
    return result


# ------------------------------------------------------------------------------------------ on a stage


def reconcile_on_stage(
    spark: SparkSession,
    ledger: RunLease,
    table: TableConfig,
    uri: str,
    *,
    catalog: str,
    run_id: str,
    repair: bool,
    **options: Any,
) -> SourceReconciliation:
    """`reconcile --stage`: a report reads and changes nothing; a repair holds the table's run lock (a
    job run of the table waits for it, as for another run) and is recorded as a run of the table in
    the stage's run history, with its counts and commit."""
    if not repair:
        return reconcile(spark, table, uri, catalog=catalog, run_id=run_id, **options)
    if not ledger.acquire_lock(table.id, run_id):
        raise LakeloaderError(
            f"table {table.id!r}: another run holds the table lock; repair when it has ended "
            "(lakeloader status --stage shows it)"
        )
    ledger.start_run(table.id, run_id, f"reconcile-{run_id}", engine="reconcile")
    status, error, result = "failed", None, None
    try:
        result = reconcile(
            spark,
            table,
            uri,
            catalog=catalog,
            run_id=run_id,
            repair=True,
            before_publish=lambda: ledger.keep_lock(table.id, run_id),
            **options,
        )
        status = "succeeded"
        return result
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        counts: dict[str, int | float] = {}
        snapshot_id = None
        if result is not None:
            counts = {**result.counts, "snapshot_rows": result.rows}
            if result.repaired is not None:
                r = result.repaired
                counts |= {"inserted": r.inserted, "updated": r.updated, "deleted": r.deleted}
                snapshot_id = r.snapshot_id
        ledger.end_run(table.id, run_id, status, counts=counts, snapshot_id=snapshot_id, error=error)
        ledger.release_lock(table.id, run_id)
