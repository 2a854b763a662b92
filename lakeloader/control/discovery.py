"""Tables found under a `sources:` entry: a raw key -> its table id, folder and table settings.

One rule for every side that finds tables: `lakeloader run`/`tables`/`discover` on a laptop (through
`lakeloader.config.sources`), and the S3-arrival Lambda, which records a found table in the config
store on its first file. Standard library only (the Lambda ships it without pydantic): the settings it
builds are plain data, validated as a `TableConfig` wherever pydantic is at hand.

A source entry (plain data, as in the config file):
``{id, prefix, format, cdc, layout: "<schema>/<table>/", include, exclude, defaults, keys}``.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

DEFAULT_LAYOUT = "<schema>/<table>/"
PLACEHOLDERS = ("<schema>", "<table>")
# A layout segment: placeholders, `*` (any text, ignored: a Debezium topic's server name) and literals
_LAYOUT_TOKEN = re.compile(r"<schema>|<table>|\*")
# Modes that need key columns (lakeloader.config.TableConfig's rule)
KEYED_MODES = ("merge", "scd2")
# Where a name from the raw zone may not be a catalog name: lower case, [a-z0-9_]
_NOT_NAME = re.compile(r"[^a-z0-9_]")
# A table id (lakeloader.config.TableConfig.id): what --table, the ledger and the config store key on
TABLE_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def layout_problems(layout: str) -> list[str]:
    """Why a layout cannot name tables ([] when it can)."""
    problems = []
    if "<table>" not in layout:
        problems.append("layout needs <table> (e.g. <schema>/<table>/)")
    for placeholder in PLACEHOLDERS:
        if layout.count(placeholder) > 1:
            problems.append(f"layout names {placeholder} more than once")
    unknown = re.findall(r"<[^>]*>", _LAYOUT_TOKEN.sub("", layout))
    if unknown:
        problems.append(f"layout knows <schema>, <table> and *, not {', '.join(unknown)}")
    if layout.startswith("/"):
        problems.append("layout is relative to the source's prefix: no leading '/'")
    return problems


def _layout_pattern(layout: str) -> re.Pattern[str]:
    layout = layout if layout.endswith("/") else layout + "/"
    parts = []
    position = 0
    for token in _LAYOUT_TOKEN.finditer(layout):
        parts.append(re.escape(layout[position : token.start()]))
        parts.append(
            {"<schema>": r"(?P<schema>[^/]+?)", "<table>": r"(?P<table>[^/]+?)", "*": r"[^/]*?"}[
                token.group()
            ]
        )
        position = token.end()
    parts.append(re.escape(layout[position:]))
    return re.compile("^" + "".join(parts))


def catalog_name(value: str) -> str:
    """A Glue database or table name from a folder name: lower case, other characters as '_'."""
    name = _NOT_NAME.sub("_", value.lower())
    return name if name and not name[0].isdigit() else f"_{name}"


@dataclass(frozen=True)
class FoundTable:
    """A table a source's layout names: its id, the folder its files land in, its settings (plain data
    for a TableConfig) and, when it cannot load yet, why (held)."""

    source_id: str
    table_id: str
    prefix: str  # the table's folder: the found table's source.prefix
    settings: dict[str, Any]
    held: str | None = None
    needs_keys: bool = False  # held for want of key columns: one line of the source's keys releases it

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> FoundTable:
        """A held table as the config store keeps it (lakeloader.control.config_store.found_item)."""
        return cls(
            str(item.get("found_by", "")),
            str(item["table_id"]),
            str(item.get("prefix", "")),
            {},
            str(item.get("held") or "") or None,
            needs_keys=item.get("held_needs_keys") is True,
        )

    @property
    def keys_line(self) -> str:
        """The one line that gives a held table its keys, under its source's `keys:`."""
        return f'"{self.table_id}": [<key column>, ...]'

    @property
    def hint(self) -> str:
        """What the user does to release a held table."""
        fix = (
            f"add under sources {self.source_id!r} -> keys: {self.keys_line}"
            if self.needs_keys
            else f"fix sources {self.source_id!r} -> defaults, or pin it with a tables: entry of id "
            f"{self.table_id!r}"
        )
        return f"{self.table_id}: held ({self.held}); its files stay pending: {fix}"


