"""`target:` and `scd2:` -- the Iceberg table a source lands in: name, partitions, properties, SCD2."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import Field, field_validator, model_validator

from lakeloader.config.base import IDENTIFIER, _Strict

if TYPE_CHECKING:
    from lakeloader.config.policies import MaintenanceConfig
    from lakeloader.config.rules import QualityConfig

PARTITION_TRANSFORM = re.compile(
    r"^\s*(?:(?P<fn>bucket|truncate)\(\s*(?P<n>\d+)\s*,\s*(?P<col1>[A-Za-z_][A-Za-z0-9_]*)\s*\)"
    r"|(?P<time>years|months|days|hours|year|month|day|hour)\(\s*(?P<col2>[A-Za-z_][A-Za-z0-9_]*)\s*\)"
    r"|(?P<col3>[A-Za-z_][A-Za-z0-9_]*))\s*$"
)


NEW_TABLE_PROPERTIES = {
    "format-version": "2",
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
    "write.merge.distribution-mode": "none",
    # Every batch's scans plan every manifest; Iceberg's default (100) lets a stage that commits
    # every few minutes pile up to 99 of them between maintenance runs.
    "commit.manifest.min-count-to-merge": "16",
}
"""What a table lakeloader creates gets unless target.properties says otherwise (README
"Performance", measured in benchmarks/RESULTS.md). A table that exists keeps these as it was created;
target.properties is set on it before each batch (lakeloader.engine.table_settings)."""


class Target(_Strict):
    """The Iceberg table the source is merged into."""

    database: str
    table: str
    partition_by: list[str] = Field(
        default_factory=list,
        description="Iceberg partition transforms: col, bucket(N, col), truncate(N, col), days(col), ...",
    )
    properties: dict[str, str] = Field(default_factory=dict, description="Iceberg table properties")
    format_version: Literal[2, 3] = Field(
        default=2,
        description="Iceberg format version of a table lakeloader creates: 2 (default), or 3 (deletion "
        "vectors, row lineage; glue-6.0+, never for an Athena reader; one-way: docs/format-versions.md). "
        "An existing table keeps its version: lakeloader never upgrades one",
    )
    storage: Literal["glue", "s3_tables"] = Field(
        default="glue",
        description="Where the table lives: glue (default): the Glue Data Catalog, data in the stage's "
        "curated bucket; s3_tables: an Amazon S3 Tables table bucket of the stage (namespace = database), "
        "whose own maintenance compacts, expires snapshots and removes unreferenced files "
        "(docs/deploy.md#amazon-s3-tables). Default: the stage's target_storage",
    )

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

    @model_validator(mode="after")
    def _one_format_version(self) -> Target:
        given = self.properties.get("format-version")
        if given is not None and given != str(self.format_version):
            raise ValueError(
                f"properties format-version {given} disagrees with format_version {self.format_version}: "
                "set target.format_version (and leave format-version out of properties)"
            )
        return self

    @property
    def partition_columns(self) -> list[str]:
        """Source columns the partition transforms read."""
        columns = []
        for value in self.partition_by:
            match = PARTITION_TRANSFORM.match(value)
            assert match is not None  # validated above
            columns.append(match.group("col1") or match.group("col2") or match.group("col3"))
        return columns


# Amazon S3 Tables' naming rules for namespaces and tables ("Naming rules for S3 tables and
# namespaces", S3 User Guide): 1-255 characters, lower-case letters, digits and underscores, starting
# and ending with a letter or digit; a namespace must not start with the reserved "aws".
S3_TABLES_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9_]{0,253}[a-z0-9])?$")
# What S3 Tables' compaction accepts as its target file size (PutTableMaintenanceConfiguration,
# icebergCompaction.targetFileSizeMB).
S3_TABLES_TARGET_FILE_MB = (64, 512)


class S3TablesCandidate(Protocol):
    """What s3_tables_problems reads of a table (lakeloader.config.TableConfig): config.table imports
    this module, so it names no TableConfig, not even in a type hint."""

    @property
    def target(self) -> Target: ...
    @property
    def quality(self) -> QualityConfig: ...
    @property
    def maintenance(self) -> MaintenanceConfig: ...


def s3_tables_problems(table: S3TablesCandidate) -> list[str]:
    """Why `table` cannot live in an S3 Tables table bucket: (field, message) joined as 'field: ...'.

    Checked wherever a table becomes `storage: s3_tables` (its own entry, or a stage default)."""
    problems = []
    target = table.target
    for field, name in (("target.database", target.database), ("target.table", target.table)):
        if not S3_TABLES_NAME.match(name):
            problems.append(
                f"{field}: {name!r} is not an S3 Tables name (lower-case letters, digits and _, starting "
                "and ending with a letter or digit)"
            )
    if target.database.startswith("aws"):
        problems.append(f"target.database: {target.database!r}: S3 Tables reserves namespaces starting 'aws'")
    quarantine = table.quality.quarantine_table
    if quarantine is not None and not S3_TABLES_NAME.match(quarantine):
        problems.append(f"quality.quarantine_table: {quarantine!r} is not an S3 Tables name")
    compaction = table.maintenance.compaction
    low, high = S3_TABLES_TARGET_FILE_MB
    if not low <= compaction.target_file_size_mb <= high:
        problems.append(
            f"maintenance.compaction.target_file_size_mb: S3 Tables compacts to {low}-{high} MB, "
            f"not {compaction.target_file_size_mb}"
        )
    for field in ("where", "sort_order"):
        if getattr(compaction, field) is not None:
            problems.append(
                f"maintenance.compaction.{field}: S3 Tables' own compaction takes no {field}; leave it out "
                "(storage: s3_tables)"
            )
    if "location" in {k.lower() for k in target.properties} or "write.data.path" in target.properties:
        problems.append("target.properties: S3 Tables places the table's files itself (no location)")
    return problems


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
