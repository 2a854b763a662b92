"""S3-arrival Lambda: record raw objects in the ledger and start their tables' runs.

Thin on purpose: the logic is ``lakeloader.control.trigger`` (the bundle holds lakeloader/control/,
plus aws-lambda-powertools). Its environment is ``lakeloader.control.trigger.settings.TriggerSettings``;
the flow is described in docs/ledger_and_trigger.md.
"""

from __future__ import annotations

from typing import Any

from lakeloader.control.trigger import handle_event


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Returns the summary: records, recorded, duplicates, unknown, disabled, ignored,
    started {table_id: run id}, deferred [{table_id, reason, ...}], correlation_id."""
    return handle_event(event, context)
