"""`source:` -- where a table's raw files land and how to read them (the formats: lakeloader.formats)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from lakeloader.config.base import _Strict
from lakeloader.contract import normalise_prefix
from lakeloader.formats import FORMAT_NAMES


class CsvOptions(_Strict):
    """How to read CSV files. Without a header, `columns` names the columns in order."""

    header: bool = True
    delimiter: str = ","
    quote: str = '"'
    escape: str | None = Field(
        default=None,
        description="Escape character inside quoted values. Default: the format's: \" for cdc: dms "
        "(RFC 4180: a quote is doubled), a backslash otherwise",
    )
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
    cdc: Literal[FORMAT_NAMES] = Field(  # type: ignore[valid-type]
        default="none",
        description="Change format: dms, debezium (ExtractNewRecordState output), debezium_envelope "
        "(before/after/source/op, optionally under payload) or none (every row an upsert). "
        "docs/sources.md says how to set each source up",
    )
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
