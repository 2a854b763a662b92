"""Triggers: the S3-arrival Lambda, its S3 notifications, DLQ and schedules.

* Object-created events under the raw prefixes invoke `lambda/s3_arrival` (asynchronously:
  failed invocations are retried, then land in the SQS dead-letter queue).
* By default the prefixes are the source folders of the config (`crm/`, `sales/`, ...):
  objects of unknown tables under a known source still reach the Lambda, which logs and
  counts them; the stage's `raw_event_prefixes` overrides the list (`""`: the whole bucket).
* A sweep schedule invokes the Lambda to start runs for tables whose objects stayed pending; it
  also starts the runs of batched tables (`trigger.min_interval_seconds`), grouping due tables
  `batching.tables_per_run` to a run, so such a table needs a sweep at least as often as its window.
* The maintenance schedule starts the maintenance state machine for every enabled table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aws_cdk import Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.catalog import source_of, sources
from infra.config_store import ConfigStore
from infra.functions import PythonFunction, lambda_source
from infra.nag import acknowledge
from infra.network import StageNetwork
from infra.processing import Processing
from infra.settings import ArrivalLambdaSettings, SettingsError
from infra.settings_names import Retention, StageNames
from infra.storage import LakeStorage
from lakeloader.config import LakeConfig
from lakeloader.config.canary import CANARY_PREFIX
from lakeloader.control import contract

BUCKET_NOTIFICATIONS_HANDLER = "BucketNotificationsHandler050a0587b7544547bf325f094a3db834"


@dataclass(frozen=True, kw_only=True)
class TriggerSettings:
    """What Triggers takes of the stage: the Lambda's settings, its event prefixes and the schedules."""

    names: StageNames
    retention: Retention
    arrival_lambda: ArrivalLambdaSettings
    tables_per_run: int  # batching.tables_per_run: tables due together that one run drains
    raw_event_prefixes: list[str]  # []: each source folder of the config
    sweep_schedule: str | None  # None: "off"
    maintenance_schedule: str | None


def event_prefixes(settings: TriggerSettings, lake: LakeConfig) -> list[str]:
    """The key prefixes whose object-created events invoke the Lambda (no two overlapping); the
    canaries' always (lakeloader verify)."""
    configured = settings.raw_event_prefixes
    if not configured:
        wanted = [f"{source}/" for source in sources(lake)]
        wanted += [source_of(s.prefix) + "/" for s in lake.sources]  # sources: entries find tables there
    else:
        wanted = [p.lstrip("/") for p in configured]
    wanted.append(CANARY_PREFIX)
    if "" in wanted:
        return [""]
    # S3 rejects overlapping filters of the same event type: keep only the outermost prefixes.
    kept: list[str] = []
    for prefix in sorted(set(wanted), key=lambda p: (len(p), p)):
        if not any(prefix.startswith(outer) for outer in kept):
            kept.append(prefix)
    uncovered = [t.id for t in lake.tables if not any(t.source.prefix.startswith(p) for p in kept)]
    uncovered += [f"source {s.id}" for s in lake.sources if not any(s.prefix.startswith(p) for p in kept)]
    if uncovered:
        raise SettingsError(
            f"cdk.json context lakeloader:stages.{settings.names.stage}.raw_event_prefixes: tables "
            f"{', '.join(uncovered)} lie outside {kept}; their files would never trigger a run"
        )
    return sorted(kept)


