"""One table's entry (`TableConfig`): its parts, and the checks that span them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from lakeloader.config.base import _Strict
from lakeloader.config.policies import (
    ColumnSelection,
    MaintenanceConfig,
    PartialUpdates,
    ReconcileSettings,
    TombstoneSettings,
    TriggerConfig,
)
from lakeloader.config.rules import QualityConfig
from lakeloader.config.source import Source
from lakeloader.config.target import Scd2Options, Target, s3_tables_problems
from lakeloader.control.discovery import TABLE_ID
from lakeloader.formats import source_format
from lakeloader.spark.columns import SNAPSHOT

ARRIVAL_ORDER = "none"  # sequence_by: none -- no column orders changes; the file and row order do


class TableConfig(_Strict):
    """One source table and how it lands in Iceberg."""

    id: str = Field(description="Unique id, e.g. crm.customers; used by --table and in the ledger")
    enabled: bool = True
    source: Source
    target: Target
    keys: list[str] = Field(default_factory=list, description="Primary key columns (composite allowed)")
    sequence_by: str | list[str] | None = Field(
        default=None,
        description="What orders changes to one key. A column name: that column, then the format's "
        "tie-breakers (DMS AR_H_CHANGE_SEQ; Debezium __source_lsn, __source_file, __source_pos, "
        "__source_row, ...) where a file has them. A list: exactly these columns, compared as a tuple. "
        "Default: the format's timestamp column (last_update_time, __source_ts_ms) and its tie-breakers. "
        "A CDC file without the first column fails. 'none': no column; the file and row order decide",
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
    reconcile: ReconcileSettings = Field(
        default_factory=ReconcileSettings,
        description="Each commit's counts held against what the table reports of it, and what a "
        "mismatch does (merge, scd2)",
    )
    partial_updates: PartialUpdates | None = Field(
        default=None,
        description="Keep the current value of columns an update leaves out (placeholder or NULL; "
        "merge, scd2)",
    )
    columns: ColumnSelection | None = Field(
        default=None, description="Source columns to keep (include) or drop (exclude), applied at read"
    )
    delete_when: str | None = Field(
        default=None,
        description="Spark SQL predicate over the source columns; matching rows are deletes "
        "(soft-delete sources, e.g. is_deleted = true)",
    )
    on_truncate: Literal["fail", "empty_table", "ignore"] = Field(
        default="fail",
        description="A truncate event (Debezium op t): fail the batch, empty the table as of the truncate "
        "(merge, scd2: close every current version), or ignore it",
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
    def _s3_tables(self) -> TableConfig:
        if self.target.storage == "s3_tables":
            problems = s3_tables_problems(self)
            if problems:
                raise ValueError("target.storage s3_tables: " + "; ".join(problems))
        return self

    @model_validator(mode="after")
    def _unique_needs_keys(self) -> TableConfig:
        if any(rule.unique is True for rule in self.quality.rules) and not self.keys:
            raise ValueError("quality rule 'unique: true' means the key columns, but the table has no keys")
        return self

    @model_validator(mode="after")
    def _shaping(self) -> TableConfig:
        if self.delete_when is not None and not self.delete_when.strip():
            raise ValueError("delete_when: give a SQL predicate, e.g. is_deleted = true")
        if self.delete_when is not None and self.mode not in ("merge", "scd2"):
            raise ValueError(f"delete_when applies to mode merge or scd2, not {self.mode!r}")
        if self.on_truncate == "empty_table" and self.mode not in ("merge", "scd2"):
            raise ValueError(f"on_truncate: empty_table applies to mode merge or scd2, not {self.mode!r}")
        needed = [*self.keys, *self.sequence_columns[:1], *self.target.partition_columns]
        if self.mode == "scd2":
            needed += self.scd2_options.track or []
        dropped = {c.lower() for c in (self.columns.exclude or [])} if self.columns else set()
        bad = [c for c in needed if c.lower() in dropped]
        if bad:
            raise ValueError(f"columns.exclude must not name key, sequence or partition columns: {bad}")
        return self

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not TABLE_ID.match(value):
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
        if (
            self.mode == "merge"
            and self.source.cdc != "none"
            and self.sequence_column is None
            and (not self.arrival_order)
        ):
            raise ValueError(
                "a CDC source needs sequence_by (the column that orders changes), or sequence_by: none "
                "to accept arrival order"
            )
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
        if not source_format(self.source.cdc).is_cdc:
            raise ValueError(
                f"{where} needs a CDC source (cdc: dms, debezium, ...): only updates leave columns out"
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

    @model_validator(mode="after")
    def _snapshot_source(self) -> TableConfig:
        if self.source.cdc != "snapshot":
            return self
        if self.mode not in ("merge", "scd2"):
            raise ValueError(
                f"cdc: snapshot applies to mode merge or scd2, not {self.mode!r} (mode overwrite with "
                "cdc: none replaces the table with every load)"
            )
        if self.sequence_by is not None:
            raise ValueError(
                "sequence_by does not apply to cdc: snapshot: the folder name, or source.snapshot_by, orders "
                "the snapshots"
            )
        if self.delete_when is not None:
            raise ValueError(
                "delete_when does not apply to cdc: snapshot: a key missing from a snapshot is deleted"
            )
        keys = {k.lower() for k in self.keys}
        named = [
            c
            for c in [*(self.source.compare_columns or []), self.source.snapshot_by or ""]
            if c.lower() in keys
        ]
        if named:
            raise ValueError(f"source.compare_columns and snapshot_by must not name key columns: {named}")
        return self

    def _check_scd2(self) -> None:
        if not self.keys:
            raise ValueError("mode 'scd2' needs keys: [...] (the business key columns)")
        if self.sequence_column is None:
            raise ValueError("mode 'scd2' needs sequence_by (the column valid_from is taken from), not none")
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
        return source_format(self.source.cdc).placeholder

    @property
    def sequence_columns(self) -> list[str]:
        """The columns ordering changes to one key, compared left to right (empty: no order)."""
        if isinstance(self.sequence_by, list):
            return list(self.sequence_by)
        if self.source.cdc == "snapshot":
            return [self.source.snapshot_by or SNAPSHOT]
        if self.arrival_order:
            return []
        fmt = source_format(self.source.cdc)
        first = self.sequence_by or fmt.default_sequence
        if first is None:
            return []
        breakers = [c for c in fmt.tie_breakers if c.lower() != first.lower()]
        return [first, *breakers]

    @property
    def arrival_order(self) -> bool:
        """sequence_by: none -- the user accepts that file and row order alone order changes."""
        return isinstance(self.sequence_by, str) and self.sequence_by.lower() == ARRIVAL_ORDER

    @property
    def sequence_column(self) -> str | None:
        """The first sequence column: the change's time, which SCD2's valid_from takes."""
        return next(iter(self.sequence_columns), None)

    @property
    def qualified_target(self) -> str:
        return f"{self.target.database}.{self.target.table}"
