"""`sources:` (issue 67 item 1): one entry stands for every table under a raw prefix. The layout names a
key's table (lakeloader.control.discovery, the rule the Lambda shares), the defaults and the keys map make its
settings, a declared table keeps its own, and a table whose keys are unknown is held with the line to add.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from lakeloader.cli import main
from lakeloader.config import ConfigError, parse_config
from lakeloader.config.sources import discover
from lakeloader.control.discovery import find_table

DMS = {
    "id": "crm",
    "prefix": "crm/",
    "cdc": "dms",
    "keys": {"hr.*": ["id"], "hr.staff": ["staff_id"], "public.*": ["id"]},
    "defaults": {"sequence_by": "last_update_time"},
}


def config(**source_changes):
    return parse_config({"sources": [{**DMS, **source_changes}]})


def error_of(data) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    return str(caught.value)


def test_a_dms_key_names_its_table_folder_database_and_keys():
    found = find_table(DMS, "crm/hr/staff/2026/01/02/20260102-120000.parquet")
    assert (found.table_id, found.prefix, found.held) == ("hr.staff", "crm/hr/staff/", None)
    settings = found.settings
    assert settings["target"] == {"database": "hr", "table": "staff"}
    assert settings["source"] == {"prefix": "crm/hr/staff/", "format": "parquet", "cdc": "dms"}
    assert (settings["keys"], settings["sequence_by"]) == (["staff_id"], "last_update_time")
    # an exact id wins over an earlier glob; otherwise the first glob that matches
    assert find_table(DMS, "crm/hr/payroll/LOAD1.parquet").settings["keys"] == ["id"]
    # not deep enough for the layout, or the folder itself: no table
    assert find_table(DMS, "crm/hr/LOAD1.parquet") is None
    assert find_table(DMS, "crm/hr/staff/") is None
    assert find_table(DMS, "sales/hr/staff/x.parquet") is None


def test_a_debezium_topic_layout_and_names_made_catalog_safe():
    debezium = {"id": "shop", "prefix": "shop/", "cdc": "debezium", "layout": "*.<schema>.<table>/"}
    found = find_table(debezium, "shop/dbserver1.Inventory.Order-Lines/partition=0/x+0+0000000001.json")
    assert (found.table_id, found.prefix) == (
        "Inventory.Order-Lines",
        "shop/dbserver1.Inventory.Order-Lines/",
    )
    assert found.settings["target"] == {"database": "inventory", "table": "order_lines"}


def test_a_table_without_keys_is_held_with_the_one_line_to_add():
    found = find_table(DMS, "crm/sales/orders/LOAD1.parquet")
    assert "keys" not in found.settings and found.needs_keys
    assert found.hint == (
        "sales.orders: held (mode merge needs key columns and no entry of the source's keys matches; "
        "cdc: dms files do not carry them); its files stay pending: add under sources 'crm' -> keys: "
        '"sales.orders": [<key column>, ...]'
    )
    # append needs no keys: nothing held
    appended = find_table({**DMS, "defaults": {"mode": "append"}}, "crm/sales/orders/LOAD1.parquet")
    assert appended.held is None


def test_include_exclude_and_defaults_with_placeholders():
    source = {
        **DMS,
        "include": ["hr.*", "HR.*"],
        "exclude": ["hr.secret*"],
        "defaults": {
            "target": {"database": "raw_<schema>", "partition_by": ["days(updated)"]},
            "mode": "append",
        },
    }
    assert find_table(source, "crm/sales/orders/x.parquet") is None
    assert find_table(source, "crm/hr/secrets/x.parquet") is None
    found = find_table(source, "crm/HR/staff/x.parquet")
    assert found.table_id == "HR.staff"
    assert found.settings["target"] == {
        "database": "raw_hr",
        "table": "staff",
        "partition_by": ["days(updated)"],
    }


def test_discover_finds_holds_and_leaves_declared_tables_their_files():
    cfg = parse_config(
        {
            "sources": [DMS],
            "tables": [
                {  # pinned: the source's defaults do not apply to it
                    "id": "hr.staff",
                    "source": {"prefix": "crm/hr/staff/", "cdc": "dms"},
                    "target": {"database": "people", "table": "staff"},
                    "keys": ["staff_id"],
                    "sequence_by": "last_update_time",
                    "mode": "scd2",
                },
                {  # a declared folder under the source keeps its files
                    "id": "legacy",
                    "source": {"prefix": "crm/public/legacy/"},
                    "target": {"database": "old", "table": "legacy"},
                    "mode": "append",
                },
            ],
        }
    )
    keys = [
        "crm/hr/staff/LOAD1.parquet",
        "crm/hr/payroll/LOAD1.parquet",
        "crm/hr/payroll/2026/x.parquet",
        "crm/public/legacy/LOAD1.parquet",
        "crm/sales/orders/LOAD1.parquet",
    ]
    found = discover(cfg.sources, cfg.tables, keys)
    assert [t.id for t in found.found] == ["hr.payroll"]
    assert found.files == {"hr.payroll": 2, "sales.orders": 1}
    assert [h.table_id for h in found.held] == ["sales.orders"]
    merged, _ = cfg.with_found_tables(keys)
    assert [t.id for t in merged.tables] == ["hr.staff", "legacy", "hr.payroll"]
    assert merged.table("hr.staff").target.database == "people"
    assert [t.id for t in merged.match_key("crm/hr/payroll/2026/x.parquet")] == ["hr.payroll"]


def test_a_found_table_whose_settings_do_not_validate_is_held_with_the_reason():
    cfg = config()
    found = discover(cfg.sources, cfg.tables, ["crm/hr/my staff/x.parquet", "crm/hr/staff/x.parquet"])
    assert [t.id for t in found.found] == ["hr.staff"]
    [held] = found.held
    assert held.hint == (
        "hr.my staff: held ('hr.my staff' is not a table id: use letters, digits, '.', '_' and '-'); its "
        "files stay pending: fix sources 'crm' -> defaults, or pin it with a tables: entry of id "
        "'hr.my staff'"
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"layout": "<schema>/"}, "source 'crm' -> layout: layout needs <table>"),
        ({"layout": "<db>/<table>/"}, "layout knows <schema>, <table> and *, not <db>"),
        ({"defaults": {"mode": "upsert"}}, "source 'crm' -> (table): defaults.mode: Input should be"),
        ({"defaults": {"id": "x"}}, "defaults: id come from the source entry and the layout"),
        ({"defaults": {"source": {"cdc": "none"}}}, "defaults: source.cdc come from the source entry"),
        ({"keys": {"hr.staff": []}}, "give at least one key column for hr.staff"),
        ({"prefix": " / "}, "source 'crm' -> prefix: prefix must not be empty"),
        ({"cdc": "oracle"}, "source 'crm' -> cdc: Input should be"),
    ],
)
def test_a_bad_source_entry_is_one_line_naming_the_source_and_field(change, expected):
    message = error_of({"sources": [{**DMS, **change}]})
    assert expected in message
    assert len(message.splitlines()) == 1


def test_two_sources_with_one_id_and_a_config_with_neither_are_refused():
    assert "two sources have the id 'crm'" in error_of({"sources": [DMS, DMS]})
    assert "give tables: [...] or sources: [...]" in error_of({"raw_root": "x"})


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_tables_and_discover_list_found_and_held_tables_without_spark(tmp_path):
    raw = tmp_path / "raw"
    for path in (
        "crm/hr/staff/LOAD1.parquet",
        "crm/hr/staff/2026/a.parquet",
        "crm/sales/orders/LOAD1.parquet",
    ):
        (raw / path).parent.mkdir(parents=True, exist_ok=True)
        (raw / path).write_bytes(b"PAR1")
    path = tmp_path / "tables.yaml"
    path.write_text(
        f"raw_root: {raw}\nsources:\n  - id: crm\n    prefix: crm/\n    cdc: dms\n"
        "    defaults: {sequence_by: last_update_time}\n    keys: {hr.staff: [staff_id]}\n"
    )
    code, out, _ = cli("tables", "--config", str(path))
    assert code == 0
    assert "- hr.staff (found): crm/hr/staff/ (parquet, cdc dms) -> hr.staff keys=['staff_id']" in out
    assert "! sales.orders: held (" in out and '"sales.orders": [<key column>, ...]' in out

    code, out, _ = cli("discover", "--config", str(path), "--source", "crm")
    assert code == 0
    assert "- hr.staff: crm/hr/staff/ 2 file(s) -> hr.staff keys=['staff_id'] mode=merge" in out
    assert out.rstrip().endswith("1 table(s) to load, 1 held")

    code, _, err = cli("discover", "--config", str(path), "--source", "nope")
    assert code == 2 and "unknown source 'nope'; the config's sources: crm" in err
