"""The table configuration model: one typed model, validated once.

Imported by the CLI, the Spark jobs, `cdk synth` and the Lambda's packaging
step, so it must not import PySpark. Every validation error names the config
file, the table id and the field, e.g.::

    config/tables.yaml: table 'crm.customers' -> source.format: Input should be 'parquet', 'csv' or 'json'
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PARTITION_TRANSFORM = re.compile(
    r"^\s*(?:(?P<fn>bucket|truncate)\(\s*(?P<n>\d+)\s*,\s*(?P<col1>[A-Za-z_][A-Za-z0-9_]*)\s*\)"
    r"|(?P<time>years|months|days|hours|year|month|day|hour)\(\s*(?P<col2>[A-Za-z_][A-Za-z0-9_]*)\s*\)"
    r"|(?P<col3>[A-Za-z_][A-Za-z0-9_]*))\s*$"
)

CDC_DEFAULT_SEQUENCE = {"dms": "last_update_time", "debezium": "__source_ts_ms", "none": None}
# Appended to a one-column sequence_by (or the default) as tie-breakers, monotonic at the source.
# A column a file lacks compares as NULL (the oldest), so a source that never writes one is ordered
# as before. DMS: the AR_H_CHANGE_SEQ header column (zero-padded text; empty in full loads).
# Debezium: the source position as ExtractNewRecordState's add.fields=source.lsn,... flattens it:
# Postgres lsn, MySQL binlog file, position and row.
CDC_TIE_BREAKERS = {
    "dms": ("AR_H_CHANGE_SEQ",),
    "debezium": ("__source_lsn", "__source_file", "__source_pos", "__source_row"),
    "none": (),
}


class ConfigError(ValueError):
    """A configuration the user wrote is invalid; the message says where."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CsvOptions(_Strict):
    """How to read CSV files. Without a header, `columns` names the columns in order."""

    header: bool = True
    delimiter: str = ","
    quote: str = '"'
    escape: str = "\\"
    null_value: str = ""
    columns: list[str] | None = None

    @model_validator(mode="after")
    def _columns_when_headerless(self) -> CsvOptions:
        if not self.header and not self.columns:
            raise ValueError("header: false needs columns: [...] naming the CSV columns in order")
        return self


class Source(_Strict):
    """Where a table's raw files land and how to read them."""

    prefix: str = Field(description="Key prefix under raw_root, e.g. crm/public/customers/")
    format: Literal["parquet", "csv", "json"] = "parquet"
    cdc: Literal["dms", "debezium", "none"] = "none"
    csv: CsvOptions | None = None
    schema_: dict[str, str] | None = Field(
        default=None,
        alias="schema",
        description="Optional explicit column types (Spark SQL type names) used to read the files.",
    )

    @field_validator("prefix")
    @classmethod
    def _normalise_prefix(cls, value: str) -> str:
        value = value.strip().lstrip("/")
        if not value:
            raise ValueError("prefix must not be empty")
        return value if value.endswith("/") else value + "/"

    @model_validator(mode="after")
    def _csv_only_for_csv(self) -> Source:
        if self.csv is not None and self.format != "csv":
            raise ValueError(f"csv options given but format is {self.format!r}")
        return self

    @property
    def csv_options(self) -> CsvOptions:
        return self.csv or CsvOptions()


NEW_TABLE_PROPERTIES = {
    "format-version": "2",
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
    "write.merge.distribution-mode": "none",
}
"""What a table lakeloader creates gets unless target.properties says otherwise (README
"Performance", measured in benchmarks/RESULTS.md). Tables that exist keep their properties."""


