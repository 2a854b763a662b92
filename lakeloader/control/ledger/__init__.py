"""The run ledger: which raw objects each table has seen, which runs took them, one run at a time.

Shipped to the S3-arrival Lambda: standard library and botocore only. The item layout, the
object life cycle and the drain protocol are described in docs/ledger_and_trigger.md.
"""

from lakeloader.control.ledger.actions import REQUEUE_FROM, SKIP_FROM, ActionOutcome, Backlog
from lakeloader.control.ledger.base import (
    DEFAULT_RUN_RETENTION_DAYS,
    MAX_ERROR_CHARS,
    LedgerError,
    LockLostError,
    utc_now_iso,
)
from lakeloader.control.ledger.ledger import Ledger
from lakeloader.control.ledger.lock import (
    DEFAULT_LOCK_TTL_SECONDS,
    DEFAULT_START_LEASE_SECONDS,
    LOCK_RUN_ID,
    LOCK_RUNNING,
    LOCK_STARTING,
    Lock,
)
from lakeloader.control.ledger.objects import (
    DEFAULT_MAX_ATTEMPTS,
    DONE,
    FAILED,
    OBJECT_STATUSES,
    OPEN_STATUSES,
    PENDING,
    QUARANTINED,
    RUNNING,
    SKIPPED,
    LedgerObject,
    ObjectRef,
    RecordOutcome,
    object_id_for,
)
from lakeloader.control.ledger.runs import (
    RUN_ABANDONED,
    RUN_FAILED,
    RUN_RUNNING,
    RUN_SKIPPED,
    RUN_STATUSES,
    RUN_SUCCEEDED,
    RunRecord,
)
from lakeloader.control.ledger.window import WINDOW_RUN_ID

__all__ = [
    "REQUEUE_FROM",
    "SKIP_FROM",
    "ActionOutcome",
    "Backlog",
    "OPEN_STATUSES",
    "SKIPPED",
    "RUN_ABANDONED",
    "DEFAULT_LOCK_TTL_SECONDS",
    "DEFAULT_RUN_RETENTION_DAYS",
    "DEFAULT_START_LEASE_SECONDS",
    "DEFAULT_MAX_ATTEMPTS",
    "DONE",
    "FAILED",
    "LOCK_RUNNING",
    "LOCK_RUN_ID",
    "LOCK_STARTING",
    "MAX_ERROR_CHARS",
    "OBJECT_STATUSES",
    "PENDING",
    "QUARANTINED",
    "RUNNING",
    "RUN_FAILED",
    "RUN_RUNNING",
    "RUN_SKIPPED",
    "RUN_STATUSES",
    "RUN_SUCCEEDED",
    "WINDOW_RUN_ID",
    "Ledger",
    "LedgerError",
    "LedgerObject",
    "Lock",
    "LockLostError",
    "ObjectRef",
    "RecordOutcome",
    "RunRecord",
    "object_id_for",
    "utc_now_iso",
]
