"""The config table in DynamoDB: its item shape, scan and sync, and the config-sync custom resource.

One item per table, keyed by ``table_id``::

    table_id  S     the table's id (partition key)
    prefix    S     its source.prefix, so the S3-arrival Lambda can match keys without pydantic
    enabled   BOOL
    engine    S     glue | emr
    min_interval_seconds  N   trigger.min_interval_seconds (the batching window; 0: none)
    execution_class       S   trigger.execution_class (STANDARD | FLEX)
    success_markers       BOOL  cdc: snapshot only: the trigger records _SUCCESS files
    freshness_seconds     N   trigger.freshness_minutes * 60, where set (the sweep's lag over it)
    config    S     JSON of TableConfig.model_dump(mode="json", by_alias=True)

A `sources:` entry is one item too (``table_id`` ``source:<id>``, ``kind`` ``source``, its ``prefix``,
and ``source``: the entry as JSON); the S3-arrival Lambda reads it to find tables. A table it found
(lakeloader.control.discovery) is an ordinary table item written by the Lambda on the table's first file,
with ``found_by`` (the source id) and, while its keys are unknown, ``held`` (why; ``enabled`` false).
A deploy's sync leaves found items alone while their source is in the config.

Standard library and boto3 only: the config-sync and S3-arrival Lambdas ship it without pydantic.
The pydantic side (items from a validated config at synth, TableConfig objects back for the jobs)
is `lakeloader.config.items`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from lakeloader.control.dynamodb import decode_item, encode_item, is_condition_failure

log = logging.getLogger(__name__)

PARTITION_KEY = "table_id"
ITEM_ATTRIBUTES = ("table_id", "prefix", "enabled", "engine", "config")
SOURCE_ITEM_PREFIX = "source:"  # a sources: entry's item: "source:<id>" (no table id has a ':')
KIND_SOURCE = "source"
FOUND_BY = "found_by"
HELD = "held"
_BATCH = 25  # DynamoDB BatchWriteItem limit
ITEMS_FILE = "items.json"  # the deploy's items (items_json), a file asset the custom resource names
_MAX_ATTEMPTS = 8


class ConfigStoreError(RuntimeError):
    """The config table could not be read or written; the message names the table and item."""


def items_json(items: list[dict[str, Any]]) -> str:
    """The canonical JSON form of the items (stable across runs: it is part of the template)."""
    return json.dumps(items, sort_keys=True, separators=(",", ":"))


# --- reading ------------------------------------------------------------------------------


def _client(client: Any | None) -> Any:
    if client is not None:
        return client
    import boto3

    return boto3.client("dynamodb")


def scan_items(
    table_name: str, *, client: Any | None = None, attributes: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """Every item of the config table as plain Python dicts, sorted by table_id.

    ``attributes`` limits what is read (the Lambda's routes leave the large ``config`` JSON out).
    """
    client = _client(client)
    kwargs: dict[str, Any] = {"TableName": table_name, "ConsistentRead": True}
    names = {f"#a{i}": name for i, name in enumerate(attributes)}
    if names:
        kwargs["ProjectionExpression"] = ", ".join(names)
        kwargs["ExpressionAttributeNames"] = names
    items: list[dict[str, Any]] = []
    for page in client.get_paginator("scan").paginate(**kwargs):
        items.extend(decode_item(raw) for raw in page.get("Items", []))
    return sorted(items, key=lambda item: str(item.get(PARTITION_KEY, "")))


def scan_table_ids(table_name: str, *, client: Any | None = None) -> list[str]:
    items = scan_items(table_name, client=client, attributes=(PARTITION_KEY,))
    return [item[PARTITION_KEY] for item in items]


def is_table_item(item: Mapping[str, Any]) -> bool:
    """A table that loads: not a source's item, not a found table held for want of keys."""
    return item.get("kind") != KIND_SOURCE and not item.get(HELD)


def source_item(source: Mapping[str, Any]) -> dict[str, Any]:
    """The config item of one sources: entry (plain data, as lakeloader.control.discovery takes it)."""
    defaults = source.get("defaults") or {}
    return {
        PARTITION_KEY: SOURCE_ITEM_PREFIX + str(source["id"]),
        "kind": KIND_SOURCE,
        "prefix": source["prefix"],
        "enabled": True,
        "engine": defaults.get("engine", "glue"),
        "source": json.dumps(source, sort_keys=True),
        "config": "{}",
    }


def found_item(
    source_id: str,
    table_id: str,
    prefix: str,
    settings: Mapping[str, Any],
    held: str | None,
    *,
    needs_keys: bool = False,
) -> dict[str, Any]:
    """The config item of a table a source's layout names (lakeloader.control.discovery.FoundTable)."""
    trigger = settings.get("trigger") or {}
    return {
        PARTITION_KEY: table_id,
        "prefix": prefix,
        "enabled": held is None,
        "engine": settings.get("engine", "glue"),
        "min_interval_seconds": int(trigger.get("min_interval_seconds", 0)),
        "execution_class": trigger.get("execution_class", "STANDARD"),
        **({"success_markers": True} if settings.get("source", {}).get("cdc") == "snapshot" else {}),
        **(
            {"freshness_seconds": trigger["freshness_minutes"] * 60}
            if trigger.get("freshness_minutes")
            else {}
        ),
        FOUND_BY: source_id,
        **({HELD: held, "held_needs_keys": needs_keys} if held else {}),
        "config": json.dumps(settings, sort_keys=True),
    }


def put_found_item(
    table_name: str, item: Mapping[str, Any], *, client: Any, replace_held: bool = False
) -> bool:
    """Write a found table's item once: False when it is there already (another invocation found it
    first). `replace_held`: overwrite the item only while it is held (its keys came)."""
    condition = f"attribute_exists({HELD})" if replace_held else f"attribute_not_exists({PARTITION_KEY})"
    try:
        client.put_item(TableName=table_name, Item=encode_item(dict(item)), ConditionExpression=condition)
    except ClientError as exc:
        if is_condition_failure(exc):
            return False
        raise
    return True


# --- writing ------------------------------------------------------------------------------


@dataclass
class SyncResult:
    """The table ids a config sync put and deleted."""

    put: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


def _batch_write(client: Any, table_name: str, requests: list[dict[str, Any]]) -> None:
    """BatchWriteItem in chunks of 25, retrying unprocessed items with backoff."""
    import time

    for start in range(0, len(requests), _BATCH):
        pending = requests[start : start + _BATCH]
        for attempt in range(_MAX_ATTEMPTS):
            response = client.batch_write_item(RequestItems={table_name: pending})
            pending = response.get("UnprocessedItems", {}).get(table_name, [])
            if not pending:
                break
            time.sleep(min(0.05 * 2**attempt, 2.0))
        else:
            raise ConfigStoreError(
                f"dynamodb://{table_name}: {len(pending)} writes still unprocessed "
                f"after {_MAX_ATTEMPTS} attempts"
            )


def validate_items(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Check the item shape (the custom resource receives it as JSON); return plain dicts."""
    checked = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ConfigStoreError(f"item {index} is not an object")
        missing = [name for name in ITEM_ATTRIBUTES if name not in item]
        if missing:
            raise ConfigStoreError(f"item {index} ({item.get('table_id')!r}) lacks {', '.join(missing)}")
        table_id = item["table_id"]
        if not isinstance(table_id, str) or not table_id:
            raise ConfigStoreError(f"item {index} has an empty or non-string table_id")
        if table_id in seen:
            raise ConfigStoreError(f"table_id {table_id!r} appears twice")
        seen.add(table_id)
        checked.append(dict(item))
    return checked


def sync_items(
    table_name: str,
    items: Iterable[Mapping[str, Any]],
    *,
    prune: bool = True,
    client: Any | None = None,
) -> SyncResult:
    """Make the config table hold exactly `items`: put each one, delete the other table_ids."""
    client = _client(client)
    items = validate_items(items)
    wanted = [item["table_id"] for item in items]
    stale = sorted(_stale_ids(table_name, items, client)) if prune else []
    requests = [{"PutRequest": {"Item": encode_item(item)}} for item in items]
    requests += [{"DeleteRequest": {"Key": {PARTITION_KEY: {"S": table_id}}}} for table_id in stale]
    _batch_write(client, table_name, requests)
    log.info("config table %s: put %s, deleted %s", table_name, wanted, stale)
    return SyncResult(put=wanted, deleted=stale)


def _stale_ids(table_name: str, items: list[dict[str, Any]], client: Any) -> set[str]:
    """Items the config no longer has: not among `items`, and not a table found by a source `items`
    still hold (the Lambda wrote it; the deploy knows nothing of it)."""
    wanted = {item[PARTITION_KEY] for item in items}
    sources = {
        item[PARTITION_KEY].removeprefix(SOURCE_ITEM_PREFIX)
        for item in items
        if item.get("kind") == KIND_SOURCE
    }
    stored = scan_items(table_name, client=client, attributes=(PARTITION_KEY, FOUND_BY))
    return {
        item[PARTITION_KEY]
        for item in stored
        if item[PARTITION_KEY] not in wanted and item.get(FOUND_BY) not in sources
    }


def delete_items(table_name: str, table_ids: Iterable[str], *, client: Any | None = None) -> list[str]:
    client = _client(client)
    ids = sorted(set(table_ids))
    _batch_write(client, table_name, [{"DeleteRequest": {"Key": {PARTITION_KEY: {"S": i}}}} for i in ids])
    return ids


# --- the CloudFormation custom resource ---------------------------------------------------


def truthy(value: Any) -> bool:
    """A flag that may arrive as text: CloudFormation passes every custom-resource property as a
    string, and a hand-written config item may hold "true"/"yes"/"1"."""
    return str(value).strip().lower() in {"true", "1", "yes"}


def read_items(props: Mapping[str, Any], *, s3: Any | None = None) -> list[Any]:
    """The items a Custom::LakeloaderConfigSync request carries: the JSON object at ``ItemsBucket``/
    ``ItemsKey`` (the deploy's file asset), or an ``Items`` JSON property (stacks synthesized before
    the items moved to an asset; an update's rollback sends their properties back)."""
    if "ItemsKey" in props:
        where = f"s3://{props.get('ItemsBucket')}/{props['ItemsKey']}"
        if s3 is None:
            import boto3

            s3 = boto3.client("s3")
        try:
            text = s3.get_object(Bucket=props["ItemsBucket"], Key=props["ItemsKey"])["Body"].read()
        except Exception as exc:
            raise ConfigStoreError(f"{where}: the config items could not be read: {exc}") from None
    else:
        where, text = "Items property", props.get("Items") or "[]"
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigStoreError(f"{where} is not JSON: {exc}") from None
    if not isinstance(items, list):
        raise ConfigStoreError(f"{where} must be a JSON list")
    return items


def apply_custom_resource_event(
    event: Mapping[str, Any], *, client: Any | None = None, s3: Any | None = None
) -> tuple[str, dict]:
    """Carry out one Custom::LakeloaderConfigSync request; return (physical id, response data).

    Properties: ``TableName``, ``ItemsBucket`` and ``ItemsKey`` (the S3 object of the JSON list of
    config items; see read_items) and ``PruneOnDelete`` ("true" in stages whose data may be
    destroyed). Create and Update put every item and delete items whose table_id left the config;
    Delete removes the resource's items only when PruneOnDelete is true (never in prod) and otherwise
    leaves the table untouched.
    """
    request = event["RequestType"]
    props = event.get("ResourceProperties", {})
    table_name = props["TableName"]
    physical_id = f"{table_name}/config-sync"
    if request in ("Create", "Update"):
        result = sync_items(table_name, read_items(props, s3=s3), client=client)
        return physical_id, {"Put": len(result.put), "Deleted": len(result.deleted)}
    if request == "Delete":
        physical_id = event.get("PhysicalResourceId") or physical_id
        if not truthy(props.get("PruneOnDelete", "false")):
            log.info("config table %s: Delete leaves the items in place (PruneOnDelete is false)", table_name)
            return physical_id, {"Put": 0, "Deleted": 0}
        try:
            ids = [item["table_id"] for item in read_items(props, s3=s3)]
            deleted = delete_items(table_name, ids, client=client)
        except Exception as exc:  # the table may already be gone; never block a stack deletion
            log.warning("config table %s: prune on delete skipped: %s", table_name, exc)
            deleted = []
        return physical_id, {"Put": 0, "Deleted": len(deleted)}
    raise ConfigStoreError(f"unknown RequestType {request!r}")
