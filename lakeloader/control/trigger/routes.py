"""Which table an object belongs to: the config table's routes, cached per Lambda container.

Read with `config_store.scan_items` (the one reader of the config table) and matched with
`contract.longest_prefix_matches` (the rule `LakeConfig.match_key` uses at synth).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lakeloader.control.config_store import FOUND_BY, HELD, KIND_SOURCE, scan_items, truthy
from lakeloader.control.contract import longest_prefix_matches, normalise_prefix
from lakeloader.control.trigger.logs import log

ROUTE_ATTRIBUTES = (
    "table_id",
    "prefix",
    "enabled",
    "engine",
    "min_interval_seconds",
    "execution_class",
    "success_markers",
    "kind",
    "source",
    FOUND_BY,
    HELD,
    "freshness_seconds",
)


@dataclass(frozen=True)
class TableRoute:
    """What the trigger needs of one config-table item."""

    table_id: str
    prefix: str
    enabled: bool = True
    engine: str = "glue"
    min_interval_seconds: int = 0  # the batching window; 0: arrivals start runs at once
    execution_class: str = "STANDARD"  # Glue: STANDARD | FLEX
    success_markers: bool = False  # cdc: snapshot: a _SUCCESS file completes a snapshot, so it is recorded
    found_by: str = ""  # the source whose layout named it (control.discovery); "" for a declared table
    held: str = ""  # found, and waiting for its key columns: why
    freshness_seconds: int = 0  # trigger.freshness_minutes * 60; 0: none (the sweep's lag metric over it)

    @property
    def batched(self) -> bool:
        return self.min_interval_seconds > 0


@dataclass(frozen=True)
class Routes:
    """The config table as the trigger reads it: the tables' routes and the sources' entries (plain data
    for lakeloader.control.discovery)."""

    tables: list[TableRoute] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)

    def source(self, source_id: str) -> dict[str, Any] | None:
        return next((s for s in self.sources if s.get("id") == source_id), None)


def match_routes(key: str, routes: list[TableRoute]) -> list[TableRoute]:
    """The routes whose prefix is the longest prefix of ``key`` (disabled ones included: a file under a
    disabled nested table belongs to that table, not to its parent). Several when tables read one
    prefix (a current table and its SCD2 history): each records the object and runs on its own."""
    return longest_prefix_matches(key, routes, lambda route: route.prefix)


def _enabled(item: Mapping[str, Any]) -> bool:
    if "enabled" not in item:
        return True
    value = item["enabled"]
    if isinstance(value, str):  # tolerate "true"/"false" strings
        return truthy(value)
    return bool(value)


def _window(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def route_for(item: Mapping[str, Any]) -> TableRoute | None:
    """The route of one config item; None when it lacks a table id or a prefix."""
    table_id = item.get("table_id")
    prefix = normalise_prefix(str(item.get("prefix") or ""))
    if not table_id or not prefix:
        return None
    return TableRoute(
        table_id=str(table_id),
        prefix=prefix,
        enabled=_enabled(item),
        engine=str(item.get("engine") or "glue").strip().lower(),
        min_interval_seconds=_window(item.get("min_interval_seconds")),
        execution_class=str(item.get("execution_class") or "STANDARD").strip().upper(),
        success_markers=item.get("success_markers") is True,
        found_by=str(item.get(FOUND_BY) or ""),
        held=str(item.get(HELD) or ""),
        freshness_seconds=_window(item.get("freshness_seconds")),
    )


def load_routes(client: Any, config_table: str) -> Routes:
    """Every table's route, sorted by table id, and the sources. Malformed items are logged and skipped."""
    routes, sources = [], []
    for item in scan_items(config_table, client=client, attributes=ROUTE_ATTRIBUTES):
        if item.get("kind") == KIND_SOURCE:
            try:
                sources.append(json.loads(item["source"]))
            except (KeyError, TypeError, json.JSONDecodeError) as exc:
                log(
                    logging.ERROR,
                    "config.item_invalid",
                    config_table=config_table,
                    item_table_id=item.get("table_id"),
                    reason=f"source: {exc}",
                )
            continue
        route = route_for(item)
        if route is None:
            log(
                logging.ERROR,
                "config.item_invalid",
                config_table=config_table,
                item_table_id=item.get("table_id"),
                reason="table_id and a non-empty prefix are required",
            )
            continue
        routes.append(route)
    return Routes(routes, sources)


_CACHE: dict[str, tuple[float, Routes]] = {}
_CACHE_LOCK = threading.Lock()


def clear_route_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


def cached_routes(client: Any, config_table: str, max_age_seconds: float) -> Routes:
    """``load_routes`` cached per Lambda container for ``max_age_seconds``."""
    now = time.monotonic()
    with _CACHE_LOCK:
        cached = _CACHE.get(config_table)
    if cached and max_age_seconds > 0 and now - cached[0] < max_age_seconds:
        return cached[1]
    routes = load_routes(client, config_table)
    with _CACHE_LOCK:
        _CACHE[config_table] = (now, routes)
    return routes
