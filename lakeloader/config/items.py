"""The config table seen from the pydantic model: items from a validated config, and back.

`cdk synth` turns the validated YAML into the config table's items (`config_items`); the jobs read
them back as `TableConfig` objects (`load_tables_from_dynamodb`). The item shape, the scan and the
writes live in `lakeloader.control.config_store`, which the Lambdas ship without pydantic; this module is
for the CDK app, the CLI and the Glue/EMR jobs only.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from lakeloader.config import ConfigError, LakeConfig, TableConfig
from lakeloader.control.config_store import (
    FOUND_BY,
    HELD,
    PARTITION_KEY,
    is_table_item,
    scan_items,
    source_item,
)

log = logging.getLogger(__name__)


def config_items(cfg: LakeConfig) -> list[dict[str, Any]]:
    """The config table's items for a validated config, in config order (plain Python values): the
    tables', then the sources' (the S3-arrival Lambda finds their tables as files arrive)."""
    return [
        {
            "table_id": table.id,
            "prefix": table.source.prefix,
            "enabled": table.enabled,
            "engine": table.engine,
            "min_interval_seconds": table.trigger.min_interval_seconds,
            "execution_class": table.trigger.execution_class,
            # cdc: snapshot: the trigger records the _SUCCESS file that completes a snapshot folder
            **({"success_markers": True} if table.source.cdc == "snapshot" else {}),
            # the sweep publishes the table's lag over it, which one alarm watches (infra.monitoring)
            **(
                {"freshness_seconds": table.trigger.freshness_minutes * 60}
                if table.trigger.freshness_minutes
                else {}
            ),
            "config": json.dumps(table.model_dump(mode="json", by_alias=True), sort_keys=True),
        }
        for table in cfg.tables
    ] + [source_item(source.as_data()) for source in cfg.sources]


# What a table's load reads of the config items: which items are tables that load, and their config
TABLE_ATTRIBUTES = (PARTITION_KEY, "kind", HELD, FOUND_BY, "config")


def load_tables_from_dynamodb(table_name: str, *, client: Any | None = None) -> list[TableConfig]:
    """The table configs stored in the config table, validated, sorted by id.

    An item whose ``config`` is not a valid TableConfig raises ConfigError naming the item. Sources'
    items and found tables held for want of keys are not tables to load.
    """
    tables = []
    for item in filter(is_table_item, scan_items(table_name, client=client, attributes=TABLE_ATTRIBUTES)):
        table_id = item.get(PARTITION_KEY, "<missing table_id>")
        raw = item.get("config")
        if not isinstance(raw, str):
            raise ConfigError(f"dynamodb://{table_name}: item {table_id!r} has no 'config' attribute")
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"dynamodb://{table_name}: item {table_id!r}: config is not JSON: {exc}"
            ) from None
        try:
            # `cdk synth` checked the declared types for the stage's runtime
            table = TableConfig.model_validate(data, context={"runtime": "any"})
        except ValueError as exc:  # pydantic.ValidationError is a ValueError
            if item.get(FOUND_BY):  # a source's defaults that do not suit this one table: it alone waits
                log.error(
                    "dynamodb://%s: found table %r is not valid, not loaded: %s", table_name, table_id, exc
                )
                continue
            raise ConfigError(f"dynamodb://{table_name}: item {table_id!r}: {exc}") from None
        if table.id != table_id:
            raise ConfigError(
                f"dynamodb://{table_name}: item {table_id!r} holds the config of table {table.id!r}"
            )
        tables.append(table)
    return tables
