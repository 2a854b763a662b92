"""The config's word on an Iceberg table that exists: `target.properties` and `partition_by` are
applied to it before each batch; a change of `keys` or `mode` is refused, because rows already merged
under the old keys cannot be re-keyed in place (`lakeloader rebuild` builds the table again).

A table records the keys and mode it was created with in its properties (`lakeloader.keys`,
`lakeloader.mode`); a table created before they were recorded adopts the config's on its next batch.
"""

from __future__ import annotations

import json

from pyspark.sql import SparkSession

from lakeloader import iceberg
from lakeloader.config import TableConfig
from lakeloader.config.target import PARTITION_TRANSFORM
from lakeloader.spark import next_step
from lakeloader.spark.errors import LakeloaderError
from lakeloader.spark.progress import Progress, no_progress
from lakeloader.spark.sql import quote

KEYS_PROPERTY = "lakeloader.keys"
MODE_PROPERTY = "lakeloader.mode"

# Iceberg's transform names (Transform.toString) for the config's spellings
_TIME_TRANSFORMS = {"years": "year", "months": "month", "days": "day", "hours": "hour"}


class ConfigChangeError(LakeloaderError):
    """The config asks for a change an existing table cannot take in place."""


def identity_properties(table: TableConfig) -> dict[str, str]:
    """What a table records about how it merges (compared with the config before every batch)."""
    return {KEYS_PROPERTY: json.dumps(list(table.keys)), MODE_PROPERTY: table.mode}


def partition_sql(expr: str, columns: list[str]) -> str:
    """A partition_by entry as SQL, its column quoted and spelled as the table spells it."""
    kind, column = _transform(expr)
    spelled = next((c for c in columns if c.lower() == column), column)
    if kind == "identity":
        return quote(spelled)
    if "[" in kind:  # bucket[N] / truncate[N]
        name, width = kind.rstrip("]").split("[")
        return f"{name}({width}, {quote(spelled)})"
    return f"{kind}s({quote(spelled)})"


def _transform(expr: str) -> tuple[str, str]:
    """(Iceberg transform name, lower-case column) of a partition_by entry."""
    match = PARTITION_TRANSFORM.match(expr)
    if match is None:  # validated with the config
        raise ValueError(f"{expr!r} is not a partition transform")
    if match.group("fn"):
        return f"{match.group('fn')}[{match.group('n')}]", match.group("col1").lower()
    if match.group("time"):
        time = match.group("time")
        return _TIME_TRANSFORMS.get(time, time), match.group("col2").lower()
    return "identity", match.group("col3").lower()


# Set when a table is created (target.format_version), never on one that exists: an upgrade is one-way
# and its readers must all read the new version (docs/format-versions.md).
FORMAT_VERSION = "format-version"


def config_properties(table: TableConfig) -> dict[str, str]:
    """Every table property the config sets on an existing table: its own (but the format version),
    Iceberg's commit retry, and the identity."""
    return {
        **{k: v for k, v in table.target.properties.items() if k != FORMAT_VERSION},
        **table.maintenance.commit_retry.table_properties(),
        **identity_properties(table),
    }


def apply_table_settings(
    spark: SparkSession,
    name: str,
    table: TableConfig,
    state: iceberg.TableState,
    progress: Progress = no_progress,
) -> list[str]:
    """Bring an existing table in line with the config; returns what changed, one note each.
    `state`: the table as the batch read it (its properties and partition spec), not loaded again.

    Raises ConfigChangeError when the config's keys or mode differ from the table's.
    """
    current = state.properties
    recorded = identity_properties(table)
    refused = []
    if KEYS_PROPERTY in current and _normal_keys(current[KEYS_PROPERTY]) != _normal_keys(
        recorded[KEYS_PROPERTY]
    ):
        refused.append(f"keys {json.loads(current[KEYS_PROPERTY])} -> {list(table.keys)}")
    if MODE_PROPERTY in current and current[MODE_PROPERTY] != table.mode:
        refused.append(f"mode {current[MODE_PROPERTY]} -> {table.mode}")
    if refused:
        raise ConfigChangeError(
            f"table {table.id!r}: {' and '.join(refused)} cannot change in place; "
            f"build the table again from its raw files: {next_step.rebuild_command(table.id)}"
        )
    notes = []
    changed = iceberg.ensure_properties(spark, name, config_properties(table), current=current)
    quiet = recorded.keys() | table.maintenance.commit_retry.table_properties().keys()
    shown = {k: v for k, v in changed.items() if k not in quiet}
    if shown:
        notes.append("table properties set: " + ", ".join(f"{k}={v}" for k, v in sorted(shown.items())))
    notes += _evolve_partitioning(spark, name, table, state.partition_fields)
    existing = current.get(FORMAT_VERSION)
    if existing is not None and existing != str(table.target.format_version):
        notes.append(
            f"format version: the table is format {existing} and target.format_version says "
            f"{table.target.format_version}; lakeloader never changes an existing table's version "
            "(docs/format-versions.md says how to upgrade one yourself)"
        )
    for note in notes:
        progress(note)
    return notes


def _normal_keys(text: str) -> list[str]:
    return [str(k).lower() for k in json.loads(text)]


def _evolve_partitioning(
    spark: SparkSession, name: str, table: TableConfig, current: dict[tuple[str, str], str]
) -> list[str]:
    """Iceberg partition evolution: drop the fields the config left out, add the new ones. Files
    written before keep their layout; new writes use the new spec (a metadata-only change).
    `current`: the table's partition fields (TableState.partition_fields)."""
    wanted = {_transform(expr): expr for expr in table.target.partition_by}
    dropped = [field for spec, field in current.items() if spec not in wanted]
    added = [expr for spec, expr in wanted.items() if spec not in current]
    if not (dropped or added):
        return []
    for field in dropped:
        spark.sql(f"ALTER TABLE {name} DROP PARTITION FIELD {quote(field)}")
    columns = spark.table(name).columns
    for expr in added:
        spark.sql(f"ALTER TABLE {name} ADD PARTITION FIELD {partition_sql(expr, columns)}")
    return [f"partitioning evolved: dropped {dropped or 'nothing'}, added {added or 'nothing'}"]
