"""Processing: the Glue ingest and maintenance jobs, the EMR Serverless application (infra.emr), their roles.

Both engines run the same code: `glue_jobs/*.py` or `emr_steps/*.py` (thin entry points)
plus the `lakeloader` package, zipped at synth (`infra.packaging.lakeloader_zip`) and
shipped as `--extra-py-files` (Glue) or `spark.submit.pyFiles` (EMR). Its third-party
dependencies ship from the assets bucket, built for the stage runtime's Python and installed with
no package index: on Glue 5.1 a zip of wheels (`--additional-python-modules`, `--no-index`), on
Glue 6.0 a packed virtual environment (`--python-virtual-env`, infra.packaging.glue_venv_archive),
on EMR an archive on PYTHONPATH (`spark.archives`). The Iceberg Glue-catalog settings are the same
for both engines and both runtimes.
"""

from __future__ import annotations

from aws_cdk import Aws, Duration
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from infra.assets import SuffixedFileAsset
from infra.catalog import GLUE_JOB_ROLE, Catalog
from infra.config_store import ConfigStore
from infra.emr import EmrServerless
from infra.job_access import grant_lake_access, lake_access_findings
from infra.nag import acknowledge_wildcards, arn_ref
from infra.network import StageNetwork
from infra.packaging import (
    GLUE_VENV_SUFFIX,
    GLUE_WHEELS_SUFFIX,
    REPO_ROOT,
    glue_venv_archive,
    glue_wheels_zip,
    lakeloader_zip,
    uses_python_venv,
)
from infra.s3_tables import TableBucket, catalog_jar_assets
from infra.settings import GlueJobSettings, SettingsError, Stage
from infra.storage import EMR_LOGS_PREFIX, GLUE_TEMP_PREFIX, SPARK_UI_PREFIX, LakeStorage
from lakeloader import contract, runtimes

S3A_REGION = "spark.hadoop.fs.s3a.endpoint.region"
_GLUE_VERSIONS = {
    "4.0": glue.GlueVersion.V4_0,
    "5.0": glue.GlueVersion.V5_0,
    "5.1": glue.GlueVersion.V5_1,
    "6.0": glue.GlueVersion.V6_0,
}


def glue_version(runtime: runtimes.Runtime) -> glue.GlueVersion:
    """The CDK enum of the runtime's Glue version."""
    if runtime.glue_version not in _GLUE_VERSIONS:
        raise SettingsError(
            f"runtime {runtime.name}'s Glue version {runtime.glue_version!r} is not one this stack knows "
            f"({', '.join(_GLUE_VERSIONS)}); add it to infra.processing._GLUE_VERSIONS"
        )
    return _GLUE_VERSIONS[runtime.glue_version]


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


