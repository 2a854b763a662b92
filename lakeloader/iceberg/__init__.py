"""Iceberg table operations: snapshots and their summaries, refs and branches, procedures, properties.

Every other module reaches an Iceberg table's metadata through here; none loads the Java table or
spells a `CALL` itself. Names are SQL names (`catalog`.`db`.`t`, quoted); docs/merge_and_commit.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from pyspark.sql import SparkSession

from lakeloader.iceberg.table_state import TableState
from lakeloader.spark.progress import Progress
from lakeloader.spark.session import java_class
from lakeloader.spark.sql import literal, qualified, quote, tblproperties

AUDIT_BRANCH_PREFIX = "audit_"  # a quality-gated batch's branch: audit_<run id>_<random>
# table properties that put data or metadata files outside the table's location
LOCATION_PROPERTIES = ("write.data.path", "write.metadata.path", "write.object-storage.path")


def iceberg_table(spark: SparkSession, name: str, *, refresh: bool = True):
    """The org.apache.iceberg.Table `name` names, refreshed: catalog I/O (GetTable on Glue), no Spark job.
    `refresh=False`: as the session last loaded it, without asking the catalog again."""
    spark3_util = java_class(spark, "org.apache.iceberg.spark.Spark3Util")
    table = spark3_util.loadIcebergTable(spark._jsparkSession, name)
    if refresh:
        table.refresh()
    return table


def read_state(spark: SparkSession, name: str) -> TableState:
    """The table's state for a batch, from ONE metadata read (catalog I/O, no Spark job)."""
    parser = java_class(spark, "org.apache.iceberg.TableMetadataParser")
    metadata = parser.toJson(iceberg_table(spark, name).operations().current())
    return TableState.from_metadata(json.loads(metadata))


def current_snapshot_id(spark: SparkSession, name: str, *, refresh: bool = True) -> int | None:
    """The snapshot `main` points at now (None for an empty table); `refresh=False`: as the session holds
    the table (iceberg_table)."""
    snapshot = iceberg_table(spark, name, refresh=refresh).currentSnapshot()
    return snapshot.snapshotId() if snapshot is not None else None


def committed_summary(spark: SparkSession, name: str) -> dict[str, str]:
    """The summary of the snapshot this session last committed to `name`, a table or one of its
    branches (`branch_target`), as the session holds the table: no catalog call, and a writer
    committing right after it is not read as this session's commit."""
    return committed_summaries(spark, name)[1]


def committed_summaries(
    spark: SparkSession, name: str
) -> tuple[int | None, dict[str, str], dict[str, str] | None]:
    """The snapshot this session last committed to `name` (as `committed_summary`): its id, its summary
    and its parent's (None: it has no parent, the table's first). Metadata the session holds: no catalog
    call, no Spark job (lakeloader.engine.reconciliation reads the totals' change from the two)."""
    branch = re.fullmatch(r"(.+)\.`branch_((?:[^`]|``)+)`", name)
    table = iceberg_table(spark, branch[1] if branch else name, refresh=False)
    snapshot = table.snapshot(branch[2].replace("``", "`")) if branch else table.currentSnapshot()
    if snapshot is None:
        return None, {}, None
    parent_id = snapshot.parentId()
    parent = table.snapshot(parent_id) if parent_id is not None else None
    parent_summary = _java_map(spark, parent.summary()) if parent is not None else None
    return snapshot.snapshotId(), _java_map(spark, snapshot.summary()), parent_summary


def _java_map(spark: SparkSession, java: object) -> dict[str, str]:
    """A Java Map<String, String> as a dict, in one round trip as JSON: read through py4j, each entry
    costs two or three (a snapshot summary holds 15-40; 29 ms against 3 ms a summary, 2026-11-30)."""
    mapper = java_class(spark, "org.apache.iceberg.util.JsonUtil").mapper()
    return json.loads(mapper.writeValueAsString(java))


