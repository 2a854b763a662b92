"""The event loop: arrivals and sweeps go through the real trigger, runs drain through the real ledger.

Simulated: the clock (the trigger and the ledger read it), and Glue. `SimGlue.start_job_run` takes
the trigger's request (table ids, execution class) and schedules the run the model describes. The
run then does what `lakeloader.jobs.drain.drain_tables` does per table, `parallel_tables` at a time, with
the real ledger calls (acquire_lock, start_run, next_batch, finish, end_run); only the merge is a
duration. Freshness is measured per object: its arrival to the end of the batch that committed it.
"""

from __future__ import annotations

import heapq
import itertools
import random
import statistics
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote_plus

import boto3

from lakeloader.config import LakeConfig
from lakeloader.config.items import config_items
from lakeloader.control.config_store import sync_items
from lakeloader.control.contract import new_run_id
from lakeloader.control.ledger import DONE, RUN_SUCCEEDED, Ledger
from lakeloader.control.trigger import ObjectsArrived, SweepRequest, Trigger, TriggerSettings

RAW = "lakeloader-sim-raw"
GLUE_PRICE_PER_DPU_HOUR = 0.44  # Glue Spark jobs, STANDARD (us-east-1, published price)
FLEX_PRICE_PER_DPU_HOUR = 0.29  # Glue Spark jobs, FLEX
KEY_TYPES = ("HASH", "RANGE")
MINIMUM_BILLED_SECONDS = 60  # Glue 2.0 and later, 5.x included: per second, 1-minute minimum
DPU_PER_WORKER = {
    "G.025X": 0.25, "G.1X": 1, "G.2X": 2, "G.4X": 4, "G.8X": 8, "G.12X": 12, "G.16X": 16,
    "R.1X": 1, "R.2X": 2, "R.4X": 4, "R.8X": 8,
}  # fmt: skip


@dataclass(frozen=True)
class RunModel:
    """How long a Glue run takes; what it costs."""

    dpus: float
    startup_seconds: float = 20.0  # start_job_run to a ready Spark session, billed
    batch_seconds: float = 6.0  # one table's small batch: read, validate, merge, commit
    mb_per_second: float = 20.0  # the size-dependent part of a batch
    flex_wait_seconds: float = 120.0  # a FLEX run waits for spare capacity first (not billed)

    def batch_duration(self, total_bytes: int) -> float:
        return self.batch_seconds + total_bytes / (self.mb_per_second * 1e6)

    def cost(self, billed_seconds: float, execution_class: str) -> float:
        price = FLEX_PRICE_PER_DPU_HOUR if execution_class == "FLEX" else GLUE_PRICE_PER_DPU_HOUR
        return billed_seconds / 3600 * self.dpus * price

    def describe(self) -> str:
        return (
            f"run = {self.startup_seconds:g} s start-up + per table batch ({self.batch_seconds:g} s + "
            f"size / {self.mb_per_second:g} MB/s), billed per second with a {MINIMUM_BILLED_SECONDS} s "
            f"minimum at {self.dpus:g} DPU, ${GLUE_PRICE_PER_DPU_HOUR}/DPU-hour "
            f"(FLEX ${FLEX_PRICE_PER_DPU_HOUR}, starting {self.flex_wait_seconds:g} s later, unbilled)"
        )


@dataclass(frozen=True)
class Scenario:
    name: str
    tables: int  # what the figures are scaled to
    simulated_tables: int  # what goes through the trigger and ledger
    window_seconds: int = 0  # trigger.min_interval_seconds; 0: today's behaviour
    tables_per_run: int = 1
    parallel_tables: int = 1
    execution_class: str = "STANDARD"
    sweep_seconds: int = 600


@dataclass
class Result:
    scenario: Scenario
    measured_seconds: float
    runs: int
    billed_seconds: float
    dpu_seconds: float
    dollars: float
    freshness: list[float] = field(default_factory=list)
    objects: int = 0
    double_applied: int = 0
    left_pending: int = 0

    @property
    def scale(self) -> float:
        """From what was simulated to a day of `scenario.tables` tables."""
        return 86400 / self.measured_seconds * self.scenario.tables / self.scenario.simulated_tables

    def per_day(self) -> dict[str, float]:
        cuts = (
            statistics.quantiles(self.freshness, n=100, method="inclusive") if len(self.freshness) > 1 else []
        )
        only = self.freshness[0] if self.freshness else float("nan")
        return {
            "runs": self.runs * self.scale,
            "dpu_hours": self.dpu_seconds / 3600 * self.scale,
            "dollars": self.dollars * self.scale,
            "p50": cuts[49] if cuts else only,
            "p99": cuts[98] if cuts else only,
        }


class SimClock:
    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@dataclass