class Target(_Strict):
    """The Iceberg table the source is merged into."""

    database: str
    table: str
    partition_by: list[str] = Field(
        default_factory=list,
        description="Iceberg partition transforms: col, bucket(N, col), truncate(N, col), days(col), ...",
    )
    properties: dict[str, str] = Field(default_factory=dict, description="Iceberg table properties")

    @field_validator("database", "table")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not IDENTIFIER.match(value):
            raise ValueError(
                f"{value!r} is not a valid name (letters, digits and _; not starting with a digit)"
            )
        return value

    @field_validator("partition_by")
    @classmethod
    def _transforms(cls, values: list[str]) -> list[str]:
        for value in values:
            if not PARTITION_TRANSFORM.match(value):
                raise ValueError(
                    f"{value!r} is not a partition transform; use col, bucket(N, col), truncate(N, col), "
                    "years(col), months(col), days(col) or hours(col)"
                )
        return values

    @field_validator("properties", mode="before")
    @classmethod
    def _stringify(cls, values: Any) -> Any:
        if isinstance(values, dict):
            return {str(k): (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in values.items()}
        return values

    @property
    def partition_columns(self) -> list[str]:
        """Source columns the partition transforms read."""
        columns = []
        for value in self.partition_by:
            match = PARTITION_TRANSFORM.match(value)
            assert match is not None  # validated above
            columns.append(match.group("col1") or match.group("col2") or match.group("col3"))
        return columns


class Scd2Options(_Strict):
    """`mode: scd2` -- one row per version of each key, with its validity interval.

    valid_from is the change's sequence value; valid_to is the next version's
    valid_from (NULL while current). The surrogate key is a deterministic hash
    of the key columns and valid_from; the change hash covers the tracked columns.
    """

    valid_from: str = Field(default="valid_from", description="Column: when the version became valid")
    valid_to: str = Field(default="valid_to", description="Column: when it stopped (NULL while current)")
    is_current: str = Field(default="is_current", description="Column: true on the current version")
    surrogate_key: str = Field(
        default="version_key", description="Column: sha256 hex of the key columns and valid_from"
    )
    hash: str = Field(default="row_hash", description="Column: sha256 hex of the tracked columns")
    track: list[str] | None = Field(
        default=None,
        description="Columns whose change opens a new version; default: every column except the keys, "
        "the sequence column and `ignore`",
    )
    ignore: list[str] = Field(default_factory=list, description="Columns never tracked (default tracking)")

    @field_validator("valid_from", "valid_to", "is_current", "surrogate_key", "hash")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not IDENTIFIER.match(value):
            raise ValueError(
                f"{value!r} is not a valid column name (letters, digits and _; not starting with a digit)"
            )
        return value

    @model_validator(mode="after")
    def _distinct(self) -> Scd2Options:
        names = self.columns
        if len({n.lower() for n in names}) != len(names):
            raise ValueError(f"valid_from, valid_to, is_current, surrogate_key and hash must differ: {names}")
        if self.track is not None and self.ignore:
            raise ValueError("give either track (columns to track) or ignore (columns not to), not both")
        if self.track is not None and not self.track:
            raise ValueError("track must name at least one column (leave it out to track every column)")
        return self

    @property
    def columns(self) -> list[str]:
        """The columns lakeloader manages on an SCD2 table, in table order."""
        return [self.valid_from, self.valid_to, self.is_current, self.surrogate_key, self.hash]


SORT_TERM = re.compile(
    r"^\s*(?:zorder\(\s*[A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*\s*\)"
    r"|[A-Za-z_][A-Za-z0-9_]*(?:\s+(?:ASC|DESC))?(?:\s+NULLS\s+(?:FIRST|LAST))?)\s*$",
    re.IGNORECASE,
)


class BetweenRule(_Strict):
    """`column` lies in [min, max] (either bound may be left out). NULLs pass: add not_null for them."""

    column: str
    min: float | int | str | None = None
    max: float | int | str | None = None

    @model_validator(mode="after")
    def _a_bound(self) -> BetweenRule:
        if self.min is None and self.max is None:
            raise ValueError("between needs min, max or both")
        return self


class InSetRule(_Strict):
    """`column` is one of `values`. NULLs pass: add not_null for them."""

    column: str
    values: list[str | int | float | bool] = Field(min_length=1)


class RegexRule(_Strict):
    """`column` (as a string) matches the Java regular expression `pattern` (RLIKE: a match anywhere,
    anchor with ^...$). NULLs pass."""

    column: str
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"pattern {value!r} is not a regular expression: {exc}") from None
        return value


