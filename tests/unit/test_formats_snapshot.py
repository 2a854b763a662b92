"""`cdc: snapshot` without a JVM: which folder a file belongs to, which folders are complete, the
order key of a snapshot, the table's last applied snapshot, and the config's checks."""

from __future__ import annotations

import json
from datetime import date, datetime

import pytest

from lakeloader.config import LakeConfig, TableConfig
from lakeloader.config.items import config_items
from lakeloader.formats.full_copy import (
    describe_waiting,
    folder_time,
    list_table,
    order_key,
    plan,
    snapshot_folder,
)
from lakeloader.iceberg.table_state import SNAPSHOT_SEQUENCE, TableState
from lakeloader.spark.errors import BadInputError
from lakeloader.spark.inputs import InputFile, list_inputs


def table(**source) -> TableConfig:
    return TableConfig.model_validate(
        {
            "id": "crm.people",
            "source": {"prefix": "crm/people/", "cdc": "snapshot", **source},
            "target": {"database": "crm", "table": "people"},
            "keys": ["id"],
        }
    )


def file(name: str) -> InputFile:
    return InputFile(name, f"/raw/{name}", 10, "1")


def test_a_file_belongs_to_the_first_folder_under_the_prefix():
    people = table()
    assert snapshot_folder(people, "crm/people/2026-11-27/part-0.parquet") == "2026-11-27"
    assert snapshot_folder(people, "crm/people/dt=2026-11-27/x/part-0.parquet") == "dt=2026-11-27"
    with pytest.raises(BadInputError, match="crm/people/part-0.parquet.*sit in a folder"):
        snapshot_folder(people, "crm/people/part-0.parquet")


def test_a_folder_waits_for_its_success_file_and_applies_every_part_listed():
    people = table()
    batch = [file("crm/people/2026-11-26/part-0.parquet"), file("crm/people/2026-11-27/part-0.parquet")]
    listing = [
        *batch,
        file("crm/people/2026-11-26/part-1.parquet"),  # not in the batch (a bounded claim): applied too
        file("crm/people/2026-11-26/_SUCCESS"),
    ]
    result = plan(people, batch, listing)
    assert [(f, [x.name for x in files]) for f, files in result.ready] == [
        ("2026-11-26", ["crm/people/2026-11-26/part-0.parquet", "crm/people/2026-11-26/part-1.parquet"])
    ]
    assert [f.name for f in result.waiting] == ["crm/people/2026-11-27/part-0.parquet"]


def test_a_success_file_in_the_batch_completes_its_folder_and_is_consumed_with_it():
    marker = file("crm/people/2026-11-27/_SUCCESS")
    part = file("crm/people/2026-11-27/part-0.parquet")
    result = plan(table(), [marker, part], [])
    assert result.ready == [("2026-11-27", [part])] and result.markers == [marker] and not result.waiting


def test_ready_snapshots_come_oldest_first():
    files = [
        file(f"crm/people/{d}/{n}") for d in ("2026-11-28", "2026-11-26") for n in ("p.parquet", "_SUCCESS")
    ]
    assert [f for f, _ in plan(table(), files, []).ready] == ["2026-11-26", "2026-11-28"]


def test_next_snapshot_completes_every_folder_but_the_newest():
    files = [file(f"crm/people/{d}/p.parquet") for d in ("2026-11-25", "2026-11-26")]
    later = [file("crm/people/2026-11-27/p.parquet")]
    result = plan(table(complete_when="next_snapshot"), files, later)
    assert [f for f, _ in result.ready] == ["2026-11-25", "2026-11-26"] and not result.waiting
    assert [f.name for f in plan(table(complete_when="next_snapshot"), files, []).waiting] == [
        "crm/people/2026-11-26/p.parquet"
    ]


def test_folder_names_that_read_as_times_become_timestamps():
    assert folder_time("2026-11-27") == "2026-11-27T00:00:00"
    assert folder_time("dt=20261127") == "2026-11-27T00:00:00"
    assert folder_time("2026-11-27T06:30:00") == "2026-11-27T06:30:00"
    assert folder_time("export-7") is None


def test_order_keys_sort_as_the_values_do():
    assert order_key(-5) < order_key(3) < order_key(10)
    assert order_key(datetime(2026, 11, 27, 6)) > order_key(date(2026, 11, 27))
    assert order_key("2026-11-27") == "2026-11-27"
    with pytest.raises(ValueError):
        order_key(None)


