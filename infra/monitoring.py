"""Monitoring: the alarm topic, failure notifications, alarms and the dashboard.

* `AlarmTopic`: the SNS topic every alarm and failure notification goes to (KMS, TLS-only;
  an optional e-mail subscription from the stage's `alarm_email`).
* `Monitoring`: EventBridge rules on failed Glue job runs and EMR Serverless job runs
  (notify the topic; their trigger counts are alarmed too), alarms on the S3-arrival
  Lambda's errors and throttles, the dead-letter queue's depth and failed maintenance
  executions, and a dashboard of runs, rows merged and failures.

The jobs publish `RunsSucceeded`, `RunsFailed`, `RowsMerged`, `FilesQuarantined` and
`ReconciliationMismatch`, the sweep `PendingAgeSeconds` and the S3-arrival Lambda `TableHeld` to the
`lakeloader` namespace (lakeloader.control.contract.METRICS_NAMESPACE) with the dimensions Ledger (this
stage's ledger table) and TableId; the sweep also `PendingAgeOverFreshness` for tables with
`trigger.freshness_minutes`. One alarm each, over every table (Metrics Insights, grouped by TableId;
the notification names the table): quarantined files, a commit that did not reconcile, lag past a
table's freshness, a found table held for its keys. Nothing here grows with the tables
(docs/scale.md). With readers' grants on tables by name (infra.reader_grants), one more on its
`ReaderGrantsUngranted`: a deploy never fails for a grant, so this alarm is what tells the operator
that one is not applied.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.settings_names import StageNames
from infra.storage import LakeStorage
from lakeloader.control.contract import (
    FILES_QUARANTINED_METRIC,
    METRIC_DIMENSIONS,
    METRICS_NAMESPACE,
    PENDING_AGE_METRIC,
    PENDING_AGE_OVER_FRESHNESS_METRIC,
    READER_GRANTS_UNGRANTED_METRIC,
    RECONCILIATION_MISMATCH_METRIC,
    TABLE_HELD_METRIC,
)

FIVE_MINUTES = Duration.minutes(5)
ONE_HOUR = Duration.hours(1)
GLUE_FAILED_STATES = ["FAILED", "TIMEOUT", "ERROR"]
EMR_FAILED_STATES = ["FAILED"]
PUBLISHER_KEY_ACTIONS = ["kms:Decrypt", "kms:GenerateDataKey*"]


@dataclass(frozen=True)
class _TriggerMetrics:
    """The trigger's and maintenance's metrics that are both alarmed and graphed."""

    arrival_errors: cloudwatch.IMetric
    arrival_throttles: cloudwatch.IMetric
    dlq_depth: cloudwatch.IMetric
    maintenance_failed: cloudwatch.IMetric


class AlarmTopic(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        names: StageNames,
        alarm_email: str | None,
        storage: LakeStorage,
    ) -> None:
        super().__init__(scope, construct_id)
        key = storage.key
        self.topic = sns.Topic(
            self,
            "Topic",
            topic_name=names.resource_name("alarms"),
            display_name=f"lakeloader {names.stage} alarms",
            master_key=key,
            enforce_ssl=True,
        )
        # CloudWatch alarms and EventBridge rules publish to the encrypted topic: each principal's statement
        # is the one Amazon SNS documents ("Enable compatibility between event sources from AWS services
        # and encrypted topics"), with no condition. The topic's own policy decides who may publish; a
        # condition the page does not show (aws:SourceAccount) is one AWS does not promise to send, and
        # a request without it would drop every notification silently.
        storage.allow_on_key(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarms",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=PUBLISHER_KEY_ACTIONS,
                resources=["*"],
            )
        )
        storage.allow_on_key(
            iam.PolicyStatement(
                sid="AllowEventBridgeRules",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=PUBLISHER_KEY_ACTIONS,
                resources=["*"],
            )
        )
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))


class Monitoring(Construct):
    """Failure notifications, alarms (each notifying the topic) and the stage's dashboard."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        names: StageNames,
        max_attempts: int,  # failures before a raw file is quarantined (FileQuarantined)
        topic: sns.ITopic,
        arrival: lambda_.IFunction,
        dead_letter_queue: sqs.IQueue,
        glue_jobs: list[glue.IJob],
        emr_application_id: str,
        maintenance: sfn.StateMachine,
        ledger_table_name: str,
        reader_grants: lambda_.IFunction | None = None,
    ) -> None:
        """`reader_grants`: the readers' grants Lambda (infra.reader_grants), where the stage has one."""
        super().__init__(scope, construct_id)
        self._names = names
        self._max_attempts = max_attempts
        self._action = cw_actions.SnsAction(topic)
        self._ledger_table_name = ledger_table_name
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        job_failures = self._job_failure_rules(topic, glue_jobs, emr_application_id)
        trigger_metrics = self._trigger_and_maintenance_alarms(arrival, dead_letter_queue, maintenance)
        self._table_alarms()
        if reader_grants is not None:
            self._reader_grants_alarm(reader_grants)
        self._dashboard(arrival, job_failures, trigger_metrics)

    def _alarm(
        self,
        construct_id: str,
        name: str,
        metric: cloudwatch.IMetric,
        description: str,
        *,
        threshold: float = 1,
        evaluation_periods: int = 1,
    ) -> cloudwatch.Alarm:
        """An alarm at `threshold` or above that notifies the topic (no data: not breaching)."""
        created = cloudwatch.Alarm(
            self,
            construct_id,
            alarm_name=self._names.resource_name(name),
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        created.add_alarm_action(self._action)
        self.alarms[name] = created
        return created

    def _job_failure_rules(
        self, topic: sns.ITopic, glue_jobs: list[glue.IJob], emr_application_id: str
    ) -> list[cloudwatch.Metric]:
        """Failed job runs: EventBridge -> SNS, and an alarm on each rule's matches (returned)."""
        names = self._names
        self.glue_failed_rule = events.Rule(
            self,
            "GlueJobFailed",
            rule_name=names.resource_name("glue-job-failed"),
            description="A lakeloader Glue job run failed, timed out or errored",
            event_pattern=events.EventPattern(
                source=["aws.glue"],
                detail_type=["Glue Job State Change"],
                detail={"jobName": [job.job_name for job in glue_jobs], "state": GLUE_FAILED_STATES},
            ),
            targets=[
                targets.SnsTopic(
                    topic,
                    message=events.RuleTargetInput.from_text(
                        f"lakeloader {names.stage}: Glue job "
                        f"{events.EventField.from_path('$.detail.jobName')} "
                        f"run {events.EventField.from_path('$.detail.jobRunId')} ended "
                        f"{events.EventField.from_path('$.detail.state')}: "
                        f"{events.EventField.from_path('$.detail.message')}"
                    ),
                )
            ],
        )
        self.emr_failed_rule = events.Rule(
            self,
            "EmrJobFailed",
            rule_name=names.resource_name("emr-job-failed"),
            description="A lakeloader EMR Serverless job run failed",
            event_pattern=events.EventPattern(
                source=["aws.emr-serverless"],
                detail_type=["EMR Serverless Job Run State Change"],
                detail={"applicationId": [emr_application_id], "state": EMR_FAILED_STATES},
            ),
            targets=[
                targets.SnsTopic(
                    topic,
                    message=events.RuleTargetInput.from_text(
                        f"lakeloader {names.stage}: EMR Serverless job run "
                        f"{events.EventField.from_path('$.detail.jobRunId')} "
                        f"({events.EventField.from_path('$.detail.jobRunName')}) ended "
                        f"{events.EventField.from_path('$.detail.state')}: "
                        f"{events.EventField.from_path('$.detail.stateDetails')}"
                    ),
                )
            ],
        )
        glue_failures = self._rule_matches(self.glue_failed_rule, "Glue job runs failed")
        emr_failures = self._rule_matches(self.emr_failed_rule, "EMR job runs failed")
        self._alarm(
            "GlueJobFailuresAlarm", "glue-job-failures", glue_failures, "A lakeloader Glue job run failed."
        )
        self._alarm(
            "EmrJobFailuresAlarm",
            "emr-job-failures",
            emr_failures,
            "A lakeloader EMR Serverless job run failed.",
        )
        return [glue_failures, emr_failures]

    def _trigger_and_maintenance_alarms(
        self, arrival: lambda_.IFunction, dead_letter_queue: sqs.IQueue, maintenance: sfn.StateMachine
    ) -> _TriggerMetrics:
        """The S3-arrival Lambda's errors and throttles, its DLQ's depth, failed maintenance."""
        metrics = _TriggerMetrics(
            arrival_errors=arrival.metric_errors(
                period=FIVE_MINUTES, statistic="Sum", label="S3-arrival errors"
            ),
            arrival_throttles=arrival.metric_throttles(
                period=FIVE_MINUTES, statistic="Sum", label="S3-arrival throttles"
            ),
            dlq_depth=dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=FIVE_MINUTES, statistic="Maximum", label="S3-arrival DLQ depth"
            ),
            maintenance_failed=maintenance.metric_failed(
                period=FIVE_MINUTES, statistic="Sum", label="Maintenance failed"
            ),
        )
        maintenance_timed_out = maintenance.metric_timed_out(
            period=FIVE_MINUTES, statistic="Sum", label="Maintenance timed out"
        )
        self._alarm(
            "ArrivalErrorsAlarm",
            "s3-arrival-errors",
            metrics.arrival_errors,
            "The S3-arrival Lambda failed; Lambda retries it, then sends the event to the dead-letter queue.",
        )
        self._alarm(
            "ArrivalThrottlesAlarm",
            "s3-arrival-throttles",
            metrics.arrival_throttles,
            "The S3-arrival Lambda was throttled: by its reserved concurrency if one is set, else by the "
            "account's concurrency quota; raise whichever limits it if this persists.",
        )
        self._alarm(
            "DeadLetterQueueAlarm",
            "s3-arrival-dlq",
            metrics.dlq_depth,
            "S3 events the Lambda could not process are waiting in the dead-letter queue; redrive them.",
        )
        self._alarm(
            "MaintenanceFailedAlarm",
            "maintenance-failed",
            cloudwatch.MathExpression(
                expression="failed + timedout",
                using_metrics={"failed": metrics.maintenance_failed, "timedout": maintenance_timed_out},
                period=FIVE_MINUTES,
                label="Maintenance executions failed or timed out",
            ),
            "A maintenance execution failed or timed out.",
        )
        return metrics

    def _per_table_query(self, metric_name: str, function: str) -> cloudwatch.MathExpression:
        """A Metrics Insights query of one metric of every table of this stage's ledger, one time
        series per table (`GROUP BY TableId`); the largest first, as a query returns at most 500."""
        namespace, ledger_dimension, table_dimension = METRICS_NAMESPACE, *METRIC_DIMENSIONS
        return cloudwatch.MathExpression(
            expression=(
                f'SELECT {function}("{metric_name}") '
                f'FROM SCHEMA("{namespace}", "{ledger_dimension}", "{table_dimension}") '
                f"WHERE \"{ledger_dimension}\" = '{self._ledger_table_name}' "
                f'GROUP BY "{table_dimension}" ORDER BY {function}() DESC'
            ),
            period=FIVE_MINUTES,
            label=metric_name,
            using_metrics={},
        )

    def _table_alarms(self) -> None:
        """Quarantined files, a commit that did not reconcile, lag past a table's freshness_minutes, a
        found table held for its keys: one alarm each over every table of the stage, declared or found,
        however many there are.

        Each is a CloudWatch alarm on a Metrics Insights query grouped by TableId: every table's time
        series is a contributor that goes into ALARM and notifies the topic by itself, its TableId
        among the notification's attributes ("Create a CloudWatch alarm based on a Metrics Insights
        query", https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Create_Metrics_Insights_Alarm.html;
        SNS at contributor level: "Acting on alarm changes",
        https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Acting_Alarm_Changes.html).
        Per-table alarms cost three resources a table and stopped a stage at about 140 tables."""
        names = self._names
        status = f"lakeloader status --stage {names.stage}"
        self._alarm(
            "QuarantinedAlarm",
            "quarantined",
            self._per_table_query(FILES_QUARANTINED_METRIC, "SUM"),
            f"A raw file of the table this notification names (TableId) failed {self._max_attempts} "
            f"times and is quarantined: {status} says why; fix it, then lakeloader requeue or skip.",
        )
        self._alarm(
            "ReconciliationAlarm",
            "reconciliation",
            self._per_table_query(RECONCILIATION_MISMATCH_METRIC, "SUM"),
            "A commit of the table this notification names (TableId; merge and scd2 tables) disagreed "
            "with what its files asked for (reconcile.on_mismatch alarm: published; fail: not published): "
            f"{status} shows its last reconciliation, the job's log what differed.",
        )
        self._alarm(
            "StaleAlarm",
            "stale",
            self._per_table_query(PENDING_AGE_OVER_FRESHNESS_METRIC, "MAX"),
            "The table this notification names (TableId) has a file waiting longer than its trigger."
            f"freshness_minutes (the sweep's {PENDING_AGE_OVER_FRESHNESS_METRIC} reached 1): {status}.",
            evaluation_periods=3,  # the sweep measures it every 10-15 minutes
        )
        self._alarm(
            "HeldAlarm",
            "held",
            self._per_table_query(TABLE_HELD_METRIC, "SUM"),
            "A source found the table this notification names (TableId) and holds it: no entry of the "
            "source's keys gives its key columns, so its files stay pending and nothing loads. "
            f"{status} prints the line to add under the source's keys; deploy, and the next sweep loads "
            f"it. (The S3-arrival Lambda writes {TABLE_HELD_METRIC} once, when it records the table.)",
        )

    def _reader_grants_alarm(self, function: lambda_.IFunction) -> None:
        """Readers' grants the Lambda could not apply (denied, no grant option, an error other than a
        table not there yet): it reports them at each deploy and each hourly run as
        `ReaderGrantsUngranted` (lambda/reader_grants), and the deploy succeeds regardless. An hour's
        period holds one hourly run, so the alarm stays in ALARM, notifying once, until a run applies
        them all (or `lakeloader doctor` shows the administrator's command for each)."""
        self._alarm(
            "ReaderGrantsUngrantedAlarm",
            "reader-grants-ungranted",
            cloudwatch.Metric(
                namespace=METRICS_NAMESPACE,
                metric_name=READER_GRANTS_UNGRANTED_METRIC,
                dimensions_map={"Function": function.function_name},
                statistic="Maximum",
                period=ONE_HOUR,
                label="Reader grants not applied",
            ),
            f"A reader's Lake Formation grant is not applied (denied, or the grants Lambda lacks the grant "
            f"option): lakeloader doctor --stage {self._names.stage} names each, with the command a data "
            "lake administrator runs to apply it.",
        )

    def _search(self, metric_name: str, label: str, statistic: str = "Sum") -> cloudwatch.MathExpression:
        """A metric of every table of this stage's ledger (a dashboard line per table)."""
        ledger = self._ledger_table_name
        query = f'Namespace="{METRICS_NAMESPACE}" MetricName="{metric_name}" Ledger="{ledger}"'
        return cloudwatch.MathExpression(
            expression=f"SEARCH('{query}', '{statistic}', 300)",
            label=label,
            period=FIVE_MINUTES,
            using_metrics={},
        )

    def _dashboard(
        self,
        arrival: lambda_.IFunction,
        job_failures: list[cloudwatch.Metric],
        trigger: _TriggerMetrics,
    ) -> None:
        """Runs, rows merged and quarantined, raw arrivals, lag, failures and the alarms' states."""
        search, stage_name = self._search, self._names.stage
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=self._names.resource_name("dashboard"),
            default_interval=Duration.days(1),
        )
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=f"# lakeloader {stage_name}\nRaw arrivals, job runs, rows merged and failures.",
                width=24,
                height=2,
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Runs",
                left=[search("RunsSucceeded", "succeeded"), search("RunsFailed", "failed")],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Rows merged, files quarantined",
                left=[search("RowsMerged", "rows merged")],
                right=[search(FILES_QUARANTINED_METRIC, "quarantined")],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Raw arrivals",
                left=[
                    arrival.metric_invocations(
                        period=FIVE_MINUTES, statistic="Sum", label="S3-arrival invocations"
                    )
                ],
                right=[arrival.metric_duration(period=FIVE_MINUTES, statistic="p95", label="duration p95")],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Lag: seconds the oldest file still to load has waited, per table",
                left=[search(PENDING_AGE_METRIC, "lag", "Maximum")],
                width=24,
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Failures",
                left=[*job_failures, trigger.arrival_errors, trigger.arrival_throttles],
                right=[trigger.dlq_depth, trigger.maintenance_failed],
                width=16,
            ),
            cloudwatch.AlarmStatusWidget(
                title="Alarms", alarms=list(self.alarms.values()), width=8, height=6
            ),
        )

    @staticmethod
    def _rule_matches(rule: events.Rule, label: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace="AWS/Events",
            metric_name="TriggeredRules",
            dimensions_map={"RuleName": rule.rule_name},
            statistic="Sum",
            period=FIVE_MINUTES,
            label=label,
        )