class QualityRule(_Strict):
    """One data quality rule; give exactly one of the rule kinds (and optionally a `name`)."""

    name: str | None = Field(default=None, description="Shown in the run summary and the quarantine table")
    not_null: list[str] | None = Field(default=None, description="These columns are never NULL")
    unique: bool | list[str] | None = Field(
        default=None,
        description="true: the key columns are unique over the whole table; or a list of columns",
    )
    between: BetweenRule | None = None
    in_set: InSetRule | None = None
    regex: RegexRule | None = None
    min_row_count: int | None = Field(
        default=None, ge=0, description="The whole table (after the batch) has at least this many rows"
    )
    expression: str | None = Field(
        default=None, description="A Spark SQL boolean expression every new row satisfies (NULL fails)"
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> QualityRule:
        given = [k for k in RULE_KINDS if getattr(self, k) not in (None, False)]
        if len(given) != 1:
            raise ValueError(f"a rule needs exactly one of {', '.join(RULE_KINDS)}; got {given or 'none'}")
        if self.not_null is not None and not self.not_null:
            raise ValueError("not_null needs at least one column")
        if isinstance(self.unique, list) and not self.unique:
            raise ValueError("unique needs at least one column (or true for the key columns)")
        if self.expression is not None and not self.expression.strip():
            raise ValueError("expression must not be empty")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in RULE_KINDS if getattr(self, k) not in (None, False))

    @property
    def label(self) -> str:
        """The rule's name, or one derived from its kind and columns, e.g. not_null(email)."""
        if self.name:
            return self.name
        kind = self.kind
        if kind == "not_null":
            return f"not_null({', '.join(self.not_null or [])})"
        if kind == "unique":
            return "unique(key)" if self.unique is True else f"unique({', '.join(self.unique or [])})"
        if kind in ("between", "in_set", "regex"):
            return f"{kind}({getattr(self, kind).column})"
        if kind == "min_row_count":
            return f"min_row_count({self.min_row_count})"
        return f"expression({self.expression})"


RULE_KINDS = ("not_null", "unique", "between", "in_set", "regex", "min_row_count", "expression")


class QualityConfig(_Strict):
    """Write-audit-publish: each batch is committed to an audit branch, checked, then published."""

    rules: list[QualityRule] = Field(default_factory=list)
    on_failure: Literal["quarantine", "fail"] = Field(
        default="quarantine",
        description="quarantine: failing rows go to the quarantine table, the rest is published; "
        "fail: nothing of the batch is published and the table's run fails",
    )
    quarantine_table: str | None = Field(
        default=None, description="Quarantine table name in the target database (default <table>__quarantine)"
    )

    @field_validator("quarantine_table")
    @classmethod
    def _quarantine_name(cls, value: str | None) -> str | None:
        if value is not None and not IDENTIFIER.match(value):
            raise ValueError(f"{value!r} is not a valid table name")
        return value


DEBEZIUM_UNAVAILABLE = "__debezium_unavailable_value"


class TombstoneSettings(_Strict):
    """Deletes leave a tombstone (key, sequence tuple, when recorded) in `<table>__tombstones`, so a
    change older than the delete that arrives later is ignored instead of bringing the row back."""

    enabled: bool = True
    retain_days: float = Field(
        default=7,
        gt=0,
        description="Days `lakeloader maintain` keeps a tombstone. Cover the longest re-delivery window "
        "of the source: a DMS task resumed or restarted from an earlier checkpoint, a Debezium connector "
        "replaying from its last committed offset, a late file from a backfill",
    )


