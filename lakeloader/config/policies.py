"""Per-table policies: `tombstones:`, `reconcile:`, `partial_updates:`, `maintenance:` (with its
retries) and `trigger:`."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from lakeloader.config.base import _Strict
from lakeloader.formats.debezium import Debezium

SORT_TERM = re.compile(
    r"^\s*(?:zorder\(\s*[A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*\s*\)"
    r"|[A-Za-z_][A-Za-z0-9_]*(?:\s+(?:ASC|DESC))?(?:\s+NULLS\s+(?:FIRST|LAST))?)\s*$",
    re.IGNORECASE,
)


class TombstoneSettings(_Strict):
    """Deletes leave a tombstone (key, sequence tuple, when recorded) in `<table>__tombstones`, so a
    change older than the delete that arrives later is ignored instead of bringing the row back."""

    enabled: bool = True
    retain_days: float = Field(
        default=7,
        gt=0,
        description="Days `lakeloader maintain` keeps a tombstone. Cover the longest re-delivery window "
        "of the source: a DMS task resumed or restarted from an earlier checkpoint, a Debezium connector "
        "replaying from its last committed offset, a late file from a backfill",
    )


class ReconcileSettings(_Strict):
    """Reconciliation on every commit (`merge`, `scd2`): what the batch's files asked for is held
    against what the table reports of the commit (lakeloader.engine.reconciliation)."""

    on_mismatch: Literal["fail", "alarm"] = Field(
        default="alarm",
        description="A commit the table disagrees with: 'alarm' (default) publishes it, records the "
        "mismatch in the run record and raises the ReconciliationMismatch metric and its alarm; 'fail' "
        "writes every batch to an audit branch first and fails a disagreeing one there, nothing "
        "published. The default alarms because what disagrees is nearly always the table already (a "
        "row written behind the engine's back), which failing the batch does not undo, while it would "
        "stop every later batch of the table until someone repairs it",
    )


class PartialUpdates(_Strict):
    """Updates that leave some columns out: keep the table's current value for them.

    Debezium writes `__debezium_unavailable_value` for an unchanged TOASTed column; DMS can write
    NULL for an unchanged LOB column (limited LOB mode)."""

    columns: Literal["all"] | list[str] = Field(
        default="all",
        description="Columns an update may leave out: 'all' (every column but the keys and the "
        "sequence columns) or a list",
    )
    placeholder: str | None = Field(
        default=None,
        description="Value meaning 'unchanged' in an update (string and binary columns). "
        f"Default for cdc: debezium: {Debezium.placeholder}; none otherwise",
    )
    ignore_nulls: bool = Field(
        default=False, description="NULL in an update means 'unchanged' (DMS LOB columns)"
    )

    @field_validator("columns")
    @classmethod
    def _some_columns(cls, value: Any) -> Any:
        if isinstance(value, list):
            if not value:
                raise ValueError("columns must name at least one column (or be 'all')")
            if len({c.lower() for c in value}) != len(value):
                raise ValueError(f"duplicate columns in {value}")
        return value

    @field_validator("placeholder")
    @classmethod
    def _not_empty(cls, value: str | None) -> str | None:
        if value is not None and not value:
            raise ValueError("placeholder must not be empty (use ignore_nulls for NULL)")
        return value


class CompactionSettings(_Strict):
    """rewrite_data_files: bin-pack small files (or sort them) towards the target size."""

    enabled: bool = True
    target_file_size_mb: int = Field(default=512, ge=1)
    min_input_files: int = Field(
        default=5, ge=1, description="Rewrite a file group only from this many files"
    )
    sort_order: str | None = Field(
        default=None,
        description="Sort instead of bin-pack: 'col [ASC|DESC] [NULLS FIRST|LAST], ...' or 'zorder(a, b)'",
    )
    where: str | None = Field(default=None, description="Only compact files matching this SQL predicate")
    delete_file_threshold: int = Field(
        default=1, ge=1, description="Rewrite a data file with at least this many delete files"
    )

    @field_validator("sort_order")
    @classmethod
    def _sort_order(cls, value: str | None) -> str | None:
        if value is None:
            return value
        terms = re.split(r",(?![^(]*\))", value)
        for term in terms:
            if not SORT_TERM.match(term):
                raise ValueError(
                    f"{term.strip()!r} is not a sort term; use 'col [ASC|DESC] [NULLS FIRST|LAST]' or "
                    "'zorder(a, b)'"
                )
        return value


class SnapshotRetention(_Strict):
    """expire_snapshots: drop snapshots older than `older_than_days`, always keeping `retain_last`."""

    enabled: bool = True
    older_than_days: float = Field(default=7, gt=0)
    retain_last: int = Field(default=5, ge=1)


class OrphanFiles(_Strict):
    """remove_orphan_files: delete files no snapshot references, older than `older_than_hours`."""

    enabled: bool = True
    older_than_hours: float = Field(
        default=72,
        ge=24,
        description="At least 24: a younger file may belong to a commit still in flight",
    )


class CommitRetry(_Strict):
    """Iceberg's own commit retry (table properties commit.retry.*), set on the table by maintain."""

    num_retries: int = Field(default=10, ge=0)
    min_wait_ms: int = Field(default=100, ge=0)
    max_wait_ms: int = Field(default=60_000, ge=0)
    total_timeout_ms: int = Field(default=1_800_000, ge=0)

    def table_properties(self) -> dict[str, str]:
        return {
            "commit.retry.num-retries": str(self.num_retries),
            "commit.retry.min-wait-ms": str(self.min_wait_ms),
            "commit.retry.max-wait-ms": str(self.max_wait_ms),
            "commit.retry.total-timeout-ms": str(self.total_timeout_ms),
        }