_RATE = re.compile(r"^rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


def check_batching_windows(settings: TriggerSettings, lake: LakeConfig) -> None:
    """Refuse batched tables whose pending objects no sweep would pick up in time.

    A batched table's runs are started by the sweep only: with the sweep off its objects would
    wait forever, and with a rate() sweep slower than the window the window would mean nothing.
    """
    batched = [t for t in lake.tables if t.enabled and t.trigger.min_interval_seconds > 0]
    if not batched:
        return
    key = f"cdk.json context lakeloader:stages.{settings.names.stage}.sweep_schedule"
    schedule = settings.sweep_schedule
    if schedule is None:
        raise SettingsError(
            f"{key} is off, but table(s) {', '.join(t.id for t in batched)} set "
            "trigger.min_interval_seconds: only the sweep starts their runs"
        )
    rate = _RATE.match(schedule)
    if rate is None:  # a cron() sweep: its spacing is the user's to judge
        return
    every = int(rate.group(1)) * _UNIT_SECONDS[rate.group(2).rstrip("s")]
    short = [t.id for t in batched if t.trigger.min_interval_seconds < every]
    if short:
        raise SettingsError(
            f"{key} is {schedule} ({every} s), longer than the trigger.min_interval_seconds of table(s) "
            f"{', '.join(short)}: set the sweep to run at least that often, or widen their windows"
        )


class Triggers(Construct):
    """The S3-arrival Lambda with its dead-letter queue, the raw bucket's notifications and the schedules."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: TriggerSettings,
        lake: LakeConfig,
        storage: LakeStorage,
        store: ConfigStore,
        processing: Processing,
        maintenance: sfn.IStateMachine,
        network: StageNetwork | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.settings = settings
        check_batching_windows(settings, lake)
        self._arrival_function(storage, store, processing, network)
        self._notifications(lake, storage)
        self._schedules(maintenance)

    def _arrival_function(
        self,
        storage: LakeStorage,
        store: ConfigStore,
        processing: Processing,
        network: StageNetwork | None,
    ) -> None:
        """The Lambda, its dead-letter queue, and what its role may do: the owners' grants."""
        names, settings = self.settings.names, self.settings.arrival_lambda
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            queue_name=names.resource_name("s3-arrival-dlq"),
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=storage.key,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )
        self.arrival = PythonFunction(
            self,
            "Arrival",
            names=names,
            retention=self.settings.retention,
            name="s3-arrival",
            description="Records raw objects in the ledger and starts their tables' Glue/EMR runs",
            source_dir=lambda_source("s3_arrival"),
            key=storage.key,
            network=network,
            environment={
                contract.ENV_CONFIG_TABLE: store.config_table.table_name,
                contract.ENV_LEDGER_TABLE: store.ledger_table.table_name,
                contract.ENV_RUNS_TABLE: store.runs_table.table_name,
                **processing.launch_environment,
                contract.ENV_RAW_BUCKET: storage.raw.bucket_name,
                contract.ENV_POWERTOOLS_SERVICE_NAME: contract.ARRIVAL_SERVICE_NAME,
                contract.ENV_POWERTOOLS_METRICS_NAMESPACE: contract.METRICS_NAMESPACE,
                contract.ENV_LOG_LEVEL: settings.log_level,
                contract.ENV_TABLES_PER_RUN: str(self.settings.tables_per_run),
            },
            timeout=Duration.seconds(settings.timeout_seconds),
            memory_mb=settings.memory_mb,
            reserved_concurrency=settings.reserved_concurrency,
            dead_letter_queue=self.dead_letter_queue,
            retry_attempts=settings.retry_attempts,
            max_event_age=Duration.minutes(settings.max_event_age_minutes),
        )
        self.function = self.arrival.function
        role = self.arrival.role
        store.grant_config_read(role)
        store.grant_found_tables_write(role)
        store.grant_ledger_write(role)
        storage.grant_key_use(role)
        processing.grant_start_ingest(role)

    def _notifications(self, lake: LakeConfig, storage: LakeStorage) -> None:
        """Object-created events under the event prefixes invoke the Lambda."""
        self.event_prefixes = event_prefixes(self.settings, lake)
        destination = s3n.LambdaDestination(self.function)
        for prefix in self.event_prefixes:
            filters = [s3.NotificationKeyFilter(prefix=prefix)] if prefix else []
            storage.raw.add_event_notification(s3.EventType.OBJECT_CREATED, destination, *filters)
        # CDK's singleton handler that puts the bucket's notification configuration.
        notifications_handler = Stack.of(self).node.try_find_child(BUCKET_NOTIFICATIONS_HANDLER)
        if notifications_handler is not None:
            acknowledge(
                notifications_handler,
                "IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
                reason=(
                    "CDK's bucket-notifications handler (a deploy-time custom resource, not lakeloader code) "
                    "uses the AWS managed basic execution role for its logs; CDK offers no way to replace "
                    "it."
                ),
            )

    def _schedules(self, maintenance: sfn.IStateMachine) -> None:
        """The sweep (the Lambda) and the maintenance schedule (the state machine), each unless "off"."""
        settings, names = self.settings, self.settings.names
        self.sweep_rule: events.Rule | None = None
        if settings.sweep_schedule:
            self.sweep_rule = events.Rule(
                self,
                "SweepSchedule",
                rule_name=names.resource_name("s3-arrival-sweep"),
                description="Starts runs for tables whose raw objects stayed pending (lakeloader sweep)",
                schedule=events.Schedule.expression(settings.sweep_schedule),
                targets=[
                    targets.LambdaFunction(
                        self.function,
                        event=events.RuleTargetInput.from_object(contract.SWEEP_EVENT),
                        retry_attempts=2,
                        max_event_age=Duration.hours(1),
                    )
                ],
            )
        self.maintenance_rule: events.Rule | None = None
        if settings.maintenance_schedule:
            self.maintenance_rule = events.Rule(
                self,
                "MaintenanceSchedule",
                rule_name=names.resource_name("maintenance-schedule"),
                description="Runs lakeloader's Iceberg maintenance for every enabled table",
                schedule=events.Schedule.expression(settings.maintenance_schedule),
                targets=[
                    targets.SfnStateMachine(
                        maintenance,
                        input=events.RuleTargetInput.from_object({"table_id": ""}),
                        retry_attempts=2,
                        max_event_age=Duration.hours(2),
                    )
                ],
            )