class PartialUpdates(_Strict):
    """Updates that leave some columns out: keep the table's current value for them.

    Debezium writes `__debezium_unavailable_value` for an unchanged TOASTed column; DMS can write
    NULL for an unchanged LOB column (limited LOB mode)."""

    columns: Literal["all"] | list[str] = Field(
        default="all",
        description="Columns an update may leave out: 'all' (every column but the keys and the "
        "sequence columns) or a list",
    )
    placeholder: str | None = Field(
        default=None,
        description="Value meaning 'unchanged' in an update (string and binary columns). "
        f"Default for cdc: debezium: {DEBEZIUM_UNAVAILABLE}; none otherwise",
    )
    ignore_nulls: bool = Field(
        default=False, description="NULL in an update means 'unchanged' (DMS LOB columns)"
    )

    @field_validator("columns")
    @classmethod
    def _some_columns(cls, value: Any) -> Any:
        if isinstance(value, list):
            if not value:
                raise ValueError("columns must name at least one column (or be 'all')")
            if len({c.lower() for c in value}) != len(value):
                raise ValueError(f"duplicate columns in {value}")
        return value

    @field_validator("placeholder")
    @classmethod
    def _not_empty(cls, value: str | None) -> str | None:
        if value is not None and not value:
            raise ValueError("placeholder must not be empty (use ignore_nulls for NULL)")
        return value


class CompactionSettings(_Strict):
    """rewrite_data_files: bin-pack small files (or sort them) towards the target size."""

    enabled: bool = True
    target_file_size_mb: int = Field(default=512, ge=1)
    min_input_files: int = Field(
        default=5, ge=1, description="Rewrite a file group only from this many files"
    )
    sort_order: str | None = Field(
        default=None,
        description="Sort instead of bin-pack: 'col [ASC|DESC] [NULLS FIRST|LAST], ...' or 'zorder(a, b)'",
    )
    where: str | None = Field(default=None, description="Only compact files matching this SQL predicate")
    delete_file_threshold: int = Field(
        default=1, ge=1, description="Rewrite a data file with at least this many delete files"
    )

    @field_validator("sort_order")
    @classmethod
    def _sort_order(cls, value: str | None) -> str | None:
        if value is None:
            return value
        terms = re.split(r",(?![^(]*\))", value)
        for term in terms:
            if not SORT_TERM.match(term):
                raise ValueError(
                    f"{term.strip()!r} is not a sort term; use 'col [ASC|DESC] [NULLS FIRST|LAST]' or "
                    "'zorder(a, b)'"
                )
        return value


class SnapshotRetention(_Strict):
    """expire_snapshots: drop snapshots older than `older_than_days`, always keeping `retain_last`."""

    enabled: bool = True
    older_than_days: float = Field(default=7, gt=0)
    retain_last: int = Field(default=5, ge=1)


class OrphanFiles(_Strict):
    """remove_orphan_files: delete files no snapshot references, older than `older_than_hours`."""

    enabled: bool = True
    older_than_hours: float = Field(
        default=72,
        ge=24,
        description="At least 24: a younger file may belong to a commit still in flight",
    )


class CommitRetry(_Strict):
    """Iceberg's own commit retry (table properties commit.retry.*), set on the table by maintain."""

    num_retries: int = Field(default=10, ge=0)
    min_wait_ms: int = Field(default=100, ge=0)
    max_wait_ms: int = Field(default=60_000, ge=0)
    total_timeout_ms: int = Field(default=1_800_000, ge=0)

    def table_properties(self) -> dict[str, str]:
        return {
            "commit.retry.num-retries": str(self.num_retries),
            "commit.retry.min-wait-ms": str(self.min_wait_ms),
            "commit.retry.max-wait-ms": str(self.max_wait_ms),
            "commit.retry.total-timeout-ms": str(self.total_timeout_ms),
        }


class RetrySettings(_Strict):
    """lakeloader's retry of a whole operation after a commit conflict Iceberg cannot resolve itself
    (a validation conflict): bounded exponential backoff with jitter."""

    attempts: int = Field(default=4, ge=1, le=50, description="Total attempts, the first included")
    base_seconds: float = Field(default=2.0, ge=0, description="Wait before the 2nd attempt (doubles)")
    max_seconds: float = Field(default=60.0, ge=0, description="Cap on one wait")
    jitter: float = Field(default=0.5, ge=0, le=1, description="Fraction of each wait drawn at random")


