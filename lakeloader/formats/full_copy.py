"""``cdc: snapshot``: each folder under the table's prefix is a full copy of the source table
(``<prefix>2026-11-27/part-*.parquet``), and folder names sort in time order.

What is Spark-free lives here: which folder a file belongs to, which folders are complete (a
``_SUCCESS`` file, or with ``complete_when: next_snapshot`` a later folder), and the order key that
tells an older or re-delivered snapshot from a newer one. lakeloader.engine.full_copy turns a complete
snapshot into the inserts, updates and deletes that make the table equal to it.

In code a source's snapshot is a *full copy* (`FullCopy`, `FullCopyPlan`), never to be read as an
Iceberg snapshot; the config keeps its word, `cdc: snapshot`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING

from lakeloader.formats.base import SourceFormat
from lakeloader.spark.columns import SNAPSHOT
from lakeloader.spark.errors import BadInputError
from lakeloader.spark.inputs import InputFile, is_success_marker, list_inputs

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from lakeloader.formats.reading import Check, FormatTable


class FullCopy(SourceFormat):
    name = "snapshot"
    default_sequence = SNAPSHOT  # TableConfig.sequence_columns: source.snapshot_by, else this column

    def read_checked(
        self, spark: SparkSession, table: FormatTable, files: list[InputFile], checks: list[Check]
    ) -> DataFrame:
        """One snapshot's rows; without `snapshot_by`, with the folder in the column lakeloader_snapshot."""
        from lakeloader.formats import files as plain

        rows = plain.read_rows(spark, table, files, self)
        if table.source.snapshot_by:
            return rows
        folders = {snapshot_folder(table, f.name) for f in files}
        if len(folders) != 1:  # engine.batch applies one snapshot per commit
            raise ValueError(f"one snapshot per batch, not {sorted(folders)}")
        return rows.withColumn(SNAPSHOT, folder_value(folders.pop()))


def folder_value(folder: str) -> Column:
    """The column lakeloader_snapshot's value for a folder: a TIMESTAMP where its name reads as one."""
    from pyspark.sql import functions as F

    when = folder_time(folder)
    return F.lit(when).cast("timestamp") if when else F.lit(folder)


def snapshot_folder(table: FormatTable, name: str) -> str:
    """The snapshot a file belongs to: the first folder under the table's prefix."""
    prefix = table.source.prefix
    rest = name[len(prefix) :] if name.startswith(prefix) else ""
    if "/" not in rest.strip("/"):
        raise BadInputError(
            table.id,
            "a snapshot's files sit in a folder named for the snapshot, e.g. "
            f"{prefix}2026-11-27/part-0.parquet",
            file=name,
        )
    return rest.split("/", 1)[0]


def folder_time(folder: str) -> str | None:
    """The folder name as an ISO date-time when it reads as a date or date-time (`2026-11-27`,
    `20261127`, `2026-11-27T06:00:00`, also after `name=` as in `dt=2026-11-27`); None otherwise."""
    text = folder.split("=", 1)[-1]
    try:
        return datetime.fromisoformat(text).isoformat()
    except ValueError:
        return None


def order_key(value: object) -> str:
    """A snapshot's sequence as text that sorts as the values do: the folder name itself, or the
    highest `snapshot_by` value (ISO text for times, zero-padded for integers)."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"a snapshot's sequence must be a time, a number or a name, not {value!r}")
    if isinstance(value, int):
        return f"{value + 10**19:021d}"
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


@dataclass
class FullCopyPlan:
    """What a batch of a snapshot table holds: complete snapshots in order, each with every data file of
    its folder (the listing's, so a batch that holds part of a folder still applies all of it), and
    the batch's files that must wait for their folder to complete."""

    ready: list[tuple[str, list[InputFile]]] = field(default_factory=list)
    waiting: list[InputFile] = field(default_factory=list)
    markers: list[InputFile] = field(default_factory=list)  # the batch's _SUCCESS files of ready folders


def plan(table: FormatTable, batch: list[InputFile], listing: list[InputFile]) -> FullCopyPlan:
    """Group `batch` by snapshot folder; `listing` is everything under the table's prefix, markers
    included (list_inputs(markers=True)), the evidence of completeness."""
    by_folder: dict[str, list[InputFile]] = {}
    for file in batch:
        by_folder.setdefault(snapshot_folder(table, file.name), []).append(file)
    listed: dict[str, list[InputFile]] = {}
    for file in listing:
        if file.name.startswith(table.source.prefix) and "/" in file.name[len(table.source.prefix) :]:
            listed.setdefault(snapshot_folder(table, file.name), []).append(file)
    folders = {*listed, *by_folder}
    if table.source.complete_when == "next_snapshot":
        complete = {f for f in folders if f < max(folders)}
    else:
        seen = {f: [*listed.get(f, []), *by_folder.get(f, [])] for f in folders}
        complete = {f for f, files in seen.items() if any(is_success_marker(x.name) for x in files)}
    result = FullCopyPlan()
    for folder in sorted(by_folder):
        batch_files = by_folder[folder]
        if folder not in complete:
            result.waiting += batch_files
            continue
        data = {f.name: f for f in [*listed.get(folder, []), *batch_files] if not is_success_marker(f.name)}
        result.markers += [f for f in batch_files if is_success_marker(f.name)]
        if data:  # a folder with a marker and no data file changes nothing (an export writes a part file)
            result.ready.append((folder, sorted(data.values())))
    return result


def list_table(table: FormatTable, files: list[InputFile]) -> list[InputFile]:
    """Everything under the table's prefix, markers included, listed from the raw root the batch's files
    sit under (an InputFile's uri ends with its name relative to that root)."""
    roots = {f.uri[: -len(f.name)] for f in files if f.uri.endswith(f.name)}
    listing: list[InputFile] = []
    for root in sorted(roots):
        listing += list_inputs(root, table.source.prefix, markers=True)
    return listing


def describe_waiting(table: FormatTable, waiting: list[InputFile]) -> str:
    folders = sorted({snapshot_folder(table, f.name) for f in waiting})
    needs = "a later snapshot folder" if table.source.complete_when == "next_snapshot" else "_SUCCESS"
    return f"snapshot(s) {', '.join(folders)} incomplete: {len(waiting)} file(s) wait for {needs}"
