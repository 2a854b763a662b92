"""Processing: the Glue 5.0 ingest and maintenance jobs, the EMR Serverless application, their roles.

Both engines run the same code: `glue_jobs/*.py` or `emr_steps/*.py` (thin entry points)
plus the `lakeloader` package, zipped at synth (`infra.packaging.lakeloader_zip`) and
shipped as `--extra-py-files` (Glue) or `spark.submit.pyFiles` (EMR). The Iceberg
Glue-catalog settings are the same for both.
"""

from __future__ import annotations

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_emrserverless as emrserverless
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from infra.catalog import DATABASE_TABLE_ACTIONS, Catalog, glue_arns, grant_warehouse
from infra.config_store import ConfigStore
from infra.nag import acknowledge_wildcards, arn_ref
from infra.packaging import GLUE_EXTRA_REQUIREMENTS, REPO_ROOT, lakeloader_zip, pinned_requirements
from infra.settings import METRICS_NAMESPACE, GlueJobSettings, Stage
from infra.storage import EMR_LOGS_PREFIX, GLUE_TEMP_PREFIX, SPARK_UI_PREFIX, WAREHOUSE_PREFIX, LakeStorage

ICEBERG_CATALOG = "glue_catalog"
EMR_ICEBERG_JAR = "/usr/share/aws/iceberg/lib/iceberg-spark-runtime.jar"

_WORKER_TYPES = {
    "G.025X": glue.WorkerType.G_025X,
    "G.1X": glue.WorkerType.G_1X,
    "G.2X": glue.WorkerType.G_2X,
    "G.4X": glue.WorkerType.G_4X,
    "G.8X": glue.WorkerType.G_8X,
    "G.12X": glue.WorkerType.G_12X,
    "G.16X": glue.WorkerType.G_16X,
    "R.1X": glue.WorkerType.R_1X,
    "R.2X": glue.WorkerType.R_2X,
    "R.4X": glue.WorkerType.R_4X,
    "R.8X": glue.WorkerType.R_8X,
}


def iceberg_spark_conf(warehouse: str) -> dict[str, str]:
    """Spark settings for Iceberg tables in the Glue Data Catalog, stored in `warehouse`."""
    prefix = f"spark.sql.catalog.{ICEBERG_CATALOG}"
    return {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.catalog-impl": "org.apache.iceberg.aws.glue.GlueCatalog",
        f"{prefix}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{prefix}.warehouse": warehouse,
    }


def glue_conf_argument(conf: dict[str, str]) -> str:
    """Glue takes one `--conf`; more settings ride in its value: "a=b --conf c=d ..."."""
    return " --conf ".join(f"{key}={value}" for key, value in conf.items())


