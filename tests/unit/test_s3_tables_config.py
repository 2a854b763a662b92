"""target.storage: s3_tables -- validated once, with messages naming the table and the field (issue 42).

S3 Tables' naming rules and its compaction's target sizes are AWS's: "Naming rules for S3 tables and
namespaces" and PutTableMaintenanceConfiguration (icebergCompaction.targetFileSizeMB, 64-512) in the
Amazon S3 User Guide / API reference.
"""

from __future__ import annotations

import json

import pytest

from infra.settings import BatchingSettings, SettingsError
from infra.settings_lake import with_stage_defaults
from lakeloader.config import ConfigError, TableConfig, parse_config


def table(**target):
    return {
        "id": "crm.customers",
        "source": {"prefix": "crm/public/customers", "format": "parquet", "cdc": "dms"},
        "target": {"database": "crm", "table": "customers", **target},
        "keys": ["customer_id"],
    }


def error_of(spec) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config({"tables": [spec]}, origin="tables.yaml")
    return str(err.value)


def test_storage_defaults_to_glue_and_takes_s3_tables():
    assert parse_config({"tables": [table()]}).tables[0].target.storage == "glue"
    chosen = parse_config({"tables": [table(storage="s3_tables")]}).tables[0]
    assert chosen.target.storage == "s3_tables"
    # the jobs read each table back from its config-table item (every field set)
    dumped = json.dumps(chosen.model_dump(mode="json", by_alias=True))  # as lakeloader.config.items
    assert TableConfig.model_validate(json.loads(dumped)) == chosen


def test_unknown_storage_is_refused_naming_the_field():
    message = error_of(table(storage="s3tables"))
    assert "table 'crm.customers' -> target.storage" in message


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"table": "Customers"}, "target.table: 'Customers'"),
        ({"table": "customers_"}, "target.table: 'customers_'"),
        ({"database": "_crm"}, "target.database: '_crm'"),
        ({"database": "aws_crm"}, "target.database: 'aws_crm': S3 Tables reserves"),
        ({"properties": {"location": "s3://x/y"}}, "target.properties"),
    ],
)
def test_s3_tables_names_follow_s3_tables_rules(target, field):
    message = error_of(table(storage="s3_tables", **target))
    assert "tables.yaml: table 'crm.customers'" in message
    assert f"target.storage s3_tables: {field}" in message
    # the same names are fine in the Glue catalog
    parse_config({"tables": [table(**target)]})


@pytest.mark.parametrize(
    ("compaction", "field"),
    [
        ({"target_file_size_mb": 1024}, "target_file_size_mb: S3 Tables compacts to 64-512 MB, not 1024"),
        ({"target_file_size_mb": 32}, "target_file_size_mb: S3 Tables compacts to 64-512 MB, not 32"),
        ({"where": "day > 1"}, "where: S3 Tables' own compaction takes no where"),
        ({"sort_order": "id"}, "sort_order: S3 Tables' own compaction takes no sort_order"),
    ],
)
def test_s3_tables_compaction_is_what_s3_tables_offers(compaction, field):
    spec = {**table(storage="s3_tables"), "maintenance": {"compaction": compaction}}
    message = error_of(spec)
    assert f"maintenance.compaction.{field}" in message
    parse_config({"tables": [{**table(), "maintenance": {"compaction": compaction}}]})


def test_s3_tables_compaction_bounds_are_inclusive():
    for size in (64, 512):
        spec = {**table(storage="s3_tables"), "maintenance": {"compaction": {"target_file_size_mb": size}}}
        parse_config({"tables": [spec]})


def test_the_stage_default_applies_to_tables_that_do_not_choose():
    lake = parse_config(
        {
            "tables": [
                table(),
                {
                    **table(storage="glue"),
                    "id": "b",
                    "source": {"prefix": "crm/b", "format": "parquet", "cdc": "dms"},
                    "target": {"database": "crm", "table": "b", "storage": "glue"},
                },
            ]
        }
    )
    deployed = with_stage_defaults(lake, BatchingSettings(), storage="s3_tables")
    assert [t.target.storage for t in deployed.tables] == ["s3_tables", "glue"]
    # what the config table carries says so explicitly
    assert "storage" in deployed.tables[0].target.model_fields_set
    assert with_stage_defaults(lake, BatchingSettings()).tables[0].target.storage == "glue"


def test_the_stage_default_checks_the_tables_it_moves():
    lake = parse_config({"tables": [table(table="Customers")]})
    with pytest.raises(SettingsError) as err:
        with_stage_defaults(lake, BatchingSettings(), storage="s3_tables")
    assert "table 'crm.customers' takes the stage's target_storage s3_tables" in str(err.value)
    assert "target.table: 'Customers'" in str(err.value)


def test_every_s3_tables_problem_of_a_table_is_named_in_full():
    """One table breaking every rule at once: each problem, in full, in the order the fields are read."""
    spec = {
        **table(storage="s3_tables", table="Customers", properties={"write.data.path": "s3://x/y"}),
        "quality": {"quarantine_table": "rejects_", "rules": [{"not_null": ["customer_id"]}]},
        "maintenance": {"compaction": {"sort_order": "customer_id"}},
    }
    [message] = error_of(spec).splitlines()
    assert message.split("target.storage s3_tables: ", 1)[1] == "; ".join(
        [
            "target.table: 'Customers' is not an S3 Tables name (lower-case letters, digits and _, starting "
            "and ending with a letter or digit)",
            "quality.quarantine_table: 'rejects_' is not an S3 Tables name",
            "maintenance.compaction.sort_order: S3 Tables' own compaction takes no sort_order; leave it out "
            "(storage: s3_tables)",
            "target.properties: S3 Tables places the table's files itself (no location)",
        ]
    )


def test_a_good_quarantine_table_name_is_no_problem():
    spec = {**table(storage="s3_tables"), "quality": {"quarantine_table": "customers_rejects", "rules": []}}
    assert parse_config({"tables": [spec]}).tables[0].quality.quarantine_table == "customers_rejects"