class _Run:
    run_id: str
    tables: list[str]
    execution_class: str
    queued_at: float
    started_at: float = 0.0
    active: int = 0
    queue: list[str] = field(default_factory=list)


class Simulation:
    """One scenario against DynamoDB at `endpoint` (fresh tables each time)."""

    def __init__(
        self,
        endpoint: str,
        scenario: Scenario,
        model: RunModel,
        *,
        minutes: float,
        warmup_minutes: float,
        files_per_minute: float = 1.0,
        file_bytes: int = 1_000_000,
        seed: int = 7,
        progress: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.scenario, self.model = scenario, model
        self.horizon, self.warmup = minutes * 60, warmup_minutes * 60
        self.period, self.file_bytes = 60 / files_per_minute, file_bytes
        self.rng = random.Random(seed)
        self.progress = progress
        self.clock = SimClock(float(int(datetime(2026, 11, 23, tzinfo=UTC).timestamp())))
        self.t0 = self.clock.now
        self.dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
        names = {
            what: f"lakeloader-sim-{what}-{uuid.uuid4().hex[:8]}" for what in ("config", "ledger", "runs")
        }
        keys = {"config": ("table_id",), "ledger": ("table_id", "object_id"), "runs": ("table_id", "run_id")}
        for what, name in names.items():
            self._create_table(name, keys[what])
        self.table_ids = [f"sim.t{i:04d}" for i in range(scenario.simulated_tables)]
        lake = LakeConfig(
            tables=[
                {
                    "id": t,
                    "source": {"prefix": f"sim/{t.split('.')[1]}/", "format": "parquet", "cdc": "dms"},
                    "target": {"database": "sim", "table": t.split(".")[1]},
                    "keys": ["id"],
                    "trigger": {
                        "min_interval_seconds": scenario.window_seconds,
                        "execution_class": scenario.execution_class,
                    },
                }
                for t in self.table_ids
            ]
        )
        sync_items(names["config"], config_items(lake), client=self.dynamodb)
        settings = TriggerSettings(
            config_table=names["config"],
            ledger_table=names["ledger"],
            runs_table=names["runs"],
            glue_job_name="lakeloader-sim-ingest",
            raw_bucket=RAW,
            log_level="WARNING",
            config_cache_seconds=86400,
            tables_per_run=scenario.tables_per_run,
        )
        self.trigger = Trigger(settings, dynamodb=self.dynamodb, glue=self, clock=self.clock)
        self.ledger = Ledger(self.dynamodb, names["ledger"], names["runs"], clock=self.clock)
        self.events: list[tuple[float, int, str, Any]] = []
        self.seq = itertools.count()
        self.arrived: dict[str, float] = {}  # object key -> arrival time
        self.committed: dict[str, int] = {}  # object key -> how many batches committed it
        self.committed_at: dict[str, float] = {}  # object key -> when its batch committed
        self.finished: list[tuple[_Run, float]] = []

    def _create_table(self, name: str, keys: tuple[str, ...]) -> None:
        self.dynamodb.create_table(
            TableName=name,
            KeySchema=[
                {"AttributeName": k, "KeyType": kind} for k, kind in zip(keys, KEY_TYPES, strict=False)
            ],
            AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in keys],
            BillingMode="PAY_PER_REQUEST",
        )

    # -- the event loop ------------------------------------------------------------------

    def _at(self, when: float, kind: str, payload: Any = None) -> None:
        heapq.heappush(self.events, (when, next(self.seq), kind, payload))

    def run(self) -> Result:
        for table_id in self.table_ids:
            phase = self.rng.uniform(0, self.period)
            for n in range(int((self.horizon - phase) // self.period) + 1):
                self._at(self.t0 + phase + n * self.period, "arrival", (table_id, n))
        sweeps = int(self.horizon // self.scenario.sweep_seconds) + 1
        for n in range(sweeps):
            self._at(self.t0 + n * self.scenario.sweep_seconds, "sweep")
        self._at(self.t0 + self.horizon, "horizon")
        drain_until = (
            self.t0 + self.horizon + 3 * max(self.scenario.window_seconds, self.scenario.sweep_seconds)
        )
        drain_until += 600
        handled = 0
        while self.events:
            when, _, kind, payload = heapq.heappop(self.events)
            if when > drain_until:
                break
            self.clock.now = when
            getattr(self, f"_on_{kind}")(payload)
            handled += 1
            if handled % 2000 == 0:
                self.progress(
                    f"{self.scenario.name}: {(when - self.t0) / 60:.0f} of {self.horizon / 60:.0f} min"
                )
        return self._result()

    def _on_horizon(self, _: Any) -> None:
        # after the last arrival, sweeps go on until every object is committed
        n = int(self.horizon // self.scenario.sweep_seconds) + 1
        while (when := self.t0 + n * self.scenario.sweep_seconds) <= self.t0 + self.horizon + 7200:
            self._at(when, "sweep")
            n += 1

    def _on_arrival(self, payload: tuple[str, int]) -> None:
        table_id, n = payload
        key = f"sim/{table_id.split('.')[1]}/{n:06d}.parquet"
        self.arrived[key] = self.clock.now
        record = {
            "eventSource": "aws:s3",
            "eventName": "ObjectCreated:Put",
            "eventTime": datetime.fromtimestamp(self.clock.now, tz=UTC).isoformat(),
            "s3": {
                "bucket": {"name": RAW},
                "object": {"key": quote_plus(key), "size": self.file_bytes, "eTag": uuid.uuid4().hex},
            },
        }
        self.trigger.handle(
            ObjectsArrived.read({"Records": [record]}, correlation_id=f"arrival-{table_id}-{n}")
        )

    def _on_sweep(self, _: Any) -> None:
        self.trigger.sweep(SweepRequest(correlation_id=f"sweep-{int(self.clock.now)}"))

    # -- Glue, simulated --------------------------------------------------------------------

    def start_job_run(self, *, JobName: str, Arguments: dict[str, str], **options: Any) -> dict[str, str]:  # noqa: N803
        execution_class = options.get("ExecutionClass", "STANDARD")
        tables = Arguments["--lakeloader_table_id"].split(",")
        run = _Run(f"jr_{next(self.seq)}", tables, execution_class, queued_at=self.clock.now)
        wait = self.model.flex_wait_seconds if execution_class == "FLEX" else 0.0
        self._at(self.clock.now + wait, "run_start", run)
        return {"JobRunId": run.run_id}

    def _on_run_start(self, run: _Run) -> None:
        run.started_at = self.clock.now
        run.queue = list(run.tables)
        self._at(self.clock.now + self.model.startup_seconds, "session_ready", run)

    def _on_session_ready(self, run: _Run) -> None:
        for _ in range(min(self.scenario.parallel_tables, len(run.queue))):
            run.active += 1
            self._next_table(run)

    def _next_table(self, run: _Run) -> None:
        """Start the run's next table in a free slot (drain_table's start), or free the slot."""
        while run.queue:
            table_id = run.queue.pop(0)
            ledger_run = new_run_id(self.clock.now)
            if not self.ledger.acquire_lock(table_id, ledger_run):
                continue  # another run holds the table; it drains it
            self.ledger.start_run(table_id, ledger_run, run.run_id, engine="glue", engine_run_id=run.run_id)
            self._batch(run, table_id, ledger_run)
            return
        run.active -= 1
        if run.active == 0:
            self.finished.append((run, self.clock.now))

    def _batch(self, run: _Run, table_id: str, ledger_run: str) -> None:
        batch = self.ledger.next_batch(table_id, ledger_run)
        if not batch:  # next_batch released the lock
            self.ledger.end_run(table_id, ledger_run, RUN_SUCCEEDED)
            self._next_table(run)
            return
        duration = self.model.batch_duration(sum(o.size or 0 for o in batch))
        self._at(self.clock.now + duration, "batch_done", (run, table_id, ledger_run, batch))

    def _on_batch_done(self, payload: tuple) -> None:
        run, table_id, ledger_run, batch = payload
        for obj in self.ledger.finish(table_id, batch, ledger_run, DONE):
            self.committed[obj.key] = self.committed.get(obj.key, 0) + 1
            self.committed_at.setdefault(obj.key, self.clock.now)
        self._batch(run, table_id, ledger_run)

    # -- figures -----------------------------------------------------------------------------

    def _result(self) -> Result:
        start, end = self.t0 + self.warmup, self.t0 + self.horizon
        runs = [(r, done) for r, done in self.finished if start <= r.started_at < end]
        billed = [max(MINIMUM_BILLED_SECONDS, done - r.started_at) for r, done in runs]
        committed_at = self.committed_at
        measured = [k for k, t in self.arrived.items() if start <= t < end]
        return Result(
            scenario=self.scenario,
            measured_seconds=end - start,
            runs=len(runs),
            billed_seconds=sum(billed),
            dpu_seconds=sum(billed) * self.model.dpus,
            dollars=sum(
                self.model.cost(b, run.execution_class) for b, (run, _) in zip(billed, runs, strict=True)
            ),
            freshness=sorted(committed_at[k] - self.arrived[k] for k in measured if k in committed_at),
            objects=len(measured),
            double_applied=sum(1 for n in self.committed.values() if n > 1),
            left_pending=sum(1 for k in self.arrived if k not in committed_at),
        )