def may_hold(
    spark: SparkSession, name: str, ranges: dict[str, tuple[object, object]], snapshot_id: int | None = None
) -> bool:
    """Whether a live data file of `name` (as of `snapshot_id`, else now) may hold a row whose every
    column in `ranges` lies within its inclusive (low, high), a None end being no limit; with no
    ranges, whether the table holds any data file at all.

    Iceberg's own scan planning on the driver (catalog I/O and manifests, no Spark job) decides it
    from each file's lower and upper bounds, per file: a row can match only in a file whose bounds
    overlap every range. A file without bounds for a column, or a range Iceberg cannot bind to the
    column, may hold anything (True). Values: Python ints and strs, as the column's type takes them.
    A `snapshot_id` the caller has just read (tombstones.Ahead) is planned from the table as the
    session holds it: a snapshot never changes, so the catalog is not asked again (a Glue GetTable
    fewer per batch); a table that lacks it answers True.
    """
    expressions = java_class(spark, "org.apache.iceberg.expressions.Expressions")
    condition = expressions.alwaysTrue()
    for column, (low, high) in ranges.items():
        if low is not None:
            condition = getattr(expressions, "and")(condition, expressions.greaterThanOrEqual(column, low))
        if high is not None:
            condition = getattr(expressions, "and")(condition, expressions.lessThanOrEqual(column, high))
    try:
        scan = iceberg_table(spark, name, refresh=snapshot_id is None).newScan()
        if snapshot_id is not None:
            scan = scan.useSnapshot(snapshot_id)
        tasks = scan.caseSensitive(False).filter(condition).planFiles()
        try:
            return bool(tasks.iterator().hasNext())
        finally:
            tasks.close()
    except Exception:  # noqa: BLE001 - e.g. a column the table lacks: nothing is ruled out
        return True


@contextmanager
def commit_properties(spark: SparkSession, properties: dict[str, str]) -> Iterator[None]:
    """Put `properties` into the summary of every Iceberg commit made by this thread meanwhile.

    Iceberg's `CommitMetadata.withCommitProperties` takes a Java callable; from Python we set the
    thread-local it fills. PySpark pins each Python thread to one JVM thread, and SQL DML and
    DataFrameWriterV2 writes commit on the calling thread.
    """
    loader = java_class(spark, "java.lang.Thread").currentThread().getContextClassLoader()
    holder = (
        java_class(spark, "java.lang.Class")
        .forName("org.apache.iceberg.spark.CommitMetadata", True, loader)
        .getDeclaredField("COMMIT_PROPERTIES")
    )
    holder.setAccessible(True)
    thread_local = holder.get(None)
    java_map = java_class(spark, "java.util.HashMap")()
    for key, value in properties.items():
        java_map.put(key, value)
    thread_local.set(java_map)
    try:
        yield
    finally:
        thread_local.remove()


# ------------------------------------------------------------------------------------- names


def catalog_of(name: str) -> str:
    """The catalog of a SQL name, unquoted: `cat`.`db`.`t` -> cat."""
    return name.split(".", 1)[0].strip("`").replace("``", "`")


def _table_argument(name: str) -> str:
    """The `table =>` argument of Iceberg procedures: `db`.`t` of `cat`.`db`.`t`, as a string literal."""
    return literal(name.split(".", 1)[1])


def branch_target(name: str, branch: str) -> str:
    """The SQL name that writes to (or reads) `branch` of table `name`."""
    return f"{name}.{quote('branch_' + branch)}"


# ------------------------------------------------------------------------------------- procedures


def call_procedure(spark: SparkSession, name: str, procedure: str, *args: str) -> dict[str, int]:
    """CALL an Iceberg procedure on table `name` (`table =>` first, then `args`); its numeric outputs
    summed by name (orphan locations counted)."""
    arguments = ", ".join([f"table => {_table_argument(name)}", *args])
    rows = spark.sql(f"CALL {qualified(catalog_of(name))}.system.{procedure}({arguments})").collect()
    counts: dict[str, int] = {}
    for row in rows:
        for key, value in row.asDict().items():
            if isinstance(value, int) and not isinstance(value, bool):
                counts[key] = counts.get(key, 0) + value
            elif key == "orphan_file_location":
                counts["orphan_files_removed"] = counts.get("orphan_files_removed", 0) + 1
    return counts


def delete_orphan_files(spark: SparkSession, name: str, older_than: datetime) -> int:
    """Delete files under the table location that no snapshot references, older than `older_than`.

    The `remove_orphan_files` procedure refuses an interval under 24 hours (a younger file may belong
    to a commit still in flight); Iceberg's Action API is its documented way to choose the interval.
    Only erasure uses it, for the reason docs/quality_erase_maintain.md gives.
    """
    actions = java_class(spark, "org.apache.iceberg.spark.actions.SparkActions").get(spark._jsparkSession)
    action = actions.deleteOrphanFiles(iceberg_table(spark, name))
    result = action.olderThan(int(older_than.timestamp() * 1000)).execute()
    return sum(1 for _ in result.orphanFileLocations())


def table_locations(spark: SparkSession, name: str) -> list[str]:
    """The table's location, plus data/metadata paths its properties set outside it."""
    table = iceberg_table(spark, name)
    properties = table.properties()
    found = [table.location()]
    found += [str(properties.get(key)) for key in LOCATION_PROPERTIES if properties.get(key)]
    prefixes = sorted({location.rstrip("/") + "/" for location in found})
    return [p for p in prefixes if not any(p != other and p.startswith(other) for other in prefixes)]