def s3a_region_conf(region: str) -> dict[str, str]:
    """Glue 5.1 (and EMR 7.10+) read `s3://` through S3A instead of EMRFS; S3A without
    `fs.s3a.endpoint.region` does not use the job's own region, so in a VPC whose only route to S3 is
    its gateway endpoint the raw reads and quarantine writes would time out (AWS Glue's "Migrating AWS
    Glue for Spark jobs to AWS Glue version 5.1"). Glue 6.0 has no EMRFS at all, and its migration
    page says to keep setting the region; both runtimes get it."""
    return {S3A_REGION: region}


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
        network: StageNetwork | None = None,
        table_bucket: TableBucket | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.network = network
        settings = stage.settings
        runtime = stage.runtime
        self.library = s3_assets.Asset(self, "LakeloaderLibrary", path=str(lakeloader_zip()))
        # The jobs' third-party packages, for the runtime's Python: a packed venv on Glue 6.0+, where
        # --additional-python-modules is deprecated; the zip of wheels before.
        if uses_python_venv(runtime):
            self.glue_dependencies = SuffixedFileAsset(
                self, "GlueVenv", path=str(glue_venv_archive(runtime=runtime)), suffix=GLUE_VENV_SUFFIX
            )
            python_arguments = {"--python-virtual-env": self.glue_dependencies.s3_object_url}
        else:
            self.glue_dependencies = SuffixedFileAsset(
                self, "GlueWheels", path=str(glue_wheels_zip(runtime=runtime)), suffix=GLUE_WHEELS_SUFFIX
            )
            python_arguments = {
                "--additional-python-modules": self.glue_dependencies.s3_object_url,
                "--python-modules-installer-option": "--no-index",
            }

        # Both engines' Spark settings: Iceberg tables in the Glue Data Catalog, and the region S3A calls.
        iceberg_conf = contract.iceberg_catalog_conf(contract.GLUE_CATALOG, storage.warehouse)
        iceberg_conf |= s3a_region_conf(Aws.REGION)
        if settings.lake_formation:
            iceberg_conf |= contract.lake_formation_catalog_conf(
                contract.GLUE_CATALOG, Aws.ACCOUNT_ID, Aws.REGION
            )
        # target.storage: s3_tables -- the stage's table bucket through the S3 Tables catalog for Iceberg,
        # whose jars neither Glue nor EMR provides: shipped as assets (infra.s3_tables.catalog_jar_assets).
        self.s3_tables_jars: list[s3_assets.Asset] = []
        if table_bucket is not None:
            iceberg_conf |= contract.s3_tables_catalog_conf(table_bucket.arn)
            self.s3_tables_jars = catalog_jar_assets(self, runtime)
        # What every job needs to start (contract.JOB_REQUIRED_ARGS), for both engines.
        required = {
            contract.ARG_CONFIG_TABLE: store.config_table.table_name,
            contract.ARG_LEDGER_TABLE: store.ledger_table.table_name,
            contract.ARG_RUNS_TABLE: store.runs_table.table_name,
            contract.ARG_RAW_ROOT: storage.raw_root,
            contract.ARG_WAREHOUSE: storage.warehouse,
        }
        # The Glue jobs' defaults; the per-run arguments default to "".
        job_arguments = {
            **{contract.glue_arg(name): value for name, value in required.items()},
            contract.glue_arg(contract.ARG_TABLE_ID): "",
            contract.glue_arg(contract.ARG_CORRELATION_ID): "",
            # the stage's Glue databases are <prefix><config database> (infra.catalog)
            contract.glue_arg(contract.ARG_DATABASE_PREFIX): catalog.database_prefix,
        }

        # --- roles ---------------------------------------------------------------------
        self.glue_role = iam.Role(
            self,
            "GlueJobRole",
            role_name=stage.role_name(GLUE_JOB_ROLE),
            description=f"{stage.prefix} Glue jobs (ingest, maintain)",
            assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
        )
        self.emr_role = iam.Role(
            self,
            "EmrJobRole",
            role_name=stage.role_name("emr-job"),
            description=f"{stage.prefix} EMR Serverless job runs",
            assumed_by=iam.ServicePrincipal(
                "emr-serverless.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            ),
        )
        for role in (self.glue_role, self.emr_role):
            grant_lake_access(
                role,
                stage=stage,
                storage=storage,
                store=store,
                databases=catalog.database_names,
                raw_prefixes=raw_prefixes,
            )
            if table_bucket is not None:
                table_bucket.grant_jobs(role)
                # one statement for the three jars (CDK's grant_read would add three, with wildcards)
                role.add_to_policy(
                    iam.PolicyStatement(
                        sid="S3TablesCatalogJars",
                        actions=["s3:GetObject"],
                        resources=[j.bucket.arn_for_objects(j.s3_object_key) for j in self.s3_tables_jars],
                    )
                )
        if table_bucket is not None:
            table_bucket.add_policy()

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

        # --- Glue jobs -----------------------------------------------------------------
        common_glue_arguments = {
            **job_arguments,
            "--datalake-formats": "iceberg",
            "--conf": glue_conf_argument(iceberg_conf),
            "--enable-job-insights": "true",
            "--job-bookmark-option": "job-bookmark-disable",
            "--TempDir": storage.assets.s3_url_for_object(GLUE_TEMP_PREFIX),
            **python_arguments,
        }
        self.glue_dependencies.bucket.grant_read(self.glue_role, self.glue_dependencies.s3_object_key)
        library = glue.Code.from_bucket(self.library.bucket, self.library.s3_object_key)
        self.ingest_job = self._glue_job(
            "IngestJob",
            stage=stage,
            name="ingest",
            description="lakeloader: merge a table's pending raw objects into its Iceberg table",
            script="ingest.py",
            job=settings.ingest,
            arguments={
                **common_glue_arguments,
                # how many of a run's tables (the trigger groups batching.tables_per_run) drain at once
                contract.glue_arg(contract.ARG_PARALLEL_TABLES): str(settings.batching.parallel_tables),
                contract.glue_arg(contract.ARG_MAX_ATTEMPTS): str(settings.max_attempts),
            },
            library=library,
            storage=storage,
            catalog=catalog,
            job_run_queuing=settings.batching.job_run_queuing,
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
        if network is not None:
            for job in self.glue_jobs:
                job.node.default_child.add_property_override(
                    "Connections.Connections", network.glue_connection_names
                )
                job.node.add_dependency(*network.glue_connections)
            network.grant_network_interfaces(self.glue_role, glue_job=True)

        # --- EMR Serverless (its job role is above) -----------------------------------------
        emr_arguments = {
            **required,
            contract.ARG_PARALLEL_TABLES: str(settings.batching.parallel_tables),
            contract.ARG_MAX_ATTEMPTS: str(settings.max_attempts),
        }
        if catalog.database_prefix:
            emr_arguments[contract.ARG_DATABASE_PREFIX] = catalog.database_prefix
        self.emr = EmrServerless(
            self,
            stage=stage,
            storage=storage,
            role=self.emr_role,
            library=self.library,
            iceberg_conf=iceberg_conf,
            job_arguments=emr_arguments,
            network=network,
            extra_jars=[j.s3_object_url for j in self.s3_tables_jars],
        )

        lake_findings = lake_access_findings(stage, storage, catalog, raw_prefixes)
        if table_bucket is not None:
            lake_findings.append(f"Resource::{arn_ref(table_bucket.bucket, 'TableBucketARN')}/table/*")
        acknowledge_wildcards(
            self.glue_role,
            lake_findings
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
            lake_findings
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
        job_run_queuing: bool = False,
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
            glue_version=glue_version(stage.runtime),
            worker_configuration=glue.WorkerConfiguration(
                worker_type=_WORKER_TYPES[job.worker_type], number_of_workers=job.number_of_workers
            ),
            timeout=Duration.minutes(job.timeout_minutes),
            max_retries=job.max_retries,
            max_concurrent_runs=job.max_concurrent_runs,
            job_run_queuing_enabled=job_run_queuing,
            default_arguments=dict(arguments),
            extra_python_files=[library],
            # the S3 Tables catalog's jars (--extra-jars; none without an s3_tables table)
            extra_jars=[glue.Code.from_bucket(j.bucket, j.s3_object_key) for j in self.s3_tables_jars]
            or None,
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
