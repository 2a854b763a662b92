"""The lakeloader stack: one per stage, composing one construct per concern."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Environment, Stack, Tags
from constructs import Construct

from infra.catalog import Catalog, CatalogSettings, raw_folders
from infra.config_store import ConfigStore
from infra.emr import check_emr_tables
from infra.erasure import ErasurePolicy
from infra.functions import own_cdk_function_logs
from infra.lake_formation import LakeFormationAccess
from infra.monitoring import AlarmTopic, Monitoring
from infra.network import StageNetwork
from infra.orchestration import MaintenanceWorkflow
from infra.processing import Processing, ProcessingSettings
from infra.readers import Readers, ReadersSettings
from infra.s3_tables import TableBucket, s3_tables_namespaces
from infra.s3_tables_teardown import TableBucketTeardown
from infra.settings import Stage
from infra.settings_lake import check_flex_tables, check_format_versions
from infra.storage import LakeStorage, StorageSettings
from infra.triggers import Triggers, TriggerSettings
from infra.verify_access import VerifyAccess
from infra.writers import Writers
from lakeloader.config import LakeConfig
from lakeloader.config.canary import with_canaries


class LakeloaderStack(Stack):
    """Storage, config store, catalog, processing, orchestration, triggers and monitoring of one stage."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: Stage,
        lake: LakeConfig,
        config_path: Path,
        env: Environment | None = None,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            stack_name=stage.prefix,
            description=f"lakeloader ({stage.name}): S3 raw zone -> CDC merge -> Apache Iceberg tables",
            termination_protection=stage.settings.retain,
            env=env,
        )
        self.stage = stage
        users = lake  # the config's own tables: what the EMR and Flex checks are about
        lake = with_canaries(lake)  # `lakeloader verify` (lakeloader.cli.verify) lands its canary files here
        # (Dashboards: CloudFormation's tag support for them is too new for cfn-lint's schema; Glue
        # connections take no tags in CloudFormation.)
        untagged = ["AWS::CloudWatch::Dashboard", "AWS::Glue::Connection"]
        for key, value in (("project", stage.project), ("stage", stage.name)):
            Tags.of(self).add(key, value, exclude_resource_types=untagged)

        self._storage(lake)
        self._config_and_catalog(lake)
        self.processing = Processing(
            self,
            "Processing",
            settings=processing_settings(stage),
            storage=self.storage,
            store=self.config_store,
            catalog=self.catalog,
            raw_prefixes=raw_folders(lake),
            network=self.network,
            table_bucket=self.table_bucket,
        )
        emr_conf = self.processing.emr.lakeloader_conf
        check_emr_tables(stage.names, stage.settings.emr, users, emr_conf)  # the EMR canary runs only
        check_flex_tables(stage, users)  # where a table of the stage does (lakeloader.verify)
        check_format_versions(stage, users)
        self._access(lake)
        self._operations(lake)
        self._verify_access()
        # Last: every construct that brings a CDK-provided Lambda exists by now.
        self.cdk_function_logs = own_cdk_function_logs(
            self, names=stage.names, retention=stage.retention, key=self.storage.key
        )
        self._outputs(config_path)

    # --- the steps of __init__: each construct gets its own few settings of the stage -----------

    def _storage(self, lake: LakeConfig) -> None:
        """The key and buckets, the network if the stage has one, the table bucket if a table needs it."""
        stage, settings = self.stage, self.stage.settings
        self.storage = LakeStorage(self, "Storage", settings=storage_settings(stage))
        self.network = None
        if settings.network is not None:
            self.network = StageNetwork(
                self,
                "Network",
                names=stage.names,
                retention=stage.retention,
                network=settings.network,
                lake_formation=settings.lake_formation,
                key=self.storage.key,
                has_table_bucket=bool(s3_tables_namespaces(lake)),
            )
        self.table_bucket = None  # target.storage: s3_tables
        if s3_tables_namespaces(lake):
            self.table_bucket = TableBucket(
                self,
                "S3Tables",
                names=stage.names,
                retention=stage.retention,
                settings=settings.s3_tables,
                lake=lake,
                storage=self.storage,
            )
            if not settings.retain:  # a dev stage's bucket goes with the stack: empty it first
                TableBucketTeardown(
                    self,
                    "S3TablesTeardown",
                    names=stage.names,
                    retention=stage.retention,
                    bucket=self.table_bucket,
                    key=self.storage.key,
                )

    def _config_and_catalog(self, lake: LakeConfig) -> None:
        """The config store, the Glue catalog and the erasure policy over both stores of tables."""
        stage = self.stage
        self.config_store = ConfigStore(
            self,
            "ConfigStore",
            names=stage.names,
            retention=stage.retention,
            lake=lake,
            key=self.storage.key,
            network=self.network,
        )
        self.catalog = Catalog(
            self, "Catalog", settings=catalog_settings(stage), lake=lake, storage=self.storage
        )
        self.erasure = ErasurePolicy(
            self,
            "Erasure",
            names=stage.names,
            storage=self.storage,
            catalog=self.catalog,
            table_bucket=self.table_bucket,
        )

    def _access(self, lake: LakeConfig) -> None:
        """Lake Formation mode's grants, the readers and the writers, each where the stage asks for it."""
        stage, settings = self.stage, self.stage.settings
        self.lake_formation = None
        if settings.lake_formation:
            self.lake_formation = LakeFormationAccess(
                self,
                "LakeFormation",
                names=stage.names,
                storage=self.storage,
                catalog=self.catalog,
                job_roles=[self.processing.glue_role, self.processing.emr_role],
            )
        self.readers = None
        if settings.readers:
            self.readers = Readers(
                self,
                "Readers",
                settings=readers_settings(stage),
                lake=lake,
                storage=self.storage,
                catalog=self.catalog,
                table_bucket=self.table_bucket,
            )
        self.writers = None
        if settings.writers:
            self.writers = Writers(
                self, "Writers", names=stage.names, writers=settings.writers, storage=self.storage
            )

    def _operations(self, lake: LakeConfig) -> None:
        """The alarm topic, the maintenance workflow, the triggers and the alarms and dashboard."""
        stage, settings = self.stage, self.stage.settings
        self.alarm_topic = AlarmTopic(
            self, "AlarmTopic", names=stage.names, alarm_email=settings.alarm_email, storage=self.storage
        )
        self.maintenance = MaintenanceWorkflow(
            self,
            "Maintenance",
            names=stage.names,
            retention=stage.retention,
            maintain_timeout_minutes=settings.maintain.timeout_minutes,
            maintain_job=self.processing.maintain_job,
            topic=self.alarm_topic.topic,
            key=self.storage.key,
        )
        self.triggers = Triggers(
            self,
            "Triggers",
            settings=trigger_settings(stage),
            lake=lake,
            storage=self.storage,
            store=self.config_store,
            processing=self.processing,
            maintenance=self.maintenance.state_machine,
            network=self.network,
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            names=stage.names,
            max_attempts=settings.max_attempts,
            topic=self.alarm_topic.topic,
            arrival=self.triggers.function,
            dead_letter_queue=self.triggers.dead_letter_queue,
            glue_jobs=self.processing.glue_jobs,
            emr_application_id=self.processing.emr.application.attr_application_id,
            maintenance=self.maintenance.state_machine,
            ledger_table_name=self.config_store.ledger_table.table_name,
            reader_grants=self.readers.reader_grants.function.function
            if self.readers is not None and self.readers.reader_grants is not None
            else None,
        )

    def _verify_access(self) -> None:
        stage, settings = self.stage, self.stage.settings
        self.verify_access = VerifyAccess(
            self,
            "VerifyAccess",
            names=stage.names,
            lake_formation=settings.lake_formation,
            verify_role_arn=settings.verify_role_arn,
            storage=self.storage,
            store=self.config_store,
            catalog=self.catalog,
            processing=self.processing,
            dead_letter_queue_arn=self.triggers.dead_letter_queue.queue_arn,
            arrival=self.triggers.function,
            topic_arn=self.alarm_topic.topic.topic_arn,
            readers=self.readers,
        )

    def _outputs(self, config_path: Path) -> None:
        storage, store, processing = self.storage, self.config_store, self.processing
        outputs = {
            "RawBucketName": (
                storage.raw.bucket_name,
                "Raw zone: land files under <source>/<schema>/<table>/",
            ),
            "CuratedBucketName": (storage.curated.bucket_name, "Curated zone (Iceberg warehouse)"),
            "QuarantineBucketName": (storage.quarantine.bucket_name, "Rejected records and files"),
            "AssetsBucketName": (storage.assets.bucket_name, "Job temp files, Spark UI and EMR logs"),
            "AccessLogsBucketName": (storage.access_logs.bucket_name, "S3 server access logs"),
            "RawRoot": (storage.raw_root, "raw_root of the jobs on AWS"),
            "Warehouse": (storage.warehouse, "warehouse of the jobs on AWS"),
            "KmsKeyArn": (storage.key.key_arn, "The stage's customer-managed key"),
            "ConfigTableName": (store.config_table.table_name, f"Table config (from {config_path.name})"),
            "LedgerTableName": (store.ledger_table.table_name, "Object ledger"),
            "RunsTableName": (store.runs_table.table_name, "Run history"),
            "IngestJobName": (processing.ingest_job.job_name, "Glue ingest job"),
            "MaintainJobName": (processing.maintain_job.job_name, "Glue maintenance job"),
            "GlueJobRoleArn": (processing.glue_role.role_arn, "Role of the Glue jobs"),
            "EmrApplicationId": (
                processing.emr.application.attr_application_id,
                "EMR Serverless application",
            ),
            "EmrJobRoleArn": (processing.emr_role.role_arn, "Execution role of EMR Serverless job runs"),
            "GlueDatabases": (
                ",".join(f"{name}={db.database_name}" for name, db in self.catalog.databases.items()),
                "Config database = its Glue database in this stage",
            ),
            "EmrIngestEntryPoint": (processing.emr.ingest_entry_point.s3_object_url, "emr_steps/ingest.py"),
            "EmrMaintainEntryPoint": (
                processing.emr.maintain_entry_point.s3_object_url,
                "emr_steps/maintain.py",
            ),
            "ArrivalFunctionName": (self.triggers.function.function_name, "S3-arrival Lambda"),
            "ArrivalDeadLetterQueueUrl": (self.triggers.dead_letter_queue.queue_url, "S3-arrival DLQ"),
            "MaintenanceStateMachineArn": (
                self.maintenance.state_machine.state_machine_arn,
                'Maintenance: start with {"table_id": "<id>"} or {} for every table',
            ),
            "AlarmTopicArn": (self.alarm_topic.topic.topic_arn, "Alarms and failure notifications"),
            "DashboardName": (self.monitoring.dashboard.dashboard_name, "CloudWatch dashboard"),
        }
        if self.table_bucket is not None:
            outputs["TableBucketArn"] = (
                self.table_bucket.arn,
                "S3 Tables table bucket (target.storage: s3_tables)",
            )
        if self.catalog.database_prefix:  # (an output cannot be empty)
            outputs["GlueDatabasePrefix"] = (
                self.catalog.database_prefix,
                "Glue database name = this prefix + the config's database",
            )
        if processing.emr.image_pull_statement:
            outputs["EmrImageRepositoryPolicyStatement"] = (
                self.to_json_string(processing.emr.image_pull_statement),
                "Add to the ECR repository policy of emr.image_uri (docs/deploy.md)",
            )
        if storage.key_policy_statements:
            outputs["KeyPolicyStatements"] = (
                self.to_json_string([s.to_statement_json() for s in storage.key_policy_statements]),
                "Add to the key policy of encryption.customer_managed_key (docs/deploy.md#your-own-key)",
            )
        if self.readers is not None and self.readers.results is not None:  # a reader queries through Athena
            outputs["QueryResultsBucketName"] = (self.readers.results.bucket_name, "Readers' Athena results")
            outputs["ReaderWorkgroups"] = (
                ",".join(f"{role}={wg.name}" for role, wg in self.readers.workgroups.items()),
                "Reader role name = its Athena workgroup",
            )
        for output_id, (value, description) in outputs.items():
            CfnOutput(self, output_id, value=value, description=description)


