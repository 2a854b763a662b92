"""S3-arrival Lambda: record raw objects in the ledger and start their tables' runs.

Thin on purpose: the logic is ``lakeloader.trigger`` (shipped next to this file
as ``lakeloader/__init__.py``, ``ledger.py`` and ``trigger.py``). Environment:
CONFIG_TABLE, LEDGER_TABLE, RUNS_TABLE, GLUE_JOB_NAME, EMR_APPLICATION_ID,
EMR_JOB_ROLE_ARN, EMR_ENTRY_POINT, EMR_EXTRA_ARGS (JSON list), RAW_BUCKET,
LOG_LEVEL; optional CONFIG_CACHE_SECONDS, START_LEASE_SECONDS,
EVENTBRIDGE_KEYS_ENCODED, TABLES_PER_RUN (tables the sweep puts in one run; default 1).
"""

from __future__ import annotations

from typing import Any

from lakeloader.trigger import handle_event


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Returns the summary: records, recorded, duplicates, unknown, disabled, ignored,
    started {table_id: run id}, deferred [{table_id, reason, ...}], correlation_id."""
    return handle_event(event, context)