# The one retry policy: lakeloader.iceberg.retry.retry_on_conflict waits as it says. (The docstring
# below is the published JSON Schema's description.)
class RetrySettings(_Strict):
    """lakeloader's retry of a whole operation after a commit conflict Iceberg cannot resolve itself
    (a validation conflict): bounded exponential backoff with jitter."""

    attempts: int = Field(default=4, ge=1, le=50, description="Total attempts, the first included")
    base_seconds: float = Field(default=2.0, ge=0, description="Wait before the 2nd attempt (doubles)")
    max_seconds: float = Field(default=60.0, ge=0, description="Cap on one wait")
    jitter: float = Field(default=0.5, ge=0, le=1, description="Fraction of each wait drawn at random")

    def ceiling(self, retry: int) -> float:
        """The longest wait before retry number `retry` (1 = the wait after the first failure)."""
        return min(self.max_seconds, self.base_seconds * 2 ** (retry - 1))

    def delay(self, retry: int, rand: Callable[[], float] = random.random) -> float:
        """The wait before retry `retry`: in [ceiling * (1 - jitter), ceiling]."""
        ceiling = self.ceiling(retry)
        return ceiling * (1 - self.jitter) + ceiling * self.jitter * rand()


class MaintenanceConfig(_Strict):
    """`lakeloader maintain`: compaction, delete-file and manifest rewrites, expiry, orphan removal."""

    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    rewrite_delete_files: bool = True
    rewrite_manifests: bool = True
    snapshots: SnapshotRetention = Field(default_factory=SnapshotRetention)
    orphan_files: OrphanFiles = Field(default_factory=OrphanFiles)
    commit_retry: CommitRetry = Field(default_factory=CommitRetry)
    retry: RetrySettings = Field(default_factory=RetrySettings)


DEFAULT_MAX_FILES_PER_RUN = 1000
DEFAULT_MAX_BYTES_PER_RUN = 10 * 1024**3


class TriggerConfig(_Strict):
    """When arrivals start runs on AWS, how much one run takes, and when a lagging table alarms
    (the S3-arrival Lambda and the ledger drain; local `lakeloader run` ignores it)."""

    min_interval_seconds: int = Field(
        default=0,
        ge=0,
        le=86_400,
        description="Batching window. 0 (default): every arrival starts a run unless one is running. "
        "N > 0: arrivals are recorded and wait; the stage's sweep starts one run for them once N seconds "
        "have passed since the table's last run start, grouping due tables into shared runs",
    )
    execution_class: Literal["STANDARD", "FLEX"] = Field(
        default="STANDARD",
        description="Glue execution class of the table's runs: FLEX (cheaper, may start later) for "
        "tables that can wait. engine: glue only",
    )
    max_files_per_run: int = Field(
        default=DEFAULT_MAX_FILES_PER_RUN,
        ge=1,
        description="Raw files one run loads at most (oldest first); the rest ride the next run, which "
        "the stage's sweep starts",
    )
    max_bytes_per_run: int = Field(
        default=DEFAULT_MAX_BYTES_PER_RUN,
        ge=1,
        description="Raw bytes one run loads at most (default 10 GiB; a larger file still loads, alone)",
    )
    freshness_minutes: int | None = Field(
        default=None,
        ge=1,
        description="Alarm when the table's oldest file still to load arrived longer ago than this "
        "(the stage's sweep measures it as PendingAgeSeconds); default: no alarm",
    )


class ColumnSelection(_Strict):
    """`columns:` -- the source columns a table keeps, decided when a file is read: a column left out
    never reaches the table, not even when it is created (a PII or noise column)."""

    include: list[str] | None = Field(
        default=None, description="Keep only these columns (the keys and sequence columns always stay)"
    )
    exclude: list[str] | None = Field(default=None, description="Drop these columns; the rest stay")

    @model_validator(mode="after")
    def _one_of(self) -> ColumnSelection:
        if (self.include is None) == (self.exclude is None):
            raise ValueError("give either include: [...] or exclude: [...]")
        if not (self.include or self.exclude):
            raise ValueError("name at least one column")
        return self
