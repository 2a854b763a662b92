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
from lakeloader.config.sources import Discovery, SourceConfig, discover, raw_keys
from lakeloader.config.table import TableConfig
from lakeloader.control.contract import longest_prefix_matches
from lakeloader.control.runtimes import Runtime


class LineageConfig(_Strict):
    """Where local runs write their OpenLineage events (lakeloader.jobs.lineage)."""

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
    tables: list[TableConfig] = Field(default_factory=list)
    sources: list[SourceConfig] = Field(
        default_factory=list,
        description="Every table under a raw prefix in one entry (docs/sources.md, a whole source)",
    )

    @model_validator(mode="after")
    def _unique(self) -> LakeConfig:
        """Ids and targets are unique. Tables may share a source.prefix (each records the prefix's files
        in its own ledger entries): a current table and its SCD2 history read one CDC feed."""
        for attr, describe in ((lambda t: t.id, "id"), (lambda t: t.qualified_target.lower(), "target")):
            seen: dict[str, TableConfig] = {}
            for table in self.tables:
                value = attr(table)
                if value in seen:
                    first = seen[value]
                    same_prefix = (
                        " and source.prefix (tables may share a prefix only when their targets differ)"
                        if describe == "target" and first.source.prefix == table.source.prefix
                        else ""
                    )
                    who = f"tables {first.id!r} and {table.id!r}"
                    raise ValueError(f"{who} share the same {describe} {value!r}{same_prefix}")
                seen[value] = table
        return self

    @model_validator(mode="after")
    def _unique_sources(self) -> LakeConfig:
        seen: set[str] = set()
        for source in self.sources:
            if source.id in seen:
                raise ValueError(f"two sources have the id {source.id!r}")
            seen.add(source.id)
        if not {"tables", "sources"} & self.model_fields_set:  # an empty list is a stage with no tables yet
            raise ValueError("give tables: [...] or sources: [...]")
        return self

    def with_found_tables(self, keys: list[str] | None = None) -> tuple[LakeConfig, Discovery]:
        """This config with the tables its sources' prefixes hold today (`keys`: default, a listing of
        raw_root) beside the declared ones, and what was found and held."""
        if not self.sources:
            return self, Discovery()
        found = discover(
            self.sources, self.tables, raw_keys(self.raw_root, self.sources) if keys is None else keys
        )
        return self.model_copy(update={"tables": [*self.tables, *found.found]}), found

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

    def match_key(self, key: str) -> list[TableConfig]:
        """The tables whose source prefix is the longest prefix of a raw object key (the Lambda's rule):
        several when tables read one prefix into different targets (a table and its SCD2 history)."""
        return longest_prefix_matches(key, self.tables, lambda t: t.source.prefix)


def _describe_location(data: Any, loc: tuple[Any, ...]) -> str:
    """Turn pydantic's ('tables', 0, 'source', 'format') into "table 'crm.x' -> source.format"."""
    if len(loc) >= 2 and loc[0] in ("tables", "sources") and isinstance(loc[1], int):
        table_id = None
        tables = data.get(loc[0]) if isinstance(data, dict) else None
        if isinstance(tables, list) and loc[1] < len(tables) and isinstance(tables[loc[1]], dict):
            table_id = tables[loc[1]].get("id")
        kind = "table" if loc[0] == "tables" else "source"
        who = f"{kind} {table_id!r}" if table_id else f"{loc[0]}[{loc[1]}]"
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
    against `runtime`'s Spark SQL (default: this process's runtime, lakeloader.control.runtimes.local)."""
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
        raise ConfigError(f"{path}: expected a mapping with raw_root, warehouse and tables (or sources)")
    return parse_config(data, origin=str(path), runtime=runtime)


def json_schema() -> dict[str, Any]:
    """The JSON Schema published for editors (config/tables.schema.json)."""
    schema = LakeConfig.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "lakeloader table configuration"
    return schema


def write_json_schema(path: str | Path) -> None:
    Path(path).write_text(json.dumps(json_schema(), indent=2, sort_keys=True) + "\n")