class MaintenanceConfig(_Strict):
    """`lakeloader maintain`: compaction, delete-file and manifest rewrites, expiry, orphan removal."""

    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    rewrite_delete_files: bool = True
    rewrite_manifests: bool = True
    snapshots: SnapshotRetention = Field(default_factory=SnapshotRetention)
    orphan_files: OrphanFiles = Field(default_factory=OrphanFiles)
    commit_retry: CommitRetry = Field(default_factory=CommitRetry)
    retry: RetrySettings = Field(default_factory=RetrySettings)


class TriggerConfig(_Strict):
    """When arrivals start runs on AWS (the S3-arrival Lambda; local runs ignore it)."""

    min_interval_seconds: int = Field(
        default=0,
        ge=0,
        le=86_400,
        description="Batching window. 0 (default): every arrival starts a run unless one is running. "
        "N > 0: arrivals are recorded and wait; the stage's sweep starts one run for them once N seconds "
        "have passed since the table's last run start, grouping due tables into shared runs",
    )
    execution_class: Literal["STANDARD", "FLEX"] = Field(
        default="STANDARD",
        description="Glue execution class of the table's runs: FLEX (cheaper, may start later) for "
        "tables that can wait. engine: glue only",
    )


class TableConfig(_Strict):
    """One source table and how it lands in Iceberg."""

    id: str = Field(description="Unique id, e.g. crm.customers; used by --table and in the ledger")
    enabled: bool = True
    source: Source
    target: Target
    keys: list[str] = Field(default_factory=list, description="Primary key columns (composite allowed)")
    sequence_by: str | list[str] | None = Field(
        default=None,
        description="What orders changes to one key. A column name: that column, then the CDC flavour's "
        "tie-breakers (DMS AR_H_CHANGE_SEQ; Debezium __source_lsn, __source_file, __source_pos, "
        "__source_row) where a file has them. A list: exactly these columns, compared as a tuple. "
        "Default: the flavour's timestamp column (last_update_time, __source_ts_ms) and its tie-breakers",
    )
    mode: Literal["merge", "append", "overwrite", "scd2"] = "merge"
    scd2: Scd2Options | None = Field(
        default=None, description="SCD type 2 column names and tracked columns (mode: scd2)"
    )
    schema_evolution: Literal["evolve", "freeze", "fail"] = "evolve"
    engine: Literal["glue", "emr"] = Field(default="glue", description="Engine that runs this table on AWS")
    tombstones: TombstoneSettings = Field(
        default_factory=TombstoneSettings,
        description="Deletes leave tombstones so later-arriving older changes stay deleted (merge, scd2)",
    )
    partial_updates: PartialUpdates | None = Field(
        default=None,
        description="Keep the current value of columns an update leaves out (placeholder or NULL; "
        "merge, scd2)",
    )
    quality: QualityConfig = Field(
        default_factory=QualityConfig, description="Data quality rules, checked before publishing (WAP)"
    )
    maintenance: MaintenanceConfig = Field(
        default_factory=MaintenanceConfig, description="Table maintenance and commit-conflict retry"
    )
    trigger: TriggerConfig = Field(
        default_factory=TriggerConfig, description="Batching window and Glue execution class of AWS runs"
    )

    @model_validator(mode="after")
    def _flex_needs_glue(self) -> TableConfig:
        if self.trigger.execution_class == "FLEX" and self.engine != "glue":
            raise ValueError(
                "trigger.execution_class FLEX is a Glue execution class; this table's engine is emr"
            )
        return self

    @model_validator(mode="after")
    def _unique_needs_keys(self) -> TableConfig:
        if any(rule.unique is True for rule in self.quality.rules) and not self.keys:
            raise ValueError("quality rule 'unique: true' means the key columns, but the table has no keys")
        return self

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not re.match(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$", value):
            raise ValueError(f"{value!r}: use letters, digits, '.', '_' and '-'")
        return value

    @field_validator("sequence_by", mode="before")
    @classmethod
    def _sequence_shape(cls, value: Any) -> Any:
        if value is None:
            return value
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names or [""]):
            raise ValueError("give a column name or a non-empty list of column names")
        if len({n.lower() for n in names}) != len(names):
            raise ValueError(f"duplicate columns in {names}")
        return value

    @field_validator("keys")
    @classmethod
    def _unique_keys(cls, values: list[str]) -> list[str]:
        if len({v.lower() for v in values}) != len(values):
            raise ValueError(f"duplicate key columns in {values}")
        return values

    @model_validator(mode="after")
    def _mode_needs(self) -> TableConfig:
        if self.mode == "merge" and not self.keys:
            raise ValueError("mode 'merge' needs keys: [...] (the primary key columns)")
        if self.mode == "merge" and self.source.cdc != "none" and self.sequence_column is None:
            raise ValueError("a CDC source needs sequence_by (the column that orders changes)")
        if self.scd2 is not None and self.mode != "scd2":
            raise ValueError(f"scd2 options given but mode is {self.mode!r} (set mode: scd2)")
        if self.mode == "scd2":
            self._check_scd2()
        return self

    @model_validator(mode="after")
    def _partial_updates(self) -> TableConfig:
        partial = self.partial_updates
        if partial is None:
            return self
        where = "partial_updates"
        if self.mode not in ("merge", "scd2"):
            raise ValueError(f"{where} applies to mode merge or scd2, not {self.mode!r}")
        if self.source.cdc == "none":
            raise ValueError(
                f"{where} needs a CDC source (cdc: dms or debezium): only updates leave columns out"
            )
        if self.unchanged_placeholder is None and not partial.ignore_nulls:
            raise ValueError(
                f"{where}: nothing marks a column as unchanged; give placeholder: '...' or ignore_nulls: true"
            )
        if isinstance(partial.columns, list):
            fixed = {k.lower() for k in self.keys} | {c.lower() for c in self.sequence_columns}
            if self.mode == "scd2":
                fixed |= {c.lower() for c in self.scd2_options.columns}
            bad = [c for c in partial.columns if c.lower() in fixed]
            if bad:
                raise ValueError(f"{where}.columns must not name key, sequence or scd2 columns: {bad}")
        return self

    def _check_scd2(self) -> None:
        if not self.keys:
            raise ValueError("mode 'scd2' needs keys: [...] (the business key columns)")
        if self.sequence_column is None:
            raise ValueError("mode 'scd2' needs sequence_by (the column valid_from is taken from)")
        options = self.scd2_options
        taken = {k.lower() for k in self.keys} | {c.lower() for c in self.sequence_columns}
        clash = [c for c in options.columns if c.lower() in taken]
        if clash:
            raise ValueError(f"scd2 column(s) {clash} clash with the keys or the sequence columns")
        managed = {c.lower() for c in options.columns}
        for listed, name in ((options.track or [], "track"), (options.ignore, "ignore")):
            bad = [c for c in listed if c.lower() in managed or c.lower() in {k.lower() for k in self.keys}]
            if bad:
                raise ValueError(f"scd2.{name} must not name key or scd2 columns: {bad}")

    @property
    def scd2_options(self) -> Scd2Options:
        return self.scd2 or Scd2Options()

    @property
    def unchanged_placeholder(self) -> str | None:
        """The value meaning 'unchanged' in an update (partial_updates), if any."""
        if self.partial_updates is None:
            return None
        if self.partial_updates.placeholder is not None:
            return self.partial_updates.placeholder
        return DEBEZIUM_UNAVAILABLE if self.source.cdc == "debezium" else None

    @property
    def sequence_columns(self) -> list[str]:
        """The columns ordering changes to one key, compared left to right (empty: no order)."""
        if isinstance(self.sequence_by, list):
            return list(self.sequence_by)
        first = self.sequence_by or CDC_DEFAULT_SEQUENCE[self.source.cdc]
        if first is None:
            return []
        breakers = [c for c in CDC_TIE_BREAKERS[self.source.cdc] if c.lower() != first.lower()]
        return [first, *breakers]

    @property
    def sequence_column(self) -> str | None:
        """The first sequence column: the change's time, which SCD2's valid_from takes."""
        return next(iter(self.sequence_columns), None)

    @property
    def qualified_target(self) -> str:
        return f"{self.target.database}.{self.target.table}"