# --- what each construct takes of the stage: the one place the whole settings model is read ------


def storage_settings(stage: Stage) -> StorageSettings:
    settings = stage.settings
    return StorageSettings(
        names=stage.names,
        retention=stage.retention,
        key_arn=settings.encryption.key_arn,
        raw_transition=settings.raw_transition,
        noncurrent_version_expiration_days=settings.noncurrent_version_expiration_days,
        quarantine_expiration_days=settings.quarantine_expiration_days,
        access_log_expiration_days=settings.access_log_expiration_days,
        temp_expiration_days=settings.temp_expiration_days,
    )


def catalog_settings(stage: Stage) -> CatalogSettings:
    return CatalogSettings(
        names=stage.names,
        retention=stage.retention,
        lake_formation=stage.settings.lake_formation,
        crawlers=stage.settings.crawlers,
    )


def readers_settings(stage: Stage) -> ReadersSettings:
    settings = stage.settings
    return ReadersSettings(
        names=stage.names,
        retention=stage.retention,
        readers=settings.readers,
        lake_formation=settings.lake_formation,
        query_results_expiration_days=settings.query_results_expiration_days,
    )


def trigger_settings(stage: Stage) -> TriggerSettings:
    settings = stage.settings
    return TriggerSettings(
        names=stage.names,
        retention=stage.retention,
        arrival_lambda=settings.arrival_lambda,
        tables_per_run=settings.batching.tables_per_run,
        raw_event_prefixes=settings.raw_event_prefixes,
        sweep_schedule=settings.sweep_schedule,
        maintenance_schedule=settings.maintenance_schedule,
    )


def processing_settings(stage: Stage) -> ProcessingSettings:
    settings = stage.settings
    return ProcessingSettings(
        names=stage.names,
        runtime=stage.runtime,
        ingest=settings.ingest,
        maintain=settings.maintain,
        spark_ui=settings.spark_ui,
        emr=settings.emr,
        lake_formation=settings.lake_formation,
        lineage=settings.lineage,
        parallel_tables=settings.batching.parallel_tables,
        job_run_queuing=settings.batching.job_run_queuing,
        max_attempts=settings.max_attempts,
    )