class Processing(Construct):
    """The jobs, the EMR Serverless application and the roles they run as."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: Stage,
        storage: LakeStorage,
        store: ConfigStore,
        catalog: Catalog,
        raw_prefixes: list[str],
    ) -> None:
        super().__init__(scope, construct_id)
        settings = stage.settings
        self.library = s3_assets.Asset(self, "LakeloaderLibrary", path=str(lakeloader_zip()))

        # The arguments every lakeloader job resolves (glue_jobs/*.py); the per-run ones default to "".
        self.job_arguments = {
            "--lakeloader_config_table": store.config_table.table_name,
            "--lakeloader_ledger_table": store.ledger_table.table_name,
            "--lakeloader_runs_table": store.runs_table.table_name,
            "--lakeloader_raw_root": storage.raw_root,
            "--lakeloader_warehouse": storage.warehouse,
            "--lakeloader_table_id": "",
            "--lakeloader_correlation_id": "",
        }

        # --- roles ---------------------------------------------------------------------
        self.glue_role = iam.Role(
            self,
            "GlueJobRole",
            role_name=stage.resource_name("glue-job"),
            description=f"{stage.prefix} Glue jobs (ingest, maintain)",
            assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
        )
        self.emr_role = iam.Role(
            self,
            "EmrJobRole",
            role_name=stage.resource_name("emr-job"),
            description=f"{stage.prefix} EMR Serverless job runs",
            assumed_by=iam.ServicePrincipal(
                "emr-serverless.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            ),
        )
        for role in (self.glue_role, self.emr_role):
            self._grant_lake_access(
                role,
                stage=stage,
                storage=storage,
                store=store,
                databases=catalog.database_names,
                raw_prefixes=raw_prefixes,
            )

        # Glue only: temp dir, Glue's own metrics namespace, its log groups (KMS-encrypted).
        self.glue_role.add_to_policy(
            iam.PolicyStatement(
                sid="GlueTempDir",
                actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                resources=[storage.assets.arn_for_objects(f"{GLUE_TEMP_PREFIX}*")],
            )
        )
        glue_logs = f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:/aws-glue/*"
        self.glue_role.add_to_policy(
            iam.PolicyStatement(
                sid="GlueLogs",
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:PutLogEvents",
                    "logs:AssociateKmsKey",
                ],
                resources=[glue_logs],
            )
        )
        # EMR only: the application's S3 logs in the assets bucket, and the job's entry points.
        self.emr_role.add_to_policy(
            iam.PolicyStatement(
                sid="EmrLogs",
                actions=["s3:PutObject", "s3:GetObject"],
                resources=[storage.assets.arn_for_objects(f"{EMR_LOGS_PREFIX}*")],
            )
        )

        # --- Glue jobs -----------------------------------------------------------------
        common_glue_arguments = {
            **self.job_arguments,
            "--datalake-formats": "iceberg",
            "--conf": glue_conf_argument(iceberg_spark_conf(storage.warehouse)),
            "--enable-job-insights": "true",
            "--job-bookmark-option": "job-bookmark-disable",
            "--TempDir": storage.assets.s3_url_for_object(GLUE_TEMP_PREFIX),
            "--additional-python-modules": settings.glue_python_modules
            or pinned_requirements(GLUE_EXTRA_REQUIREMENTS),
        }
        library = glue.Code.from_bucket(self.library.bucket, self.library.s3_object_key)
        self.ingest_job = self._glue_job(
            "IngestJob",
            stage=stage,
            name="ingest",
            description="lakeloader: merge a table's pending raw objects into its Iceberg table",
            script="ingest.py",
            job=settings.ingest,
            arguments=common_glue_arguments,
            library=library,
            storage=storage,
            catalog=catalog,
        )
        self.maintain_job = self._glue_job(
            "MaintainJob",
            stage=stage,
            name="maintain",
            description="lakeloader: Iceberg maintenance (compaction, snapshot expiry, orphan files)",
            script="maintain.py",
            job=settings.maintain,
            arguments=common_glue_arguments,
            library=library,
            storage=storage,
            catalog=catalog,
        )
        self.glue_jobs = [self.ingest_job, self.maintain_job]

        # --- EMR Serverless --------------------------------------------------------------
        self.emr_ingest_entry_point = s3_assets.Asset(
            self, "EmrIngestEntryPoint", path=str(REPO_ROOT / "emr_steps" / "ingest.py")
        )
        self.emr_maintain_entry_point = s3_assets.Asset(
            self, "EmrMaintainEntryPoint", path=str(REPO_ROOT / "emr_steps" / "maintain.py")
        )
        for asset in (self.library, self.emr_ingest_entry_point, self.emr_maintain_entry_point):
            asset.bucket.grant_read(self.emr_role, asset.s3_object_key)
        emr = settings.emr
        spark_defaults = {
            **iceberg_spark_conf(storage.warehouse),
            "spark.jars": EMR_ICEBERG_JAR,
            "spark.submit.pyFiles": self.library.s3_object_url,
            **emr.spark_defaults,
        }
        self.emr_application = emrserverless.CfnApplication(
            self,
            "EmrApplication",
            name=stage.resource_name("spark"),
            release_label=emr.release_label,
            type="SPARK",
            auto_start_configuration=emrserverless.CfnApplication.AutoStartConfigurationProperty(
                enabled=True
            ),
            auto_stop_configuration=emrserverless.CfnApplication.AutoStopConfigurationProperty(
                enabled=True, idle_timeout_minutes=emr.idle_timeout_minutes
            ),
            maximum_capacity=emrserverless.CfnApplication.MaximumAllowedResourcesProperty(
                cpu=emr.max_cpu, memory=emr.max_memory, disk=emr.max_disk
            ),
            image_configuration=(
                emrserverless.CfnApplication.ImageConfigurationInputProperty(image_uri=emr.image_uri)
                if emr.image_uri
                else None
            ),
            runtime_configuration=[
                emrserverless.CfnApplication.ConfigurationObjectProperty(
                    classification="spark-defaults", properties=spark_defaults
                )
            ],
            monitoring_configuration=emrserverless.CfnApplication.MonitoringConfigurationProperty(
                s3_monitoring_configuration=emrserverless.CfnApplication.S3MonitoringConfigurationProperty(
                    log_uri=storage.assets.s3_url_for_object(EMR_LOGS_PREFIX),
                    encryption_key_arn=storage.key.key_arn,
                )
            ),
        )
        self.emr_application_arn = Stack.of(self).format_arn(
            service="emr-serverless",
            resource="/applications",
            resource_name=self.emr_application.attr_application_id,
        )
        # What the S3-arrival Lambda appends to its EMR runs' entryPointArguments (EMR_EXTRA_ARGS).
        self.emr_entry_point_arguments = [
            "--config-table",
            store.config_table.table_name,
            "--ledger-table",
            store.ledger_table.table_name,
            "--runs-table",
            store.runs_table.table_name,
            "--raw-root",
            storage.raw_root,
            "--warehouse",
            storage.warehouse,
        ]

        acknowledge_wildcards(
            self.glue_role,
            self._wildcard_findings(stage, storage, catalog, raw_prefixes)
            + [
                f"Resource::{arn_ref(storage.assets)}/{GLUE_TEMP_PREFIX}*",
                f"Resource::{arn_ref(storage.assets)}/{SPARK_UI_PREFIX}*",
                "Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws-glue/*",
                "Action::s3:GetObject*",
                "Action::s3:GetBucket*",
                "Action::s3:List*",
                "Action::s3:DeleteObject*",
                "Action::s3:Abort*",
                "Action::kms:ReEncrypt*",
                "Action::kms:GenerateDataKey*",
            ],
            "The Glue job role reaches only what the jobs use: objects under the configured table "
            "prefixes of "
            "the raw bucket, the warehouse prefix of the curated bucket, the quarantine bucket, its temp and "
            "Spark UI prefixes, the tables of the configured databases (created by the jobs, so named at run "
            "time), Glue's job log groups (named by Glue per job run) and the stage's key. CDK's grants for "
            "the script/library assets and the Spark UI prefix use S3 action wildcards (Get*/List*) on those "
            "objects only, and CDK's Spark UI grant lets the role use the stage's key (kms:ReEncrypt*, "
            "kms:GenerateDataKey*) for those objects.",
        )
        acknowledge_wildcards(
            self.emr_role,
            self._wildcard_findings(stage, storage, catalog, raw_prefixes)
            + [
                f"Resource::{arn_ref(storage.assets)}/{EMR_LOGS_PREFIX}*",
                "Action::s3:GetObject*",
                "Action::s3:GetBucket*",
                "Action::s3:List*",
            ],
            "The EMR job role reaches only what the jobs use: objects under the configured table prefixes of "
            "the raw bucket, the warehouse prefix of the curated bucket, the quarantine bucket, the EMR log "
            "prefix, the tables of the configured databases (created by the jobs) and the stage's key. CDK's "
            "read grants for the entry-point and library assets use S3 action wildcards (Get*/List*) on "
            "those "
            "objects only.",
        )

    # -------------------------------------------------------------------------------------

    def _glue_job(
        self,
        construct_id: str,
        *,
        stage: Stage,
        name: str,
        description: str,
        script: str,
        job: GlueJobSettings,
        arguments: dict[str, str],
        library: glue.Code,
        storage: LakeStorage,
        catalog: Catalog,
    ) -> glue.PySparkEtlJob:
        script_asset = s3_assets.Asset(
            self, f"{construct_id}Script", path=str(REPO_ROOT / "glue_jobs" / script)
        )
        glue_job = glue.PySparkEtlJob(
            self,
            construct_id,
            job_name=stage.resource_name(name),
            description=description,
            role=self.glue_role,
            script=glue.Code.from_bucket(script_asset.bucket, script_asset.s3_object_key),
            glue_version=glue.GlueVersion.V5_0,
            worker_configuration=glue.WorkerConfiguration(
                worker_type=_WORKER_TYPES[job.worker_type], number_of_workers=job.number_of_workers
            ),
            timeout=Duration.minutes(job.timeout_minutes),
            max_retries=job.max_retries,
            max_concurrent_runs=job.max_concurrent_runs,
            default_arguments=dict(arguments),
            extra_python_files=[library],
            security_configuration=catalog.security_configuration,
            continuous_logging=glue.ContinuousLoggingProps(enabled=True),
            enable_metrics=True,
            enable_observability_metrics=True,
            spark_ui=(
                glue.SparkUIProps(bucket=storage.assets, prefix=f"/{SPARK_UI_PREFIX.rstrip('/')}")
                if stage.settings.spark_ui
                else None
            ),
            tags={"lakeloader:stage": stage.name, "lakeloader:job": name},
        )
        return glue_job

    @staticmethod
    def _grant_lake_access(
        role: iam.Role,
        *,
        stage: Stage,
        storage: LakeStorage,
        store: ConfigStore,
        databases: list[str],
        raw_prefixes: list[str],
    ) -> None:
        """What both engines' jobs touch: raw prefixes, warehouse, quarantine, tables, catalog, key."""
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadRawTablePrefixes",
                actions=["s3:GetObject", "s3:GetObjectVersion"],
                resources=[storage.raw.arn_for_objects(f"{p}*") for p in raw_prefixes],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ListRawTablePrefixes",
                actions=["s3:ListBucket"],
                resources=[storage.raw.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in raw_prefixes]}},
            )
        )
        grant_warehouse(role, storage.curated)
        role.add_to_policy(
            iam.PolicyStatement(
                sid="Quarantine",
                actions=["s3:PutObject", "s3:GetObject", "s3:ListBucket"],
                resources=[storage.quarantine.bucket_arn, storage.quarantine.arn_for_objects("*")],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="UseLakeKey",
                actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
                resources=[storage.key.key_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadConfigTable",
                actions=["dynamodb:GetItem", "dynamodb:Query", "dynamodb:Scan", "dynamodb:DescribeTable"],
                resources=[store.config_table.table_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteLedgerAndRuns",
                actions=[
                    "dynamodb:GetItem",
                    "dynamodb:Query",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:DeleteItem",
                    "dynamodb:BatchWriteItem",
                    "dynamodb:ConditionCheckItem",
                    "dynamodb:DescribeTable",
                ],
                resources=[store.ledger_table.table_arn, store.runs_table.table_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="IcebergTablesInGlueCatalog",
                actions=[
                    *DATABASE_TABLE_ACTIONS,
                    "glue:GetDatabases",
                    "glue:CreateDatabase",
                    "glue:UpdateDatabase",
                ],
                resources=glue_arns(role, databases),
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="PublishMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": [METRICS_NAMESPACE, "Glue"]}},
            )
        )
        if stage.settings.lake_formation:
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="LakeFormationDataAccess", actions=["lakeformation:GetDataAccess"], resources=["*"]
                )
            )

    @staticmethod
    def _wildcard_findings(
        stage: Stage, storage: LakeStorage, catalog: Catalog, raw_prefixes: list[str]
    ) -> list[str]:
        findings = [f"Resource::{arn_ref(storage.raw)}/{p}*" for p in raw_prefixes]
        findings += [
            f"Resource::{arn_ref(storage.curated)}/{WAREHOUSE_PREFIX}*",
            f"Resource::{arn_ref(storage.quarantine)}/*",
            "Resource::*",
        ]
        findings += [
            f"Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table/{d}/*"
            for d in catalog.database_names
        ]
        return findings