def test_the_last_applied_snapshot_is_the_newest_recorded_by_a_commit_or_the_property():
    def snap(i: int, parent: int | None, summary: dict) -> dict:
        return {"snapshot-id": i, "parent-snapshot-id": parent, "summary": summary}

    metadata = {
        "current-snapshot-id": 2,
        "snapshots": [snap(1, None, {SNAPSHOT_SEQUENCE: "2026-11-26"}), snap(2, 1, {})],
        "properties": {},
    }
    assert TableState.from_metadata(metadata).snapshot_sequence == "2026-11-26"
    metadata["properties"] = {SNAPSHOT_SEQUENCE: "2026-11-27"}  # a later snapshot that changed nothing
    assert TableState.from_metadata(metadata).snapshot_sequence == "2026-11-27"
    orphan = snap(3, None, {SNAPSHOT_SEQUENCE: "2026-11-30"})  # an audit branch never published
    metadata["snapshots"].append(orphan)
    assert TableState.from_metadata(metadata).snapshot_sequence == "2026-11-27"


def test_listing_with_markers_finds_the_success_files(tmp_path):
    (tmp_path / "crm/people/2026-11-27").mkdir(parents=True)
    (tmp_path / "crm/people/2026-11-27/part-0.parquet").write_text("x")
    (tmp_path / "crm/people/2026-11-27/_SUCCESS").write_text("")
    (tmp_path / "crm/people/2026-11-27/_temporary").write_text("")
    names = [f.name for f in list_inputs(str(tmp_path), "crm/people/", markers=True)]
    assert names == ["crm/people/2026-11-27/_SUCCESS", "crm/people/2026-11-27/part-0.parquet"]
    assert [f.name for f in list_inputs(str(tmp_path), "crm/people/")] == [
        "crm/people/2026-11-27/part-0.parquet"
    ]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"mode": "append"}, "cdc: snapshot applies to mode merge or scd2"),
        ({"sequence_by": "updated_at"}, "sequence_by does not apply to cdc: snapshot"),
        ({"delete_when": "gone = true"}, "delete_when does not apply to cdc: snapshot"),
        ({"source": {"compare_columns": ["ID"]}}, "must not name key columns"),
        ({"source": {"cdc": "dms", "deletes": "ignore"}}, "deletes apply to cdc: snapshot only"),
    ],
)
def test_the_config_refuses_what_a_snapshot_table_cannot_do(overrides, message):
    spec = {
        "id": "crm.people",
        "target": {"database": "crm", "table": "people"},
        "keys": ["id"],
        **overrides,  # the parameter is shared by every run of the test: read, never popped
        "source": {"prefix": "crm/people/", "cdc": "snapshot", **overrides.get("source", {})},
    }
    with pytest.raises(ValueError, match=message):
        TableConfig.model_validate(spec)


def test_a_snapshot_table_is_ordered_by_its_folder_or_snapshot_by():
    assert table().sequence_columns == ["lakeloader_snapshot"]
    assert table(snapshot_by="exported_at").sequence_columns == ["exported_at"]


def test_every_table_reads_back_from_its_config_table_item():
    """The jobs read each table back from the item cdk synth wrote, with every field set: a snapshot
    option at its default must not count as given on a table of another format."""
    tables = [
        table(deletes="ignore").model_dump(by_alias=True),
        {**table().model_dump(by_alias=True), "id": "crm.x"},
    ]
    tables[1] |= {"source": {"prefix": "crm/x/", "cdc": "dms"}, "target": {"database": "crm", "table": "x"}}
    lake = LakeConfig.model_validate({"raw_root": "raw", "warehouse": "wh", "tables": tables})
    for item, original in zip(config_items(lake), lake.tables, strict=True):
        assert TableConfig.model_validate(json.loads(item["config"])) == original


def test_a_file_outside_the_prefix_or_not_in_a_folder_is_named_with_its_table():
    with pytest.raises(BadInputError, match=r"table 'crm.people', file 'crm/other/2026-11-27/p.parquet'"):
        snapshot_folder(table(), "crm/other/2026-11-27/p.parquet")
    with pytest.raises(BadInputError, match="sit in a folder"):
        snapshot_folder(table(), "crm/people//p.parquet")  # an empty folder name is no folder