def _fill(value: Any, schema: str, table: str) -> Any:
    """`<schema>` and `<table>` in the defaults' text (e.g. target.database: raw_<schema>)."""
    if isinstance(value, str):
        return value.replace("<schema>", catalog_name(schema)).replace("<table>", catalog_name(table))
    if isinstance(value, dict):
        return {k: _fill(v, schema, table) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, schema, table) for v in value]
    return value


def database_glob(source: Mapping[str, Any]) -> str:
    """A glob every target database of the source's found tables matches (`<schema>`, `<table>` as
    `*`): what the stage grants its jobs, which create those databases as tables appear."""
    database = ((source.get("defaults") or {}).get("target") or {}).get("database") or "<schema>"
    return re.sub(r"\*+", "*", database.replace("<schema>", "*").replace("<table>", "*"))


def keys_for(source: Mapping[str, Any], table_id: str) -> list[str] | None:
    """The key columns the source's `keys` map gives a table: its exact id first, else the first glob
    that matches it, in the map's order; None when no entry matches."""
    keys = source.get("keys") or {}
    if table_id in keys:
        return list(keys[table_id])
    return next((list(columns) for glob, columns in keys.items() if fnmatchcase(table_id, glob)), None)


def wanted(source: Mapping[str, Any], table_id: str) -> bool:
    """Included by one of `include` (default: every table) and excluded by none of `exclude`."""
    include = source.get("include") or ["*"]
    exclude = source.get("exclude") or []
    return any(fnmatchcase(table_id, g) for g in include) and not any(
        fnmatchcase(table_id, g) for g in exclude
    )


def table_settings(source: Mapping[str, Any], schema: str, table: str, prefix: str) -> dict[str, Any]:
    """A found table's settings: the source's defaults, its format, the table's folder and names."""
    defaults = copy.deepcopy(dict(source.get("defaults") or {}))
    table_id = f"{schema}.{table}" if schema else table
    settings = _fill(defaults, schema, table)
    settings["id"] = table_id
    settings["source"] = {
        **settings.get("source", {}),
        "prefix": prefix,
        "format": source.get("format", "parquet"),
        "cdc": source.get("cdc", "none"),
    }
    settings["target"] = {
        "database": catalog_name(schema or str(source["id"])),
        "table": catalog_name(table),
        **settings.get("target", {}),
    }
    keys = keys_for(source, table_id)
    if keys is not None:
        settings["keys"] = keys
    return settings


def held_reason(source: Mapping[str, Any], settings: Mapping[str, Any]) -> str | None:
    """Why a found table cannot load yet: a keyed mode and no key columns."""
    if settings.get("mode", "merge") in KEYED_MODES and not settings.get("keys"):
        return (
            f"mode {settings.get('mode', 'merge')} needs key columns and no entry of the source's keys "
            f"matches; cdc: {source.get('cdc', 'none')} files do not carry them"
        )
    return None


def find_table(source: Mapping[str, Any], key: str) -> FoundTable | None:
    """The table a raw key belongs to under `source`, or None (not under its prefix, not deep enough
    for its layout, or left out by include/exclude)."""
    prefix = str(source["prefix"])
    key = key.lstrip("/")
    if not key.startswith(prefix):
        return None
    rest = key[len(prefix) :]
    match = _layout_pattern(str(source.get("layout") or DEFAULT_LAYOUT)).match(rest)
    if match is None or match.end() >= len(rest):  # not the layout, or the folder itself
        return None
    names = match.groupdict()
    schema, table = names.get("schema") or "", names["table"]
    table_id = f"{schema}.{table}" if schema else table
    if not wanted(source, table_id):
        return None
    folder = prefix + rest[: match.end()]
    settings = table_settings(source, schema, table, folder)
    if not TABLE_ID.match(table_id):
        reason = f"{table_id!r} is not a table id: use letters, digits, '.', '_' and '-'"
        return FoundTable(str(source["id"]), table_id, folder, settings, reason)
    held = held_reason(source, settings)
    return FoundTable(str(source["id"]), table_id, folder, settings, held, needs_keys=held is not None)