class LakeConfig(_Strict):
    """The whole configuration file."""

    raw_root: str = Field(default="examples/raw", description="Local folder or s3:// URI of the raw zone")
    warehouse: str = Field(default=".lakeloader/warehouse", description="Local folder or s3:// URI")
    tables: list[TableConfig]

    @model_validator(mode="after")
    def _unique(self) -> LakeConfig:
        for attr, describe in (
            (lambda t: t.id, "id"),
            (lambda t: t.qualified_target.lower(), "target"),
            (lambda t: t.source.prefix, "source.prefix"),
        ):
            seen: dict[str, str] = {}
            for table in self.tables:
                value = attr(table)
                if value in seen:
                    raise ValueError(
                        f"tables {seen[value]!r} and {table.id!r} share the same {describe} {value!r}"
                    )
                seen[value] = table.id
        return self

    def table(self, table_id: str) -> TableConfig:
        for table in self.tables:
            if table.id == table_id:
                return table
        known = ", ".join(t.id for t in self.tables)
        raise ConfigError(f"unknown table {table_id!r}; the config has: {known}")

    def select(self, table_ids: list[str] | None) -> list[TableConfig]:
        """The tables a run covers: the named ones, else every enabled table."""
        if table_ids:
            return [self.table(t) for t in table_ids]
        return [t for t in self.tables if t.enabled]

    def match_key(self, key: str) -> TableConfig | None:
        """The table whose source prefix is the longest prefix of a raw object key."""
        candidates = [t for t in self.tables if key.lstrip("/").startswith(t.source.prefix)]
        return max(candidates, key=lambda t: len(t.source.prefix), default=None)


