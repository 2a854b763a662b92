"""Config validation: one typed model, errors that name the file, the table and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from lakeloader.config import ConfigError, json_schema, load_config, parse_config, write_json_schema

ROOT = Path(__file__).resolve().parents[2]


def table(**overrides):
    spec = {
        "id": "crm.customers",
        "source": {"prefix": "crm/public/customers", "format": "parquet", "cdc": "dms"},
        "target": {"database": "crm", "table": "customers"},
        "keys": ["customer_id"],
    }
    spec.update(overrides)
    return spec


def error_of(data) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config(data, origin="tables.yaml")
    return str(err.value)


def test_shipped_config_is_valid_and_uses_every_flavour():
    config = load_config(ROOT / "config" / "tables.yaml")
    assert {t.source.cdc for t in config.tables} == {"dms", "debezium"}
    assert {t.source.format for t in config.tables} == {"parquet", "csv", "json"}
    assert load_config(ROOT / "examples" / "tables.yaml") == config


def test_defaults_and_derived_values():
    config = parse_config({"tables": [table()]})
    t = config.tables[0]
    assert t.source.prefix == "crm/public/customers/"
    assert (t.mode, t.schema_evolution, t.enabled, t.engine) == ("merge", "evolve", True, "glue")
    assert t.sequence_column == "last_update_time"
    assert config.raw_root == "examples/raw" and config.warehouse == ".lakeloader/warehouse"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"source": {"prefix": "x/", "format": "avro"}},
            "tables.yaml: table 'crm.customers' -> source.format: Input should be 'parquet', 'csv' or 'json'",
        ),
        (
            {"source": {"prefix": "x/", "cdc": "maxwell"}},
            "table 'crm.customers' -> source.cdc: Input should be "
            "'dms', 'debezium', 'debezium_envelope', 'none' or 'snapshot'",
        ),
        ({"keys": []}, "table 'crm.customers' -> (table): mode 'merge' needs keys"),
        (
            {"columns": {"exclude": ["Customer_ID", "notes"]}},
            "-> (table): columns.exclude must not name key, sequence or partition columns: ['customer_id']",
        ),
        ({"columns": {"exclude": ["last_update_time"]}}, "must not name key, sequence or partition"),
        ({"columns": {"include": ["a"], "exclude": ["b"]}}, "-> columns: give either include"),
        ({"delete_when": "  "}, "-> (table): delete_when: give a SQL predicate"),
        ({"mode": "append", "delete_when": "x = 1"}, "delete_when applies to mode merge or scd2"),
        ({"mode": "append", "on_truncate": "empty_table"}, "on_truncate: empty_table applies to mode merge"),
        ({"on_truncate": "drop"}, "-> on_truncate: Input should be 'fail', 'empty_table' or 'ignore'"),
        ({"mode": "scd2", "sequence_by": "none"}, "mode 'scd2' needs sequence_by (the column valid_from"),
        (
            {"mode": "upsert"},
            "table 'crm.customers' -> mode: Input should be 'merge', 'append', 'overwrite' or 'scd2'",
        ),
        ({"schema_evolution": "loose"}, "table 'crm.customers' -> schema_evolution: Input should be"),
        (
            {"target": {"database": "crm", "table": "bad name"}},
            "-> target.table: 'bad name' is not a valid name",
        ),
        (
            {"target": {"database": "crm", "table": "c", "partition_by": ["bucket(x, id)"]}},
            "-> target.partition_by: 'bucket(x, id)' is not a partition transform",
        ),
        (
            {"source": {"prefix": "x/", "format": "csv", "csv": {"header": False}}},
            "-> source.csv: header: false needs columns",
        ),
        (
            {"source": {"prefix": "x/", "format": "parquet", "csv": {"header": True}}},
            "-> source: csv options given but format is 'parquet'",
        ),
        ({"sources": {}}, "table 'crm.customers' -> sources: Extra inputs are not permitted"),
        ({"keys": ["id", "ID"]}, "-> keys: duplicate key columns"),
        ({"sequence_by": []}, "-> sequence_by: give a column name or a non-empty list of column names"),
        ({"sequence_by": ["ts", 7]}, "-> sequence_by: give a column name or a non-empty list"),
        ({"sequence_by": ["ts", "TS"]}, "-> sequence_by: duplicate columns in ['ts', 'TS']"),
        ({"sequence_by": {"col": "ts"}}, "-> sequence_by: give a column name"),
    ],
)
def test_errors_name_the_table_and_field(overrides, expected):
    assert expected in error_of({"tables": [table(**overrides)]})


DEBEZIUM_POSITION = [
    "__source_lsn",  # PostgreSQL
    "__source_file",  # MySQL binlog file, position, row
    "__source_pos",
    "__source_row",
    "__source_commit_lsn",  # SQL Server
    "__source_change_lsn",
    "__source_event_serial_no",
]


@pytest.mark.parametrize(
    ("cdc", "sequence_by", "expected"),
    [
        # a name (or the default) is followed by the flavour's tie-breakers, where files carry them
        ("dms", None, ["last_update_time", "AR_H_CHANGE_SEQ"]),
        ("dms", "changed_at", ["changed_at", "AR_H_CHANGE_SEQ"]),
        ("dms", "ar_h_change_seq", ["ar_h_change_seq"]),
        ("debezium", None, ["__source_ts_ms", *DEBEZIUM_POSITION]),
        ("debezium_envelope", None, ["__source_ts_ms", *DEBEZIUM_POSITION]),
        # sequence_by: none -- no column; the file and row order decide (and nothing is added)
        ("dms", "none", []),
        ("debezium", "None", []),
        ("none", None, []),
        ("none", "version", ["version"]),
        # a list is the whole order, as given
        ("dms", ["last_update_time"], ["last_update_time"]),
        ("debezium", ["__source_ts_ms", "__lsn"], ["__source_ts_ms", "__lsn"]),
        ("none", ["updated_at", "revision"], ["updated_at", "revision"]),
    ],
)
def test_sequence_columns_per_flavour(cdc, sequence_by, expected):
    spec = table(source={"prefix": "x/", "cdc": cdc}, sequence_by=sequence_by)
    t = parse_config({"tables": [spec]}).tables[0]
    assert t.sequence_columns == expected
    assert t.sequence_column == (expected[0] if expected else None)


def test_scd2_columns_must_not_reuse_a_sequence_column():
    spec = table(mode="scd2", sequence_by=["ts", "seq"], scd2={"valid_to": "seq"})
    message = error_of({"tables": [spec]})
    assert "table 'crm.customers' -> (table): scd2 column(s) ['seq'] clash with the keys" in message


def test_table_without_id_is_named_by_position():
    spec = table()
    del spec["id"]
    assert "tables.yaml: tables[0] -> id: Field required" in error_of({"tables": [spec]})


def test_every_problem_is_listed_at_once():
    message = error_of({"tables": [table(mode="x", schema_evolution="y")]})
    assert "-> mode:" in message and "-> schema_evolution:" in message


@pytest.mark.parametrize(
    ("second", "expected"),
    [
        (table(), "tables 'crm.customers' and 'crm.customers' share the same id"),
        (table(id="crm.other", source={"prefix": "y/"}), "share the same target 'crm.customers'"),
        (
            table(id="crm.other"),
            "share the same target 'crm.customers' and source.prefix (tables may share a prefix only when "
            "their targets differ)",
        ),
    ],
)
def test_duplicates_across_tables_are_rejected(second, expected):
    assert expected in error_of({"tables": [table(), second]})


def test_unreadable_files_give_one_clear_line(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("tables: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- just a list\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(bad)


@pytest.mark.parametrize("given", [" /crm/x", "crm/x/", "//crm/x"])
def test_source_prefix_is_normalised_like_the_lambda_routes_keys(given):
    config = parse_config({"tables": [table(source={"prefix": given})]})
    assert config.tables[0].source.prefix == "crm/x/"
    assert [t.id for t in config.match_key("/crm/x/LOAD1.parquet")] == ["crm.customers"]


@pytest.mark.parametrize("given", ["", "  ", "/"])
def test_an_empty_source_prefix_is_refused(given):
    expected = "table 'crm.customers' -> source.prefix: prefix must not be empty"
    assert expected in error_of({"tables": [table(source={"prefix": given})]})


def test_longest_prefix_wins_when_prefixes_nest():
    config = parse_config(
        {
            "tables": [
                table(id="all", source={"prefix": "crm/"}, target={"database": "crm", "table": "all_"}),
                table(id="customers"),
            ]
        }
    )
    assert [t.id for t in config.match_key("crm/public/customers/LOAD1.parquet")] == ["customers"]
    assert [t.id for t in config.match_key("crm/public/orders/LOAD1.parquet")] == ["all"]
    assert config.match_key("hr/x.parquet") == []


SCD2_HISTORY = {  # the README's SCD2 example: a history table over the shipped crm.customers' prefix
    "id": "crm.customers_history",
    "source": {"prefix": "crm/public/customers/", "format": "parquet", "cdc": "dms"},
    "target": {"database": "crm", "table": "customers_history"},
    "keys": ["customer_id"],
    "sequence_by": "last_update_time",
    "mode": "scd2",
}


def test_a_table_and_its_history_share_one_prefix():
    shipped = yaml.safe_load((ROOT / "config" / "tables.yaml").read_text())
    shipped["tables"].append(SCD2_HISTORY)
    config = parse_config(shipped)
    matched = config.match_key("crm/public/customers/LOAD00000001.parquet")
    assert [t.id for t in matched] == ["crm.customers", "crm.customers_history"]
    assert [t.mode for t in matched] == ["merge", "scd2"]


def test_unknown_table_selection_lists_the_known_ones():
    config = parse_config({"tables": [table()]})
    with pytest.raises(ConfigError, match="unknown table 'nope'; the config has: crm.customers"):
        config.select(["nope"])
    two = parse_config(
        {
            "tables": [
                table(),
                table(id="crm.b", source={"prefix": "b/"}, target={"database": "crm", "table": "b"}),
            ]
        }
    )
    with pytest.raises(ConfigError) as raised:
        two.table("nope")
    assert str(raised.value) == "unknown table 'nope'; the config has: crm.customers, crm.b"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([], "tables.yaml: (top level): Input should be a valid dictionary or instance of LakeConfig"),
        ({"tables": [], "raw_root": 5}, "tables.yaml: raw_root: Input should be a valid string"),
        (
            {"tables": ["crm.customers"]},
            "tables.yaml: tables[0] -> (table): Input should be a valid dictionary",
        ),
        ({"tables": [{"id": 7}]}, "tables.yaml: table 7 -> id: Input should be a valid string"),
    ],
)
def test_an_error_outside_a_named_table_says_where_it_is(data, expected):
    assert error_of(data).startswith(expected)


def test_a_config_file_error_names_the_file(tmp_path):
    path = tmp_path / "tables.yaml"
    path.write_text(yaml.safe_dump({"tables": [table(mode="upsert")]}))
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert str(raised.value).startswith(f"{path}: table 'crm.customers' -> mode: Input should be")


def test_published_json_schema_is_current_and_accepts_the_shipped_config():
    import jsonschema

    published = json.loads((ROOT / "config" / "tables.schema.json").read_text())
    assert published == json_schema(), "regenerate with: python -m lakeloader.config"
    jsonschema.validate(yaml.safe_load((ROOT / "config" / "tables.yaml").read_text()), published)


def test_the_schema_file_written_is_the_published_one_byte_for_byte(tmp_path):
    write_json_schema(tmp_path / "tables.schema.json")
    assert (tmp_path / "tables.schema.json").read_bytes() == (
        ROOT / "config" / "tables.schema.json"
    ).read_bytes()


def test_maintain_sets_icebergs_own_commit_retry_from_the_config():
    retry = parse_config(
        {"tables": [table(maintenance={"commit_retry": {"num_retries": 3, "max_wait_ms": 5}})]}
    )
    assert retry.tables[0].maintenance.commit_retry.table_properties() == {
        "commit.retry.num-retries": "3",
        "commit.retry.min-wait-ms": "100",
        "commit.retry.max-wait-ms": "5",
        "commit.retry.total-timeout-ms": "1800000",
    }


def test_tombstone_and_partial_update_defaults():
    dms, debezium = parse_config(
        {
            "tables": [
                table(partial_updates={"ignore_nulls": True}),
                table(
                    id="crm.events",
                    source={"prefix": "crm/events", "cdc": "debezium"},
                    target={"database": "crm", "table": "events"},
                    partial_updates={"columns": ["body"]},
                ),
            ]
        }
    ).tables
    assert (dms.tombstones.enabled, dms.tombstones.retain_days) == (True, 7)
    assert dms.unchanged_placeholder is None and dms.partial_updates.columns == "all"
    assert debezium.unchanged_placeholder == "__debezium_unavailable_value"
    assert parse_config({"tables": [table()]}).tables[0].partial_updates is None


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"tombstones": {"retain_days": 0}}, "-> tombstones.retain_days: Input should be greater than 0"),
        ({"tombstones": {"keep": 3}}, "-> tombstones.keep: Extra inputs are not permitted"),
        (
            {"partial_updates": {}},
            "-> (table): partial_updates: nothing marks a column as unchanged; give placeholder",
        ),
        (
            {"mode": "append", "partial_updates": {"ignore_nulls": True}},
            "-> (table): partial_updates applies to mode merge or scd2, not 'append'",
        ),
        (
            {"source": {"prefix": "x/", "cdc": "none"}, "partial_updates": {"ignore_nulls": True}},
            "-> (table): partial_updates needs a CDC source",
        ),
        (
            {"partial_updates": {"columns": ["Customer_ID", "body"], "ignore_nulls": True}},
            "partial_updates.columns must not name key, sequence or scd2 columns: ['Customer_ID']",
        ),
        (
            {"partial_updates": {"columns": ["last_update_time"], "placeholder": "?"}},
            "must not name key, sequence or scd2 columns: ['last_update_time']",
        ),
        ({"partial_updates": {"columns": []}}, "-> partial_updates.columns: columns must name"),
        ({"partial_updates": {"placeholder": ""}}, "-> partial_updates.placeholder: placeholder must"),
    ],
)
def test_tombstone_and_partial_update_errors_name_the_table_and_field(overrides, expected):
    message = error_of({"tables": [table(**overrides)]})
    assert "table 'crm.customers'" in message and expected in message


def test_an_unknown_key_close_to_a_known_one_gets_a_did_you_mean():
    data = {
        "warehose": "w",
        "tables": [table(sorce={}, target={"database": "crm", "table": "c", "partiton_by": []})],
    }
    data["tables"][0]["source"]["fromat"] = "csv"
    data["tables"][0]["maintenance"] = {"snapshot": {}, "zzz": 1}
    lines = error_of(data).splitlines()
    assert sorted(lines) == [
        "tables.yaml: table 'crm.customers' -> maintenance.snapshot: Extra inputs are not permitted; "
        "did you mean 'snapshots'?",
        "tables.yaml: table 'crm.customers' -> maintenance.zzz: Extra inputs are not permitted",
        "tables.yaml: table 'crm.customers' -> sorce: Extra inputs are not permitted; did you mean 'source'?",
        "tables.yaml: table 'crm.customers' -> source.fromat: Extra inputs are not permitted; "
        "did you mean 'format'?",
        "tables.yaml: table 'crm.customers' -> target.partiton_by: Extra inputs are not permitted; "
        "did you mean 'partition_by'?",
        "tables.yaml: warehose: Extra inputs are not permitted; did you mean 'warehouse'?",
    ]
