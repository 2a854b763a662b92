"""`source:` -- where a table's raw files land and how to read them (the formats: lakeloader.formats)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from lakeloader.config.base import _Strict, raw_prefix
from lakeloader.config.types import TypeSyntaxError, check_type, valid_forms
from lakeloader.control import runtimes
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
        "(before/after/source/op, optionally under payload), snapshot (each folder a full copy of the "
        "table; lakeloader derives the inserts, updates and deletes) or none (every row an upsert). "
        "docs/sources.md says how to set each source up",
    )
    # cdc: snapshot only (docs/sources.md "Full snapshots")
    complete_when: Literal["success_file", "next_snapshot"] = Field(
        default="success_file",
        description="cdc: snapshot: a snapshot folder is applied once it holds a _SUCCESS file, or "
        "(next_snapshot) once a later snapshot folder exists",
    )
    snapshot_by: str | None = Field(
        default=None,
        description="cdc: snapshot: a column holding the snapshot's time (its highest value orders the "
        "snapshots); default: the folder name, kept in the column lakeloader_snapshot",
    )
    compare_columns: list[str] | None = Field(
        default=None,
        description="cdc: snapshot: the columns whose change makes an update; default: every column but "
        "the keys and the snapshot's time",
    )
    deletes: Literal["delete", "ignore"] = Field(
        default="delete",
        description="cdc: snapshot: a key missing from a snapshot is deleted (with its tombstone), or "
        "kept (ignore: append-only extracts)",
    )
    csv: CsvOptions | None = None
    schema_: dict[str, str] | None = Field(
        default=None,
        alias="schema",
        description="Optional explicit column types (Spark SQL types: int, decimal(12,2), "
        "array<string>, struct<a:int,b:string>, ...) the files' columns are cast to when read; checked "
        "against the Spark SQL grammar of the stage's runtime",
    )

    @field_validator("schema_")
    @classmethod
    def _spark_types(cls, value: dict[str, str] | None, info: ValidationInfo) -> dict[str, str] | None:
        """Each declared type parses on the runtime the config is validated for: the validation
        context's `runtime` (a Runtime, or "any" for a config read back on a stage, which `cdk synth`
        checked for its own), else the runtime of this process (lakeloader.control.runtimes.local)."""
        wanted = (info.context or {}).get("runtime")
        rows = list(runtimes.RUNTIMES.values()) if wanted == "any" else [wanted or runtimes.local()]
        for column, text in (value or {}).items():
            problems = []
            for row in rows:
                try:
                    check_type(text, row)
                    break
                except TypeSyntaxError as exc:
                    problems.append(str(exc))
            else:
                raise ValueError(
                    f"column {column}: {text!r}: {problems[-1]}; valid forms: {valid_forms(rows[-1])}"
                )
        return value

    _prefix = field_validator("prefix")(raw_prefix)

    @model_validator(mode="after")
    def _csv_only_for_csv(self) -> Source:
        if self.csv is not None and self.format != "csv":
            raise ValueError(f"csv options given but format is {self.format!r}")
        return self

    @model_validator(mode="after")
    def _snapshot_options(self) -> Source:
        # Set away from their defaults (a config read back from the config table holds every field)
        given = [
            f
            for f in ("complete_when", "snapshot_by", "compare_columns", "deletes")
            if getattr(self, f) != type(self).model_fields[f].default
        ]
        if given and self.cdc != "snapshot":
            raise ValueError(
                f"{', '.join(given)} apply to cdc: snapshot only (this source is cdc: {self.cdc})"
            )
        if self.compare_columns is not None and not self.compare_columns:
            raise ValueError("compare_columns: name at least one column, or leave it out to compare them all")
        return self

    @property
    def csv_options(self) -> CsvOptions:
        return self.csv or CsvOptions()
