"""`sources:` -- one entry for every table under a raw prefix, as a DMS task or a Debezium connector
writes them (`<source>/<schema>/<table>/`). The rule that names a key's table is
`lakeloader.control.discovery` (shared with the S3-arrival Lambda); this module validates the entry and turns
what a raw prefix holds into `TableConfig`s (found) and the tables that cannot load yet (held).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from lakeloader.config.base import _Strict, raw_prefix
from lakeloader.config.table import TableConfig
from lakeloader.control.discovery import DEFAULT_LAYOUT, FoundTable, find_table, layout_problems
from lakeloader.formats import FORMAT_NAMES

# What `defaults` may not set: the source entry and the layout decide them
_NOT_DEFAULTS = ("id",)
_SOURCE_FIXED = ("prefix", "format", "cdc")


class SourceConfig(_Strict):
    """Every table under a raw prefix, found by the layout of its folders."""

    id: str = Field(description="Names the source in messages and in `lakeloader discover --source ID`")
    prefix: str = Field(description="Key prefix under raw_root the source writes to, e.g. crm/")
    format: Literal["parquet", "csv", "json"] = "parquet"
    cdc: Literal[FORMAT_NAMES] = Field(  # type: ignore[valid-type]
        default="none", description="Change format of every table's files (as a table's source.cdc)"
    )
    layout: str = Field(
        default=DEFAULT_LAYOUT,
        description="The folders under prefix that name a table: <schema> and <table> (and * for text to "
        "ignore), e.g. <schema>/<table>/ (DMS) or *.<schema>.<table>/ (Debezium topics). A found table's "
        "id is <schema>.<table>; its target database the schema, its table the table",
    )
    include: list[str] = Field(default_factory=lambda: ["*"], description="Globs of table ids to load")
    exclude: list[str] = Field(default_factory=list, description="Globs of table ids never to load")
    defaults: dict[str, Any] = Field(
        default_factory=dict,
        description="Any table setting for every found table (mode, sequence_by, schema_evolution, "
        "target.partition_by, target.storage, target.database: raw_<schema>, ...). A tables: entry with "
        "a found table's id takes that table's place",
    )
    keys: dict[str, list[str]] = Field(
        default_factory=dict,
        description='Key columns by table id, globs allowed: {"hr.staff": [staff_id], "*": [id]}. An exact '
        "id wins, then the first glob that matches. A table no entry matches has no keys: with mode "
        "merge or scd2 it is held (its files wait) until one is added",
    )

    _prefix = field_validator("prefix")(raw_prefix)

    @field_validator("layout")
    @classmethod
    def _layout(cls, value: str) -> str:
        problems = layout_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("keys")
    @classmethod
    def _keys(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        empty = [table for table, columns in value.items() if not columns]
        if empty:
            raise ValueError(f"give at least one key column for {', '.join(empty)}")
        return value

    @model_validator(mode="after")
    def _defaults(self) -> SourceConfig:
        """The defaults make a valid table: checked on a sample table, one line per problem."""
        fixed = [f for f in _NOT_DEFAULTS if f in self.defaults] + [
            f"source.{f}" for f in _SOURCE_FIXED if f in (self.defaults.get("source") or {})
        ]
        if fixed:
            raise ValueError(f"defaults: {', '.join(fixed)} come from the source entry and the layout")
        sample = find_table(self.as_data() | {"keys": {"*": ["id"]}}, self.prefix + self._sample_path())
        assert sample is not None  # the sample path follows the layout
        try:
            TableConfig.model_validate(sample.settings)
        except ValidationError as exc:
            problems = [
                f"defaults.{'.'.join(str(p) for p in e['loc']) or '(table)'}: "
                + e["msg"].removeprefix("Value error, ")
                for e in exc.errors()
            ]
            raise ValueError("; ".join(problems)) from None
        return self

    def _sample_path(self) -> str:
        return (self.layout if self.layout.endswith("/") else self.layout + "/").replace(
            "<schema>", "s"
        ).replace("<table>", "t").replace("*", "x") + "file"

    def as_data(self) -> dict[str, Any]:
        """The entry as the plain data `lakeloader.control.discovery` and the config store take."""
        return self.model_dump(mode="json")


@dataclass
class Discovery:
    """What the sources' prefixes hold: tables that load, and tables held (with why and the line to add)."""

    found: list[TableConfig] = field(default_factory=list)
    held: list[FoundTable] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)  # table id -> files seen


def discover(
    sources: Iterable[SourceConfig], declared: Iterable[TableConfig], keys: Iterable[str]
) -> Discovery:
    """The tables the raw keys name under the sources. A declared table keeps its files: a key whose
    longest-matching declared prefix is at least as long as the found folder is not discovered, and a
    tables: entry with a found table's id takes its place. A found table whose settings do not make a
    valid table is held with the validation's message."""
    declared = list(declared)
    declared_ids = {t.id for t in declared}
    found: dict[str, FoundTable] = {}
    files: dict[str, int] = {}
    entries = [s.as_data() for s in sources]
    for key in keys:
        for entry in entries:
            table = find_table(entry, key)
            if table is None or table.table_id in declared_ids:
                continue
            owners = [t for t in declared if key.startswith(t.source.prefix)]
            if any(len(t.source.prefix) >= len(table.prefix) for t in owners):
                continue
            found.setdefault(table.table_id, table)
            files[table.table_id] = files.get(table.table_id, 0) + 1
            break
    result = Discovery(files=files)
    for table_id in sorted(found):
        table = found[table_id]
        if table.held:
            result.held.append(table)
            continue
        try:
            result.found.append(TableConfig.model_validate(table.settings))
        except ValidationError as exc:
            reason = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            result.held.append(FoundTable(table.source_id, table_id, table.prefix, table.settings, reason))
    return result


def raw_keys(raw_root: str, sources: Iterable[SourceConfig]) -> list[str]:
    """The data files under the sources' prefixes today (local folder or s3://), as keys."""
    from lakeloader.spark.inputs import list_inputs

    return [f.name for s in sources for f in list_inputs(raw_root, s.prefix)]
