"""Tables found as their files arrive: a key under a source's prefix names its table
(lakeloader.control.discovery); the table's first file records it in the config store, so its run starts with
no deploy. A table whose keys are unknown is recorded held: its files are recorded and wait, and the
table is released once its source's keys name it (a deploy of the one line), at the next arrival or sweep.
"""

from __future__ import annotations

import logging
from typing import Any

from lakeloader.control.config_store import PARTITION_KEY, found_item, put_found_item
from lakeloader.control.discovery import FoundTable, find_table
from lakeloader.control.dynamodb import decode_item
from lakeloader.control.trigger.logs import log
from lakeloader.control.trigger.metrics import publish_table_held
from lakeloader.control.trigger.routes import Routes, TableRoute, route_for


class FoundTables:
    """Registers found tables in the config table (conditional writes: the first invocation wins)."""

    def __init__(self, dynamodb: Any, config_table: str, ledger_table: str) -> None:
        self.dynamodb = dynamodb
        self.config_table = config_table
        self.ledger_table = ledger_table

    def claim(self, key: str, routes: Routes, matched: list[TableRoute]) -> TableRoute | None:
        """The route of the new table a source names for `key`, recorded on this first file; None when
        no source names one, or a known table owns the key (a prefix at least as long as the found
        folder, or the found id itself: a tables: entry pinning it elsewhere)."""
        known = {r.table_id for r in routes.tables}
        for source in routes.sources:
            found = find_table(source, key)
            if found is None:
                continue
            if found.table_id in known or (matched and len(matched[0].prefix) >= len(found.prefix)):
                return None
            route = self._register(found)
            routes.tables.append(route)  # this container's cache knows it from now on
            return route
        return None

    def release(self, route: TableRoute, routes: Routes) -> TableRoute:
        """A held table whose source now gives its keys, recorded as a table that loads; else as it is."""
        source = routes.source(route.found_by)
        found = find_table(source, route.prefix + "-") if source is not None else None
        if found is None or found.held or found.table_id != route.table_id:
            return route
        item = found_item(found.source_id, found.table_id, found.prefix, found.settings, None)
        put_found_item(self.config_table, item, client=self.dynamodb, replace_held=True)
        released = route_for(item)
        assert released is not None  # a found item has an id and a prefix
        routes.tables[routes.tables.index(route)] = released
        log(logging.INFO, "table.released", table_id=route.table_id, source_id=found.source_id)
        return released

    def _register(self, found: FoundTable) -> TableRoute:
        item = found_item(
            found.source_id,
            found.table_id,
            found.prefix,
            found.settings,
            found.held,
            needs_keys=found.needs_keys,
        )
        if put_found_item(self.config_table, item, client=self.dynamodb):
            if found.held:
                log(logging.WARNING, "table.held", table_id=found.table_id, hint=found.hint)
                publish_table_held(self.ledger_table, found.table_id)
            else:
                log(logging.INFO, "table.found", table_id=found.table_id, prefix=found.prefix)
        else:  # another invocation recorded it first: take its item
            stored = self.dynamodb.get_item(
                TableName=self.config_table, Key={PARTITION_KEY: {"S": found.table_id}}, ConsistentRead=True
            )["Item"]
            item = decode_item(stored)
        route = route_for(item)
        assert route is not None  # a found item has an id and a prefix
        return route
