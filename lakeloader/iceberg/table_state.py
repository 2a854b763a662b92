"""What a batch needs to know of its table, read from the table's metadata JSON as plain data.

No PySpark: lakeloader.iceberg reads the metadata (one catalog round trip) and hands it here, so the
walk of `main`'s ancestry is unit- and mutation-tested without a JVM.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# What lakeloader records in the summary of every snapshot that commits a batch.
SUMMARY_FILE_IDS = "lakeloader.input-ids"  # the input files the commit consumed
SUMMARY_FILE_NAMES = "lakeloader.input-files"
SUMMARY_RUN_ID = "lakeloader.run-id"
SUMMARY_TABLE_ID = "lakeloader.table-id"
# cdc: snapshot: the snapshot folder a commit applied, and its order key (formats.full_copy.order_key),
# also kept as a table property when a snapshot changed nothing (no commit to record it in).
SUMMARY_SNAPSHOT = "lakeloader.snapshot"
SNAPSHOT_SEQUENCE = "lakeloader.snapshot-sequence"
# `lakeloader reconcile --repair`: what the repair commit applied (JSON: the snapshot's URI, the missing,
# extra and different keys found, what was inserted, updated and deleted, the sequence its changes carry).
SUMMARY_REPAIR = "lakeloader.repair"


@dataclass(frozen=True)
class TableState:
    """`committed_file_ids`: the input files recorded by the snapshots `main` descends from. Only main's
    ancestry counts: an audit branch that a killed run never published consumed nothing.

    `properties` and `partition_fields` come from the same read, so a batch checks the table's
    settings against its config without loading the table again (lakeloader.engine.table_settings).
    """

    snapshot_id: int | None = None
    records: int = 0  # the rows the table's data files hold (snapshot summary's total-records)
    committed_file_ids: frozenset[str] = frozenset()
    properties: dict[str, str] = field(default_factory=dict)
    # the current partition spec: (transform, lower-case source column) -> field name; "void"
    # fields (dropped from a v1 table's spec) left out
    partition_fields: dict[tuple[str, str], str] = field(default_factory=dict)
    # cdc: snapshot: the order key of the newest snapshot applied (by a commit or, changing nothing, the
    # table property); an older or equal one changes nothing
    snapshot_sequence: str | None = None

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any]) -> TableState:
        """From Iceberg's table metadata JSON, as iceberg.read_state reads it."""
        properties = dict(metadata.get("properties") or {})
        if "format-version" in metadata:  # a property to Spark (SHOW TBLPROPERTIES), and to a config
            properties["format-version"] = str(metadata["format-version"])
        settings = {"properties": properties, "partition_fields": _partition_fields(metadata)}
        snapshots = {s["snapshot-id"]: s for s in metadata.get("snapshots", [])}
        current = snapshots.get(metadata.get("current-snapshot-id"))
        ids: set[str] = set()
        sequences = [properties[SNAPSHOT_SEQUENCE]] if SNAPSHOT_SEQUENCE in properties else []
        snapshot = current
        while snapshot is not None:
            summary = snapshot.get("summary", {})
            recorded = summary.get(SUMMARY_FILE_IDS)
            ids.update(recorded.split(",") if recorded else ())
            sequences += [summary[SNAPSHOT_SEQUENCE]] if SNAPSHOT_SEQUENCE in summary else []
            snapshot = snapshots.get(snapshot.get("parent-snapshot-id"))
        settings["snapshot_sequence"] = max(sequences, default=None)
        if current is None:
            return cls(**settings)
        records = int(current.get("summary", {}).get("total-records") or 0)
        return cls(current["snapshot-id"], records, frozenset(ids), **settings)


def _partition_fields(metadata: dict[str, Any]) -> dict[tuple[str, str], str]:
    """The default spec's fields, their source columns named as Schema.findColumnName does (dotted
    through structs, the only nesting a partition source may have)."""
    specs = {s.get("spec-id"): s.get("fields", []) for s in metadata.get("partition-specs", [])}
    fields = specs.get(metadata.get("default-spec-id"), metadata.get("partition-spec", []))
    schemas = {s.get("schema-id"): s for s in metadata.get("schemas", [])}
    schema = schemas.get(metadata.get("current-schema-id"), metadata.get("schema", {}))
    names = dict(_column_names(schema.get("fields", []), ""))
    return {
        (f["transform"], names[f["source-id"]].lower()): f["name"] for f in fields if f["transform"] != "void"
    }


def _column_names(fields: list[dict[str, Any]], prefix: str) -> Iterator[tuple[int, str]]:
    for f in fields:
        name = prefix + f["name"]
        yield f["id"], name
        kind = f.get("type")
        if isinstance(kind, dict) and kind.get("type") == "struct":
            yield from _column_names(kind.get("fields", []), name + ".")
