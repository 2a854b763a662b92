"""`mode: scd2` config validation: defaults, and messages that name the table and the problem."""

from __future__ import annotations

import pytest

from lakeloader.config import ConfigError, parse_config


def config(**overrides):
    spec = {
        "id": "crm.customers_history",
        "source": {"prefix": "crm/public/customers", "format": "parquet", "cdc": "dms"},
        "target": {"database": "crm", "table": "customers_history"},
        "keys": ["customer_id"],
        "mode": "scd2",
    }
    spec.update(overrides)
    return {"tables": [spec]}


def error_of(data) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config(data, origin="tables.yaml")
    return str(err.value)


def test_defaults():
    table = parse_config(config()).tables[0]
    assert table.scd2 is None
    options = table.scd2_options
    assert options.columns == ["valid_from", "valid_to", "is_current", "version_key", "row_hash"]
    assert options.track is None and options.ignore == []


def test_custom_names_and_tracked_columns():
    table = parse_config(
        config(scd2={"valid_from": "eff_from", "valid_to": "eff_to", "track": ["email"]})
    ).tables[0]
    assert table.scd2_options.columns[:2] == ["eff_from", "eff_to"]
    assert table.scd2_options.track == ["email"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"keys": []}, "-> (table): mode 'scd2' needs keys"),
        (
            {"source": {"prefix": "x/", "cdc": "none"}},
            "-> (table): mode 'scd2' needs sequence_by (the column valid_from is taken from), not none",
        ),
        ({"mode": "merge", "scd2": {}}, "scd2 options given but mode is 'merge'"),
        ({"scd2": {"valid_to": "valid_from"}}, "must differ"),
        ({"scd2": {"is_current": "customer_id"}}, "clash with the keys or the sequence column"),
        ({"scd2": {"hash": "last_update_time"}}, "clash with the keys or the sequence column"),
        ({"scd2": {"track": ["a"], "ignore": ["b"]}}, "either track"),
        ({"scd2": {"track": []}}, "track must name at least one column"),
        ({"scd2": {"ignore": ["customer_id"]}}, "scd2.ignore must not name key or scd2 columns"),
        # managed and key columns are recognised whatever their case
        (
            {"scd2": {"track": ["email", "Valid_From"]}},
            "-> (table): scd2.track must not name key or scd2 columns: ['Valid_From']",
        ),
        (
            {"scd2": {"valid_from": "Eff_From", "track": ["eff_from"]}},
            "-> (table): scd2.track must not name key or scd2 columns: ['eff_from']",
        ),
        (
            {"scd2": {"ignore": ["CUSTOMER_ID"]}},
            "-> (table): scd2.ignore must not name key or scd2 columns: ['CUSTOMER_ID']",
        ),
        (
            {"scd2": {"valid_from": "valid from"}},
            "-> scd2.valid_from: 'valid from' is not a valid column name",
        ),
        ({"scd2": {"valid_until": "x"}}, "-> scd2.valid_until: Extra inputs are not permitted"),
    ],
)
def test_errors_name_the_table_and_problem(overrides, message):
    text = error_of(config(**overrides))
    assert text.startswith("tables.yaml: table 'crm.customers_history'")
    assert message in text