def test_the_listing_is_read_only_for_folders_of_this_table():
    """Another prefix's files and a stray file directly under the prefix in the listing are not this
    table's snapshots; a folder only the listing holds still tells completeness."""
    batch = [file("crm/people/2026-11-26/p.parquet")]
    listing = [
        file("crm/people_old/2026-11-30/p.parquet"),
        file("crm/people/README"),
        file("crm/people/2026-11-25/_SUCCESS"),
        file("crm/people/2026-11-26/_SUCCESS"),
    ]
    result = plan(table(), batch, listing)
    assert [f for f, _ in result.ready] == ["2026-11-26"] and not result.waiting


def test_every_waiting_folder_and_marker_is_kept_and_a_newer_complete_snapshot_still_applies():
    """An older folder still incomplete does not hold back a newer complete one (once the newer is
    applied, the older is stale when it completes); every waiting file and every marker is listed."""
    batch = [
        file("crm/people/2026-11-24/p.parquet"),  # incomplete
        file("crm/people/2026-11-25/p.parquet"),
        file("crm/people/2026-11-25/_SUCCESS"),
        file("crm/people/2026-11-26/p.parquet"),  # incomplete
        file("crm/people/2026-11-27/p.parquet"),
        file("crm/people/2026-11-27/_SUCCESS"),
    ]
    result = plan(table(), batch, [])
    assert [f for f, _ in result.ready] == ["2026-11-25", "2026-11-27"]
    assert [f.name for f in result.waiting] == [
        "crm/people/2026-11-24/p.parquet",
        "crm/people/2026-11-26/p.parquet",
    ]
    assert [f.name for f in result.markers] == [
        "crm/people/2026-11-25/_SUCCESS",
        "crm/people/2026-11-27/_SUCCESS",
    ]


def test_what_waits_is_said_with_its_folders_and_what_it_waits_for():
    waiting = [file("crm/people/2026-11-27/a.parquet"), file("crm/people/2026-11-26/b.parquet")]
    assert describe_waiting(table(), waiting) == (
        "snapshot(s) 2026-11-26, 2026-11-27 incomplete: 2 file(s) wait for _SUCCESS"
    )
    later = describe_waiting(table(complete_when="next_snapshot"), waiting[:1])
    assert later == "snapshot(s) 2026-11-27 incomplete: 1 file(s) wait for a later snapshot folder"


def test_the_table_is_listed_from_the_root_its_files_sit_under(tmp_path):
    (tmp_path / "crm/people/2026-11-27").mkdir(parents=True)
    (tmp_path / "crm/people/2026-11-27/p.parquet").write_text("x")
    (tmp_path / "crm/people/2026-11-27/_SUCCESS").write_text("")
    (tmp_path / "crm/other").mkdir(parents=True)
    (tmp_path / "crm/other/o.parquet").write_text("x")
    given = InputFile(
        "crm/people/2026-11-27/p.parquet", str(tmp_path / "crm/people/2026-11-27/p.parquet"), 1, "1"
    )
    names = [f.name for f in list_table(table(), [given])]
    assert names == ["crm/people/2026-11-27/_SUCCESS", "crm/people/2026-11-27/p.parquet"]
    assert list_table(table(), [InputFile("elsewhere.parquet", "/x/y.parquet", 1, "1")]) == []
    (tmp_path / "b/crm/people/2026-11-28").mkdir(parents=True)  # a second raw root: both are listed
    (tmp_path / "b/crm/people/2026-11-28/q.parquet").write_text("x")
    other = InputFile(
        "crm/people/2026-11-28/q.parquet", str(tmp_path / "b/crm/people/2026-11-28/q.parquet"), 1, "1"
    )
    assert len(list_table(table(), [given, other])) == 3


def test_order_keys_of_large_negative_numbers_and_bad_values():
    assert order_key(-(10**18)) < order_key(-(10**17)) < order_key(-5) < order_key(0) < order_key(10**18)
    with pytest.raises(ValueError, match="must be a time, a number or a name, not True"):
        order_key(True)
    assert folder_time("at=x=2026-11-27") is None  # only the first '=' separates a name
