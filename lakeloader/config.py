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


class TableConfig(_Strict):
    """One source table and how it lands in Iceberg."""

    id: str = Field(description="Unique id, e.g. crm.customers; used by --table and in the ledger")
    enabled: bool = True
    source: Source
    target: Target
    keys: list[str] = Field(default_factory=list, description="Primary key columns (composite allowed)")
    sequence_by: str | None = Field(
        default=None,
        description="Column ordering changes to one key; defaults to the CDC flavour's timestamp column",
    )
    mode: Literal["merge", "append", "overwrite"] = "merge"
    schema_evolution: Literal["evolve", "freeze", "fail"] = "evolve"
    engine: Literal["glue", "emr"] = Field(default="glue", description="Engine that runs this table on AWS")

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not re.match(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$", value):
            raise ValueError(f"{value!r}: use letters, digits, '.', '_' and '-'")
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
        return self

    @property
    def sequence_column(self) -> str | None:
        return self.sequence_by or CDC_DEFAULT_SEQUENCE[self.source.cdc]

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
