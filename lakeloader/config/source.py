"""`source:` -- where a table's raw files land, how to read them, and the CDC flavour's defaults."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from lakeloader.config.base import _Strict
from lakeloader.contract import normalise_prefix

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

DEBEZIUM_UNAVAILABLE = "__debezium_unavailable_value"


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
        value = normalise_prefix(value)
        if not value:
            raise ValueError("prefix must not be empty")
        return value

    @model_validator(mode="after")
    def _csv_only_for_csv(self) -> Source:
        if self.csv is not None and self.format != "csv":
            raise ValueError(f"csv options given but format is {self.format!r}")
        return self

    @property
    def csv_options(self) -> CsvOptions:
        return self.csv or CsvOptions()
