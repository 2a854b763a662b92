"""GDPR erasure (`lakeloader erase --table ID --key VALUE ... | --where SQL`): delete a data subject's
rows and tombstones, purge them from every snapshot, file and S3 object version, verify, and append an
audit record. The steps and why each is needed: docs/quality_erase_maintain.md "GDPR erasure".
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pyspark.sql import SparkSession
from pyspark.sql.utils import AnalysisException

from lakeloader import iceberg
from lakeloader.config import TableConfig
from lakeloader.control.contract import AUDIT_DATABASE, AUDIT_TABLE
from lakeloader.engine import tombstones
from lakeloader.iceberg import s3_tables
from lakeloader.iceberg.commit import consumed_file_ids
from lakeloader.iceberg.retry import retry_on_conflict
from lakeloader.jobs.object_versions import on_s3, purge_noncurrent_versions, remaining_versions
from lakeloader.spark.actor import identity
from lakeloader.spark.columns import find_column
from lakeloader.spark.errors import LakeloaderError
from lakeloader.spark.faults import crash_point
from lakeloader.spark.progress import Progress, no_progress
from lakeloader.spark.session import table_exists
from lakeloader.spark.sql import literal, qualified, quote, timestamp_literal

AUDIT_COLUMNS = (
    "erased_at TIMESTAMP, who STRING, table_id STRING, target STRING, rows_erased BIGINT, "
    "predicate_kind STRING, subjects INT, predicate_sha256 STRING, snapshots_expired INT, "
    "files_deleted BIGINT, orphan_files_removed BIGINT, snapshots_verified INT, verified BOOLEAN, "
    "object_versions_purged BIGINT, tombstones_erased BIGINT, files_gone_by TIMESTAMP"
)


class ErasureError(LakeloaderError):
    """The erasure could not be done or could not be verified."""


class ErasureNotVerifiedError(ErasureError):
    """The rows were deleted, but some snapshot or file still holds them."""


@dataclass
class ErasureResult:
    table_id: str
    target: str
    rows_erased: int = 0
    predicate_kind: str = "key"
    subjects: int = 0
    predicate_sha256: str = ""
    data_files_rewritten: int = 0
    snapshots_expired: int = 0
    files_deleted: int = 0
    orphan_files_removed: int = 0
    object_versions_purged: int = 0
    tombstones_erased: int = 0
    versioned_locations: list[str] = field(default_factory=list)  # s3:// prefixes purged of old versions
    snapshots_verified: int = 0
    data_files_verified: int = 0
    verified: bool = False
    who: str = ""
    erased_at: str = ""
    audit_table: str = ""
    # target.storage s3_tables: when S3 Tables has deleted the files the erasure unreferenced (its
    # unreferenced + noncurrent windows after the erasure); None: gone when erase returns
    files_gone_by: str | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        lines = [
            f"erased {self.rows_erased:,} current row(s) from {self.target} "
            f"({self.predicate_kind}, {self.subjects} subject(s), "
            f"predicate sha256 {self.predicate_sha256[:16]}...)",
            f"rewrote {self.data_files_rewritten:,} data file(s) that still held deleted rows",
            f"expired {self.snapshots_expired:,} snapshot(s), deleting {self.files_deleted:,} file(s)",
            f"removed {self.orphan_files_removed:,} orphan file(s)",
            f"erased {self.tombstones_erased:,} tombstone(s) of the subject",
            f"purged {self.object_versions_purged:,} noncurrent object version(s) and delete marker(s) "
            f"under {', '.join(self.versioned_locations)}"
            if self.versioned_locations
            else "purged no object versions (the warehouse is not on S3)",
            f"verified: no matching row in {self.snapshots_verified} snapshot(s) reachable by time travel "
            f"nor in {self.data_files_verified} data file(s)"
            + (", no noncurrent object version left" if self.versioned_locations else "")
            if self.verified
            else "NOT verified",
            f"audit record: {self.audit_table} (who={self.who}, at={self.erased_at})",
        ]
        return "\n".join(lines + self.notes)


# ------------------------------------------------------------------------------------------ predicate


def parse_keys(table: TableConfig, values: list[str]) -> list[dict[str, str]]:
    """`--key` values -> one {key column: value} per subject: `42` or `id=42` for a one-column key,
    `order_id=1,line_no=2` for a composite one (every key column once; ',' or '=' in a value needs
    --where)."""
    if not table.keys:
        raise ErasureError(f"table {table.id!r} has no keys: use --where")
    subjects = []
    for value in values:
        if "=" not in value:
            if len(table.keys) != 1:
                raise ErasureError(
                    f"table {table.id!r} has the composite key {table.keys}: write --key "
                    + ",".join(f"{k}=VALUE" for k in table.keys)
                )
            subjects.append({table.keys[0]: value})
            continue
        subject: dict[str, str] = {}
        for part in value.split(","):
            column, sep, raw = part.partition("=")
            key = next((k for k in table.keys if k.lower() == column.strip().lower()), None)
            if not sep or key is None:
                raise ErasureError(f"--key {value!r}: {column.strip()!r} is not a key column of {table.id!r}")
            if key in subject:
                raise ErasureError(f"--key {value!r}: {key!r} given twice")
            subject[key] = raw.strip()
        missing = [k for k in table.keys if k not in subject]
        if missing:
            raise ErasureError(f"--key {value!r}: missing key column(s) {missing}")
        subjects.append(subject)
    if not subjects:
        raise ErasureError("give at least one --key or a --where")
    return subjects


def key_predicate(subjects: list[dict[str, str]], schema) -> str:
    """SQL: any subject's key, each value cast to its column's type (identifiers quoted)."""
    terms = []
    for subject in subjects:
        parts = []
        for key, value in subject.items():
            column = find_column(schema.fieldNames(), key)
            if column is None:
                raise ErasureError(f"the table has no key column {key!r}")
            type_name = schema[column].dataType.simpleString()
            parts.append(f"{quote(column)} = CAST({literal(value)} AS {type_name})")
        terms.append("(" + " AND ".join(parts) + ")")
    return " OR ".join(terms)


def predicate_hash(table_id: str, canonical: str) -> str:
    """SHA-256 of the predicate (HMAC-SHA-256 with LAKELOADER_ERASURE_SALT when set)."""
    message = f"{table_id}\n{canonical}".encode()
    salt = os.environ.get("LAKELOADER_ERASURE_SALT")
    if salt:
        return hmac.new(salt.encode(), message, hashlib.sha256).hexdigest()
    return hashlib.sha256(message).hexdigest()


# ------------------------------------------------------------------------------------------ steps


def verify(
    spark: SparkSession, name: str, predicate: str, *, managed: bool = False
) -> tuple[int, int, list[str]]:
    """(snapshots checked, data files checked, problems): time travel to every snapshot, and a
    direct read of every data file any snapshot references (`managed`: an S3 Tables table, whose
    storage allows no listing, so its files are fetched one by one: `_files_read_directly`)."""
    problems = []
    snapshots = [r.snapshot_id for r in spark.sql(f"SELECT snapshot_id FROM {name}.snapshots").collect()]
    refs = iceberg.refs_by_snapshot(spark, name)
    for snapshot in snapshots:
        found = spark.sql(f"SELECT count(*) FROM {name} VERSION AS OF {snapshot} WHERE {predicate}").first()[
            0
        ]
        if found:
            held_by = ", ".join(refs.get(snapshot, [])) or "no branch or tag"
            problems.append(f"snapshot {snapshot} ({held_by}) still returns {found} row(s)")
    files = [
        r.file_path
        for r in spark.sql(f"SELECT DISTINCT file_path, file_format FROM {name}.all_data_files").collect()
        if str(r.file_format).upper() == "PARQUET"
    ]
    if files:
        try:
            found = _files_read_directly(spark, name, files, managed).where(predicate).count()
        except AnalysisException as exc:  # an old file lacks a column of the predicate
            problems.append(
                f"could not read the data files directly to check them: {str(exc).splitlines()[0]}"
            )
        else:
            if found:
                problems.append(f"{found} row(s) still physically present in the table's data files")
    return len(snapshots), len(files), problems


def _files_read_directly(spark: SparkSession, name: str, files: list[str], managed: bool):
    """The rows physically in `files`, deletes not applied. Spark's own reader lists the path first,
    which S3 Tables' storage refuses (S3 Tables allows no ListObjects): there each file is fetched
    with GetObject and read on the driver."""
    if not managed:
        return spark.read.option("mergeSchema", "true").parquet(*files)
    import io

    import boto3
    import pyarrow as pa
    import pyarrow.parquet as pq

    s3 = boto3.client("s3")
    tables = []
    for path in files:
        bucket, _, key = path.split("://", 1)[1].partition("/")
        tables.append(pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=key)["Body"].read())))
    rows = pa.concat_tables(tables, promote_options="default").to_pylist()
    return spark.createDataFrame(rows, schema=spark.table(name).schema)  # by name; dropped columns ignored


def _audit(spark: SparkSession, catalog: str, result: ErasureResult, erased_at: datetime) -> str:
    target = qualified(catalog, AUDIT_DATABASE, AUDIT_TABLE)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {qualified(catalog, AUDIT_DATABASE)}")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {target} ({AUDIT_COLUMNS}) USING iceberg")
    existing = {f.name.lower() for f in spark.table(target).schema.fields}
    missing = [c for c in AUDIT_COLUMNS.split(", ") if c.split()[0].lower() not in existing]
    if missing:  # an audit table written by an older lakeloader
        columns = ", ".join(f"{quote(c.split()[0])} {c.split()[1]}" for c in missing)
        spark.sql(f"ALTER TABLE {target} ADD COLUMNS ({columns})")
    row = (
        erased_at.replace(tzinfo=None),
        result.who,
        result.table_id,
        result.target,
        result.rows_erased,
        result.predicate_kind,
        result.subjects,
        result.predicate_sha256,
        result.snapshots_expired,
        result.files_deleted,
        result.orphan_files_removed,
        result.snapshots_verified,
        result.verified,
        result.object_versions_purged,
        result.tombstones_erased,
        datetime.fromisoformat(result.files_gone_by).replace(tzinfo=None) if result.files_gone_by else None,
    )
    spark.createDataFrame([row], AUDIT_COLUMNS).writeTo(target).append()
    return f"{AUDIT_DATABASE}.{AUDIT_TABLE}"


def _erase_tombstones(
    spark: SparkSession,
    table: TableConfig,
    name: str,
    subjects: list[dict[str, str]] | None,
    where: str | None,
    started: datetime,
    retried: Callable,
    result: ErasureResult,
    progress: Progress,
) -> tuple[str | None, str | None]:
    """Erase the subject's tombstones like its rows; returns (side table, predicate over it) for the
    purge of old object versions and the verification, (None, None) when there is nothing to do."""
    side = tombstones.side_table(name, table)
    if not table_exists(spark, side):
        return None, None
    side_schema = spark.table(side).schema
    if subjects is None:
        assert where is not None
        try:
            spark.table(side).where(where).schema  # noqa: B018 - resolves: names only columns it holds
            predicate = f"({where})"
        except AnalysisException:  # names other columns: the keys of the rows it matches
            keys = ", ".join(quote(find_column(spark.table(name).columns, k) or k) for k in table.keys)
            matched = spark.sql(f"SELECT DISTINCT {keys} FROM {name} WHERE ({where})").collect()
            subjects = [{k: str(row[i]) for i, k in enumerate(table.keys)} for row in matched]
            if not subjects:
                result.notes.append(
                    "note: --where matches no current row and names columns the tombstones do not hold; "
                    "tombstones (key and sequence only) of already deleted subjects stay until "
                    "tombstones.retain_days: erase them with --key"
                )
                return side, None
    if subjects is not None:
        predicate = key_predicate(subjects, side_schema)
    result.tombstones_erased = spark.sql(f"SELECT count(*) FROM {side} WHERE {predicate}").first()[0]
    progress(f"{result.tombstones_erased:,} tombstone(s) match")
    if not result.tombstones_erased:
        return side, predicate
    retried("delete tombstones", lambda: spark.sql(f"DELETE FROM {side} WHERE {predicate}").collect())
    # rewrite_manifests: the DELETE's manifest entries keep the removed file's column bounds
    retried("tombstones: rewrite_manifests", lambda: iceberg.call_procedure(spark, side, "rewrite_manifests"))
    retried("tombstones: expire_snapshots", lambda: _expire_all_but_current(spark, side))
    if not s3_tables.in_s3_tables(table):  # S3 Tables removes unreferenced files itself
        iceberg.delete_orphan_files(spark, side, started)
    return side, predicate


def _expire_all_but_current(spark: SparkSession, name: str) -> dict[str, int]:
    now = timestamp_literal(datetime.now(UTC))
    return iceberg.call_procedure(spark, name, "expire_snapshots", f"older_than => {now}", "retain_last => 1")


def erase(
    spark: SparkSession,
    table: TableConfig,
    *,
    catalog: str,
    keys: list[str] | None = None,
    where: str | None = None,
    who: str | None = None,
    progress: Progress = no_progress,
) -> ErasureResult:
    """Erase a data subject from `table` and from its history (docs/quality_erase_maintain.md).
    Run it while no writer loads the table: orphan files younger than a day are removed too."""
    if bool(keys) == bool(where):
        raise ErasureError("give either --key VALUE (repeatable) or --where SQL, not both")
    started_clock = time.monotonic()
    started = datetime.now(UTC)
    name = s3_tables.target_name(spark, catalog, table)
    managed = s3_tables.in_s3_tables(table) and name.startswith(qualified(s3_tables.S3_TABLES_CATALOG))
    try:
        schema = spark.table(name).schema
    except AnalysisException:
        raise ErasureError(f"table {table.id!r}: {table.qualified_target} does not exist") from None
    result = ErasureResult(table.id, table.qualified_target, who=who or identity())
    if keys:
        subjects = parse_keys(table, keys)
        predicate = key_predicate(subjects, schema)
        canonical = json.dumps(sorted(json.dumps(s, sort_keys=True) for s in subjects))
        result.subjects, result.predicate_kind = len(subjects), "key"
    else:
        assert where is not None
        predicate, canonical = f"({where})", where.strip()
        result.predicate_kind = "where"
    result.predicate_sha256 = predicate_hash(table.id, canonical)

    def retried(what: str, operation: Callable):
        return retry_on_conflict(
            operation, what=f"erase {table.id!r}: {what}", settings=table.maintenance.retry, progress=progress
        )

    result.rows_erased = spark.sql(f"SELECT count(*) FROM {name} WHERE {predicate}").first()[0]
    progress(f"{result.rows_erased:,} current row(s) match")
    # Before the rows go: a --where that names other columns finds the subject's keys through them.
    side, side_predicate = _erase_tombstones(
        spark, table, name, subjects if keys else None, where, started, retried, result, progress
    )
    if result.rows_erased:
        retried("delete", lambda: spark.sql(f"DELETE FROM {name} WHERE {predicate}").collect())
    crash_point("erase:after_delete")
    before = spark.sql(f"SELECT count(*) FROM {name}.snapshots").first()[0]
    consumed_before = consumed_file_ids(spark, name, catalog=catalog, table_id=table.id)
    every_deleted = "options => map('delete-file-threshold', '1', 'remove-dangling-deletes', 'true')"
    rewrite = retried(
        "rewrite_data_files", lambda: iceberg.call_procedure(spark, name, "rewrite_data_files", every_deleted)
    )
    result.data_files_rewritten = rewrite.get("rewritten_data_files_count", 0)
    retried("rewrite_manifests", lambda: iceberg.call_procedure(spark, name, "rewrite_manifests"))
    progress(f"rewrote {result.data_files_rewritten} data file(s); expiring every older snapshot")
    expired = retried("expire_snapshots", lambda: _expire_all_but_current(spark, name))
    result.files_deleted = sum(v for k, v in expired.items() if k.startswith("deleted_"))
    result.snapshots_expired = max(0, before - spark.sql(f"SELECT count(*) FROM {name}.snapshots").first()[0])
    # Under 24 hours, unlike `maintain`: a crashed write's files may hold the subject. Only files older
    # than the erasure's start go, and erase runs while no writer loads the table.
    if not managed:  # S3 Tables: no listing of a table's storage; its unreferenced file removal deletes
        result.orphan_files_removed = iceberg.delete_orphan_files(spark, name, started)
    forgotten = consumed_before - consumed_file_ids(spark, name, catalog=catalog, table_id=table.id)
    if forgotten:
        result.notes.append(
            f"note: the expired snapshots recorded {len(forgotten)} raw input file(s) as loaded; a local "
            "`lakeloader run` over the same raw_root would load them again (the ledger keeps them done on "
            "AWS). Remove the subject from the raw zone too."
        )
    locations = iceberg.table_locations(spark, name) + (iceberg.table_locations(spark, side) if side else [])
    result.versioned_locations = [loc for loc in locations if on_s3(loc) and not managed]
    for location in result.versioned_locations:
        progress(f"deleting noncurrent object versions under {location}")
        result.object_versions_purged += purge_noncurrent_versions(location)
    progress("verifying every remaining snapshot and data file")
    result.snapshots_verified, result.data_files_verified, problems = verify(
        spark, name, predicate, managed=managed
    )
    if side and side_predicate:
        problems += [f"tombstones: {p}" for p in verify(spark, side, side_predicate, managed=managed)[2]]
    for location in result.versioned_locations:
        left = remaining_versions(location)
        if left:
            problems.append(f"{left} noncurrent object version(s)/delete marker(s) remain under {location}")
    result.verified = not problems
    result.notes.extend(f"! {p}" for p in problems)
    erased_at = datetime.now(UTC)
    result.erased_at = erased_at.isoformat(timespec="seconds")
    if managed:
        bucket = s3_tables.table_bucket_arn(spark)
        assert bucket is not None
        windows = s3_tables.removal_windows(bucket)
        gone = s3_tables.physically_gone_by(erased_at, windows)
        result.files_gone_by = gone.isoformat(timespec="seconds")
        result.notes.append(
            f"S3 Tables deletes the files that held the erased rows itself: unreferenced now, noncurrent "
            f"after {windows[0]} day(s), deleted {windows[1]} day(s) later: physically gone by "
            f"{result.files_gone_by} (the table bucket's unreferenced file removal)"
        )
    result.audit_table = _audit(spark, catalog, result, erased_at)
    result.seconds = time.monotonic() - started_clock
    if problems:
        raise ErasureNotVerifiedError(
            f"table {table.id!r}: erasure NOT verified (audit record written with verified=false):\n  - "
            + "\n  - ".join(problems)
            + "\nsnapshots kept by a branch or tag must be removed (ALTER TABLE ... DROP BRANCH/TAG) and "
            "the erasure re-run"
        )
    return result
