"""What one invocation did: the Lambda's response, and its ``trigger.summary`` log line.

The JSON is a contract: `lakeloader rebuild --stage` and the emulator's demo read ``started`` and
``deferred``, the tests every field; ``as_json`` gives the fields in their declared order.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from lakeloader.control.trigger.starts import StartOutcome


@dataclass(kw_only=True)
class Summary:
    """The counts of an arrival; a sweep and a rebuild report their starts in the same fields."""

    correlation_id: str
    records: int = 0
    recorded: int = 0
    duplicates: int = 0
    unknown: int = 0
    disabled: int = 0
    held: int = 0  # recorded for a found table that waits for its key columns (trigger.found)
    ignored: int = 0
    started: dict[str, str] = field(default_factory=dict)  # table id -> Glue/EMR run id
    deferred: list[dict[str, Any]] = field(default_factory=list)  # table id, reason and its detail

    def add(self, table_id: str, outcome: StartOutcome) -> None:
        if outcome.run_id:
            self.started[table_id] = outcome.run_id
        else:
            self.deferred.append({"table_id": table_id, "reason": outcome.reason, **outcome.detail})

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(kw_only=True)
class SweepSummary(Summary):
    action: str = "sweep"
    tables_checked: int = 0
    tables_waiting: int = 0  # due: pending objects and no batching window holding them back
    tables_in_window: int = 0


@dataclass(kw_only=True)
class RebuildSummary(Summary):
    action: str = "rebuild"