# ------------------------------------------------------------------------------------- properties


def table_properties(spark: SparkSession, name: str) -> dict[str, str]:
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}


def ensure_properties(
    spark: SparkSession, name: str, wanted: dict[str, str], *, current: dict[str, str] | None = None
) -> dict[str, str]:
    """Set the `wanted` table properties where they differ from `current` (else read now); returns what
    was changed."""
    current = table_properties(spark, name) if current is None else current
    changed = {k: v for k, v in wanted.items() if current.get(k) != v}
    if changed:
        spark.sql(f"ALTER TABLE {name} SET {tblproperties(changed)}")
    return changed


# ------------------------------------------------------------------------------------- refs


def ref_snapshot(spark: SparkSession, name: str, ref: str) -> int | None:
    """The snapshot a branch or tag points at (None: no such ref, or `main` of an empty table)."""
    row = spark.sql(f"SELECT snapshot_id FROM {name}.refs WHERE name = {literal(ref)}").first()
    return row.snapshot_id if row else None


def ref_snapshots(spark: SparkSession, name: str, refs: tuple[str, ...]) -> dict[str, int]:
    """Where each of `refs` points, from one read of the refs table (absent refs are left out)."""
    wanted = ", ".join(literal(ref) for ref in refs)
    query = f"SELECT name, snapshot_id FROM {name}.refs WHERE name IN ({wanted})"
    return {r.name: r.snapshot_id for r in spark.sql(query).collect()}


def refs_by_snapshot(spark: SparkSession, name: str) -> dict[int, list[str]]:
    """The branches and tags pointing at each snapshot."""
    refs: dict[int, list[str]] = {}
    for r in spark.sql(f"SELECT name, snapshot_id FROM {name}.refs").collect():
        refs.setdefault(r.snapshot_id, []).append(r.name)
    return refs


def unpublished_snapshots(spark: SparkSession, name: str, branch: str) -> list[int]:
    """Snapshots on `branch` that `main` does not reach (what a write to the branch added)."""
    heads = ref_snapshots(spark, name, (branch, "main"))
    head = heads.get(branch)
    if head is None:
        return []
    parents = {
        r.snapshot_id: r.parent_id
        for r in spark.sql(f"SELECT snapshot_id, parent_id FROM {name}.snapshots").collect()
    }
    main_line: set[int] = set()
    current = heads.get("main")
    while current is not None and current not in main_line:
        main_line.add(current)
        current = parents.get(current)
    ids = []
    current = head
    while current is not None and current not in main_line and current in parents:
        ids.append(current)
        current = parents.get(current)
    return ids


def audit_branches(spark: SparkSession, name: str) -> dict[str, datetime]:
    """Each audit branch of the table and when its head snapshot was committed (UTC)."""
    query = (
        f"SELECT r.name, s.committed_at FROM {name}.refs r JOIN {name}.snapshots s "
        f"ON r.snapshot_id = s.snapshot_id WHERE r.type = 'BRANCH' AND startswith(r.name, "
        f"{literal(AUDIT_BRANCH_PREFIX)})"
    )
    return {r.name: r.committed_at.replace(tzinfo=UTC) for r in spark.sql(query).collect()}


def create_branch(spark: SparkSession, name: str, branch: str) -> None:
    spark.sql(f"ALTER TABLE {name} CREATE BRANCH {quote(branch)}")


def drop_branch(spark: SparkSession, name: str, branch: str) -> None:
    spark.sql(f"ALTER TABLE {name} DROP BRANCH IF EXISTS {quote(branch)}")


def discard_branch(spark: SparkSession, name: str, branch: str, progress: Progress) -> None:
    """Drop the branch, then expire the snapshots only it held (their files are deleted)."""
    unpublished = unpublished_snapshots(spark, name, branch)
    drop_branch(spark, name, branch)
    if not unpublished:
        return
    ids = ", ".join(f"{i}L" for i in unpublished)
    try:  # older_than in 1970: expire exactly these snapshots, nothing by age.
        call_procedure(
            spark,
            name,
            "expire_snapshots",
            "older_than => TIMESTAMP '1970-01-01 00:00:00'",
            f"snapshot_ids => array({ids})",
        )
    except Exception as exc:  # noqa: BLE001 - cleanup: report, the next maintain expires them
        progress(f"could not expire unpublished audit snapshot(s) {unpublished}: {exc}")


def fast_forward(spark: SparkSession, name: str, branch: str) -> None:
    """Move `main` to the head of `branch` (publish exactly the snapshot that was checked)."""
    call_procedure(spark, name, "fast_forward", "branch => 'main'", f"to => {literal(branch)}")
