"""The whole file (`LakeConfig`): parse and load it, with errors naming file, table and field; JSON Schema."""

from __future__ import annotations

import difflib
import json
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from lakeloader.config.base import ConfigError, _Strict
from lakeloader.config.table import TableConfig
from lakeloader.contract import longest_prefix_match
from lakeloader.runtimes import Runtime


class LineageConfig(_Strict):
    """Where local runs write their OpenLineage events (lakeloader.lineage)."""

    file: str = Field(
        min_length=1,
        description="JSON-lines file each run appends its OpenLineage events to (START, then COMPLETE or "
        "FAIL, per table and verb); relative to the working directory",
    )


class LakeConfig(_Strict):
    """The whole configuration file."""

    raw_root: str = Field(default="examples/raw", description="Local folder or s3:// URI of the raw zone")
    warehouse: str = Field(default=".lakeloader/warehouse", description="Local folder or s3:// URI")
    lineage: LineageConfig | None = Field(
        default=None,
        description="OpenLineage events of local runs (`lakeloader run`, maintain, erase, rebuild) as JSON "
        "lines; default none. On AWS the runtime's lineage capture is the stage setting `lineage`",
    )
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
        """The table whose source prefix is the longest prefix of a raw object key (the Lambda's rule)."""
        return longest_prefix_match(key, self.tables, lambda t: t.source.prefix)


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


def _did_you_mean(loc: tuple[Any, ...]) -> str:
    """'; did you mean 'source'?' for an unknown key close to a key the model there knows."""
    model: Any = LakeConfig
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = {**model.model_fields, **{f.alias: f for f in model.model_fields.values() if f.alias}}
        model = _model_in(fields[part].annotation) if part in fields else None
        if model is None:
            return ""
    known = [f.alias or name for name, f in model.model_fields.items()]
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The config model a field holds (itself, or inside Optional/list/Literal unions), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next(filter(None, (_model_in(arg) for arg in typing.get_args(annotation))), None)


def parse_config(data: Any, *, origin: str = "<config>", runtime: Runtime | None = None) -> LakeConfig:
    """Validate a config mapping; raise ConfigError listing every problem. Declared types are checked
    against `runtime`'s Spark SQL (default: this process's runtime, lakeloader.runtimes.local)."""
    try:
        return LakeConfig.model_validate(data, context={"runtime": runtime})
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message += _did_you_mean(error["loc"])
            lines.append(f"{origin}: {_describe_location(data, error['loc'])}: {message}")
        raise ConfigError("\n".join(lines)) from None


def load_config(path: str | Path, *, runtime: Runtime | None = None) -> LakeConfig:
    """Read and validate a YAML (or JSON) config file (for `runtime`: parse_config)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with raw_root, warehouse and tables")
    return parse_config(data, origin=str(path), runtime=runtime)


def json_schema() -> dict[str, Any]:
    """The JSON Schema published for editors (config/tables.schema.json)."""
    schema = LakeConfig.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "lakeloader table configuration"
    return schema


def write_json_schema(path: str | Path) -> None:
    Path(path).write_text(json.dumps(json_schema(), indent=2, sort_keys=True) + "\n")