def _describe_location(data: Any, loc: tuple[Any, ...]) -> str:
    """Turn pydantic's ('tables', 0, 'source', 'format') into "table 'crm.x' -> source.format"."""
    if len(loc) >= 2 and loc[0] == "tables" and isinstance(loc[1], int):
        table_id = None
        tables = data.get("tables") if isinstance(data, dict) else None
        if isinstance(tables, list) and loc[1] < len(tables) and isinstance(tables[loc[1]], dict):
            table_id = tables[loc[1]].get("id")
        who = f"table {table_id!r}" if table_id else f"tables[{loc[1]}]"
        field = ".".join(str(p) for p in loc[2:]) or "(table)"
        return f"{who} -> {field}"
    return ".".join(str(p) for p in loc) or "(top level)"


def parse_config(data: Any, *, origin: str = "<config>") -> LakeConfig:
    """Validate a config mapping; raise ConfigError listing every problem."""
    try:
        return LakeConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            message = error["msg"].removeprefix("Value error, ")
            lines.append(f"{origin}: {_describe_location(data, error['loc'])}: {message}")
        raise ConfigError("\n".join(lines)) from None


def load_config(path: str | Path) -> LakeConfig:
    """Read and validate a YAML (or JSON) config file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with raw_root, warehouse and tables")
    return parse_config(data, origin=str(path))


def json_schema() -> dict[str, Any]:
    """The JSON Schema published for editors (config/tables.schema.json)."""
    schema = LakeConfig.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "lakeloader table configuration"
    return schema


def write_json_schema(path: str | Path) -> None:
    Path(path).write_text(json.dumps(json_schema(), indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":  # python -m lakeloader.config config/tables.schema.json
    import sys

    write_json_schema(sys.argv[1] if len(sys.argv) > 1 else "config/tables.schema.json")
