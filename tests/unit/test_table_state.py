"""TableState from Iceberg's table metadata JSON: the consumed files of every snapshot on main's
ancestry (not only the current one's, not a branch's), the current snapshot and its row count."""

from __future__ import annotations

from lakeloader.iceberg.table_state import SUMMARY_FILE_IDS, TableState


def snapshot(sid: int, parent: int | None, ids: str | None = None, records: int | None = None) -> dict:
    summary = {"operation": "overwrite"}
    if ids is not None:
        summary[SUMMARY_FILE_IDS] = ids
    if records is not None:
        summary["total-records"] = str(records)
    return {"snapshot-id": sid, "parent-snapshot-id": parent, "summary": summary}


def test_a_new_table_has_no_state():
    assert TableState.from_metadata({"format-version": 2}) == TableState(properties={"format-version": "2"})
    assert TableState.from_metadata({"snapshots": [], "current-snapshot-id": -1}) == TableState()


def test_every_snapshot_on_mains_ancestry_counts_and_nothing_else():
    metadata = {
        "current-snapshot-id": 4,
        "snapshots": [
            snapshot(1, None, "a", 1),
            snapshot(2, 1, "b,c", 3),
            snapshot(3, 2, "on-an-audit-branch-never-published", 9),  # not main's ancestor
            snapshot(4, 2, None, 5),  # maintenance: records no input files
        ],
    }
    state = TableState.from_metadata(metadata)
    assert state == TableState(snapshot_id=4, records=5, committed_file_ids=frozenset({"a", "b", "c"}))


def test_an_expired_parent_ends_the_walk():
    metadata = {"current-snapshot-id": 7, "snapshots": [snapshot(7, 6, "z")]}  # 6 expired
    assert TableState.from_metadata(metadata) == TableState(7, 0, frozenset({"z"}))


def test_a_snapshot_without_a_summary_records_nothing():
    """Format v1 makes the summary optional."""
    metadata = {
        "current-snapshot-id": 2,
        "snapshots": [{"snapshot-id": 1, "parent-snapshot-id": None}, snapshot(2, 1, "b", 4)],
    }
    assert TableState.from_metadata(metadata) == TableState(2, 4, frozenset({"b"}))
    metadata["snapshots"][1] = {"snapshot-id": 2, "parent-snapshot-id": 1}
    assert TableState.from_metadata(metadata) == TableState(2, 0, frozenset())


def test_the_properties_and_the_current_partition_spec_come_from_the_same_read():
    """The spec that is the default, its source columns named through structs; a v1 table's dropped
    field (void) is no field; an empty table has settings too."""
    metadata = {
        "format-version": 2,
        "current-snapshot-id": -1,
        "properties": {"lakeloader.mode": "merge"},
        "current-schema-id": 1,
        "schemas": [
            {"schema-id": 0, "fields": [{"id": 1, "name": "old", "type": "long"}]},
            {
                "schema-id": 1,
                "fields": [
                    {"id": 1, "name": "ID", "type": "long"},
                    {"id": 2, "name": "at", "type": {"type": "struct", "fields": [{"id": 3, "name": "Ts"}]}},
                    {"id": 4, "name": "region", "type": "string"},
                ],
            },
        ],
        "default-spec-id": 1,
        "partition-specs": [
            {"spec-id": 0, "fields": [{"name": "region", "transform": "identity", "source-id": 4}]},
            {
                "spec-id": 1,
                "fields": [
                    {"name": "id_bucket", "transform": "bucket[4]", "source-id": 1},
                    {"name": "at_ts_day", "transform": "day", "source-id": 3},
                    {"name": "region", "transform": "void", "source-id": 4},
                ],
            },
        ],
    }
    state = TableState.from_metadata(metadata)
    assert state.snapshot_id is None
    assert state.properties == {"lakeloader.mode": "merge", "format-version": "2"}  # as Spark shows it
    assert state.partition_fields == {("bucket[4]", "id"): "id_bucket", ("day", "at.ts"): "at_ts_day"}


def test_a_format_v1_table_without_spec_and_schema_lists_has_its_one_spec():
    metadata = {
        "schema": {"fields": [{"id": 1, "name": "id", "type": "long"}]},
        "partition-spec": [{"name": "id", "transform": "identity", "source-id": 1}],
    }
    assert TableState.from_metadata(metadata).partition_fields == {("identity", "id"): "id"}
