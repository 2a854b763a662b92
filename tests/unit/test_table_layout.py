"""What a table lakeloader creates (or a rebuild replaces) is made with: its partitioning and
properties, as the SQL that follows the column list (lakeloader.engine.schema.table_layout_sql). No JVM."""

from __future__ import annotations

from lakeloader.config import TableConfig
from lakeloader.engine.schema import table_layout_sql

DEFAULTS_THEN_RETRY = (
    "'format-version'='2', 'write.merge.mode'='{merge_mode}', 'write.update.mode'='merge-on-read', "
    "'write.delete.mode'='merge-on-read', 'write.merge.distribution-mode'='none', "
    "'commit.manifest.min-count-to-merge'='16'{own}, 'commit.retry.num-retries'='10', "
    "'commit.retry.min-wait-ms'='100', 'commit.retry.max-wait-ms'='60000', "
    "'commit.retry.total-timeout-ms'='1800000'"
)


def table(keys: list[str], **target) -> TableConfig:
    return TableConfig.model_validate(
        {
            "id": "crm.customers",
            "source": {"prefix": "crm/", "cdc": "dms"},
            "target": {"database": "crm", "table": "customers", **target},
            "keys": keys,
        }
    )


def test_an_unpartitioned_table_gets_the_new_table_defaults_the_retry_and_its_keys_and_mode():
    layout = table_layout_sql(table(["id", "site"]), ["id", "site", "name"])
    properties = DEFAULTS_THEN_RETRY.format(merge_mode="merge-on-read", own="")
    assert layout == (
        f"USING iceberg TBLPROPERTIES ({properties}, 'lakeloader.keys'='[\"id\", \"site\"]', "
        "'lakeloader.mode'='merge')"
    )


def test_a_partitioned_table_spells_each_column_as_the_batch_does_and_its_own_properties_win():
    """Each transform's column quoted as the batch spells it (`Id` for `bucket(8, ID)`), a configured
    property replacing the default of the same name, and a quote in a value escaped."""
    configured = table(
        ["id"],
        partition_by=["bucket(8, ID)", "day(updated_at)", "region", "truncate(4, name)"],
        properties={"write.merge.mode": "copy-on-write", "comment": "it's"},
    )
    layout = table_layout_sql(configured, ["Id", "updated_at", "Region", "name"])
    properties = DEFAULTS_THEN_RETRY.format(merge_mode="copy-on-write", own=", 'comment'='it\\'s'")
    assert layout == (
        "USING iceberg PARTITIONED BY (bucket(8, `Id`), days(`updated_at`), `Region`, truncate(4, `name`)) "
        f"TBLPROPERTIES ({properties}, 'lakeloader.keys'='[\"id\"]', 'lakeloader.mode'='merge')"
    )
