"""Processing: the Glue ingest and maintenance jobs, the EMR Serverless application (infra.emr), their roles.

Both engines run the same code: `glue_jobs/*.py` or `emr_steps/*.py` (thin entry points)
plus the `lakeloader` package, zipped at synth (`infra.packaging.lakeloader_zip`) and
shipped as `--extra-py-files` (Glue) or `spark.submit.pyFiles` (EMR). Its third-party
dependencies ship from the assets bucket, built for the stage runtime's Python and installed with
no package index: on Glue 5.1 a zip of wheels (`--additional-python-modules`, `--no-index`), on
Glue 6.0 a packed virtual environment (`--python-virtual-env`, infra.packed_venv.glue_venv_archive),
on EMR an archive on PYTHONPATH (`spark.archives`). The Iceberg Glue-catalog settings are the same
for both engines and both runtimes.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, Stack
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from infra.assets import SuffixedFileAsset
from infra.catalog import GLUE_JOB_ROLE, Catalog
from infra.config_store import ConfigStore
from infra.emr import EmrServerless
from infra.glue_jobs import glue_conf_argument, lakeloader_glue_job
from infra.job_access import grant_lake_access, lake_access_findings
from infra.lineage import emr_captures, glue_captures, grant_post_events
from infra.lineage import spark_conf as lineage_conf
from infra.nag import acknowledge_wildcards, arn_ref
from infra.network import StageNetwork
from infra.packaging import GLUE_WHEELS_SUFFIX, glue_wheels_zip, lakeloader_zip
from infra.packed_venv import GLUE_VENV_SUFFIX, glue_venv_archive, uses_python_venv
from infra.s3_tables import TableBucket
from infra.settings import GlueJobSettings
from infra.settings_emr import EmrSettings
from infra.settings_lineage import LineageSetting
from infra.settings_names import StageNames
from infra.storage import EMR_LOGS_PREFIX, GLUE_TEMP_PREFIX, SPARK_UI_PREFIX, LakeStorage
from lakeloader.control import contract, runtimes

S3A_REGION = "spark.hadoop.fs.s3a.endpoint.region"


def s3a_region_conf(region: str) -> dict[str, str]:
    """Glue 5.1 (and EMR 7.10+) read `s3://` through S3A instead of EMRFS; S3A without
    `fs.s3a.endpoint.region` does not use the job's own region, so in a VPC whose only route to S3 is
    its gateway endpoint the raw reads and quarantine writes would time out (AWS Glue's "Migrating AWS
    Glue for Spark jobs to AWS Glue version 5.1"). Glue 6.0 has no EMRFS at all, and its migration
    page says to keep setting the region; both runtimes get it."""
    return {S3A_REGION: region}


@dataclass(frozen=True, kw_only=True)
class ProcessingSettings:
    """What Processing takes of the stage: the runtime, both Glue jobs, the EMR application, lineage."""

    names: StageNames
    runtime: runtimes.Runtime
    ingest: GlueJobSettings
    maintain: GlueJobSettings
    spark_ui: bool
    emr: EmrSettings
    lake_formation: bool
    lineage: LineageSetting
    parallel_tables: int  # batching.parallel_tables: tables one run drains at once
    job_run_queuing: bool  # batching.job_run_queuing, on the ingest job
    max_attempts: int  # a raw file's failures before it is quarantined

    @property
    def glue_captures(self) -> bool:
        return glue_captures(self.runtime)

    @property
    def emr_captures(self) -> bool:
        return emr_captures(self.emr.release_label)


class Processing(Construct):
    """The jobs, the EMR Serverless application and the roles they run as."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: ProcessingSettings,
        storage: LakeStorage,
        store: ConfigStore,
        catalog: Catalog,
        raw_prefixes: list[str],
        network: StageNetwork | None = None,
        table_bucket: TableBucket | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.settings = settings
        self.library = s3_assets.Asset(self, "LakeloaderLibrary", path=str(lakeloader_zip()))
        python_arguments = self._glue_dependencies(settings.runtime, settings.ingest.architecture)
        iceberg_conf = self._iceberg_conf(storage, table_bucket)
        # What every job needs to start (contract.JOB_REQUIRED_ARGS), for both engines.
        required = {
            contract.ARG_CONFIG_TABLE: store.config_table.table_name,
            contract.ARG_LEDGER_TABLE: store.ledger_table.table_name,
            contract.ARG_RUNS_TABLE: store.runs_table.table_name,
            contract.ARG_RAW_ROOT: storage.raw_root,
            contract.ARG_WAREHOUSE: storage.warehouse,
        }
        self._job_roles()
        self._grant_lake_access(
            storage=storage,
            store=store,
            catalog=catalog,
            raw_prefixes=raw_prefixes,
            table_bucket=table_bucket,
        )
        self._grant_glue_temp_and_logs(storage)
        grant_post_events(self.glue_role, settings.lineage, aws_default=settings.glue_captures)
        grant_post_events(self.emr_role, settings.lineage, aws_default=settings.emr_captures)
        self._glue_jobs(
            storage=storage,
            catalog=catalog,
            arguments=self._glue_arguments(storage, catalog, required, iceberg_conf, python_arguments),
            network=network,
        )
        self.emr = self._emr_application(
            storage=storage,
            catalog=catalog,
            iceberg_conf=iceberg_conf | lineage_conf(settings.lineage, aws_default=settings.emr_captures),
            required=required,
            network=network,
        )
        self._acknowledge_wildcards(storage, catalog, raw_prefixes, table_bucket)

    def grant_start_ingest(self, role: iam.IRole) -> None:
        """Let `role` start and watch ingest runs on either engine (the S3-arrival Lambda): the Glue
        ingest job's runs, the EMR application's job runs as the EMR job role."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="StartGlueIngest",
                actions=["glue:StartJobRun", "glue:GetJobRun"],
                resources=[self.ingest_job.job_arn],
            )
        )
        self.emr.grant_start_job(role)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PassEmrJobRole",
                actions=["iam:PassRole"],
                resources=[self.emr_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}},
            )
        )

    @property
    def launch_environment(self) -> dict[str, str]:
        """What the S3-arrival Lambda needs to start ingest runs (contract.ENV_*): the Glue job, the EMR
        application, its job role, entry point and the arguments it appends."""
        return {
            contract.ENV_GLUE_JOB_NAME: self.ingest_job.job_name,
            contract.ENV_EMR_APPLICATION_ID: self.emr.application.attr_application_id,
            contract.ENV_EMR_JOB_ROLE_ARN: self.emr_role.role_arn,
            contract.ENV_EMR_ENTRY_POINT: self.emr.ingest_entry_point.s3_object_url,
            contract.ENV_EMR_EXTRA_ARGS: Stack.of(self).to_json_string(self.emr.entry_point_arguments),
        }

    # --- the steps of __init__ ---------------------------------------------------------------

    def _glue_dependencies(self, runtime: runtimes.Runtime, architecture: str) -> dict[str, str]:
        """The jobs' third-party packages, for the runtime's Python and the workers' CPU (both jobs run
        one architecture: infra.settings), and the Glue arguments that install them: a packed venv on
        Glue 6.0+, where --additional-python-modules is deprecated; the zip of wheels before (x86_64
        only: no Glue 5.x offers Graviton workers)."""
        if uses_python_venv(runtime):
            venv = glue_venv_archive(runtime=runtime, architecture=architecture)
            self.glue_dependencies = SuffixedFileAsset(
                self, "GlueVenv", path=str(venv), suffix=GLUE_VENV_SUFFIX
            )
            return {"--python-virtual-env": self.glue_dependencies.s3_object_url}
        self.glue_dependencies = SuffixedFileAsset(
            self, "GlueWheels", path=str(glue_wheels_zip(runtime=runtime)), suffix=GLUE_WHEELS_SUFFIX
        )
        return {
            "--additional-python-modules": self.glue_dependencies.s3_object_url,
            "--python-modules-installer-option": "--no-index",
        }

    def _iceberg_conf(self, storage: LakeStorage, table_bucket: TableBucket | None) -> dict[str, str]:
        """Both engines' Spark settings: Iceberg tables in the Glue Data Catalog, and the region S3A calls."""
        iceberg_conf = contract.iceberg_catalog_conf(contract.GLUE_CATALOG, storage.warehouse)
        iceberg_conf |= s3a_region_conf(Aws.REGION)
        if self.settings.lake_formation:
            iceberg_conf |= contract.lake_formation_catalog_conf(
                contract.GLUE_CATALOG, Aws.ACCOUNT_ID, Aws.REGION
            )
        # target.storage: s3_tables -- the stage's table bucket through S3 Tables' Iceberg REST endpoint
        # (contract.s3_tables_catalog_conf): Iceberg's own REST catalog, no jar to ship.
        if table_bucket is not None:
            iceberg_conf |= contract.s3_tables_catalog_conf(
                table_bucket.arn, Aws.REGION, url_suffix=Aws.URL_SUFFIX
            )
        return iceberg_conf

    def _glue_arguments(
        self,
        storage: LakeStorage,
        catalog: Catalog,
        required: dict[str, str],
        iceberg_conf: dict[str, str],
        python_arguments: dict[str, str],
    ) -> dict[str, str]:
        """Both Glue jobs' default arguments."""
        lineage = lineage_conf(self.settings.lineage, aws_default=self.settings.glue_captures)
        return {
            **{contract.glue_arg(name): value for name, value in required.items()},
            **self._per_run_glue_arguments(catalog),
            "--datalake-formats": "iceberg",
            "--conf": glue_conf_argument(iceberg_conf | lineage),
            "--enable-job-insights": "true",
            "--job-bookmark-option": "job-bookmark-disable",
            "--TempDir": storage.assets.s3_url_for_object(GLUE_TEMP_PREFIX),
            **python_arguments,
        }

    @staticmethod
    def _per_run_glue_arguments(catalog: Catalog) -> dict[str, str]:
        """The Glue jobs' defaults of the per-run arguments ("": each run gives its own) and the database
        prefix."""
        return {
            contract.glue_arg(contract.ARG_TABLE_ID): "",
            contract.glue_arg(contract.ARG_CORRELATION_ID): "",
            # the stage's Glue databases are <prefix><config database> (infra.catalog)
            contract.glue_arg(contract.ARG_DATABASE_PREFIX): catalog.database_prefix,
        }

    def _job_roles(self) -> None:
        names = self.settings.names
        self.glue_role = iam.Role(
            self,
            "GlueJobRole",
            role_name=names.role_name(GLUE_JOB_ROLE),
            description=f"{names.prefix} Glue jobs (ingest, maintain)",
            assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
        )
        self.emr_role = iam.Role(
            self,
            "EmrJobRole",
            role_name=names.role_name("emr-job"),
            description=f"{names.prefix} EMR Serverless job runs",
            assumed_by=iam.ServicePrincipal(
                "emr-serverless.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            ),
        )

    def _grant_lake_access(
        self,
        *,
        storage: LakeStorage,
        store: ConfigStore,
        catalog: Catalog,
        raw_prefixes: list[str],
        table_bucket: TableBucket | None,
    ) -> None:
        """Both job roles: the lake (infra.job_access) and, with S3 Tables, the table bucket."""
        for role in (self.glue_role, self.emr_role):
            grant_lake_access(
                role,
                lake_formation=self.settings.lake_formation,
                storage=storage,
                store=store,
                databases=catalog.database_names,
                found_databases=catalog.found_databases,
                raw_prefixes=raw_prefixes,
            )
            if table_bucket is not None:
                table_bucket.grant_jobs(role)
        if table_bucket is not None:
            table_bucket.add_policy()

    def _grant_glue_temp_and_logs(self, storage: LakeStorage) -> None:
        """Glue only: temp dir, Glue's own metrics namespace, its log groups (KMS-encrypted)."""
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

    def _glue_jobs(
        self,
        *,
        storage: LakeStorage,
        catalog: Catalog,
        arguments: dict[str, str],
        network: StageNetwork | None,
    ) -> None:
        """The ingest and maintenance jobs, in the stage's network when it has one."""
        settings = self.settings
        self.glue_dependencies.bucket.grant_read(self.glue_role, self.glue_dependencies.s3_object_key)
        library = glue.Code.from_bucket(self.library.bucket, self.library.s3_object_key)
        self.ingest_job = lakeloader_glue_job(
            self,
            "IngestJob",
            names=settings.names,
            runtime=settings.runtime,
            spark_ui=settings.spark_ui,
            role=self.glue_role,
            name="ingest",
            description="lakeloader: merge a table's pending raw objects into its Iceberg table",
            script="ingest.py",
            job=settings.ingest,
            arguments={
                **arguments,
                # how many of a run's tables (the trigger groups batching.tables_per_run) drain at once
                contract.glue_arg(contract.ARG_PARALLEL_TABLES): str(settings.parallel_tables),
                contract.glue_arg(contract.ARG_MAX_ATTEMPTS): str(settings.max_attempts),
            },
            library=library,
            storage=storage,
            catalog=catalog,
            job_run_queuing=settings.job_run_queuing,
        )
        self.maintain_job = lakeloader_glue_job(
            self,
            "MaintainJob",
            names=settings.names,
            runtime=settings.runtime,
            spark_ui=settings.spark_ui,
            role=self.glue_role,
            name="maintain",
            description="lakeloader: Iceberg maintenance (compaction, snapshot expiry, orphan files)",
            script="maintain.py",
            job=settings.maintain,
            arguments=arguments,
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

    def _emr_application(
        self,
        *,
        storage: LakeStorage,
        catalog: Catalog,
        iceberg_conf: dict[str, str],
        required: dict[str, str],
        network: StageNetwork | None,
    ) -> EmrServerless:
        """The EMR Serverless application (its job role is made with the Glue one)."""
        settings = self.settings
        emr_arguments = {
            **required,
            contract.ARG_PARALLEL_TABLES: str(settings.parallel_tables),
            contract.ARG_MAX_ATTEMPTS: str(settings.max_attempts),
        }
        if catalog.database_prefix:
            emr_arguments[contract.ARG_DATABASE_PREFIX] = catalog.database_prefix
        return EmrServerless(
            self,
            names=settings.names,
            runtime=settings.runtime,
            emr=settings.emr,
            storage=storage,
            role=self.emr_role,
            library=self.library,
            iceberg_conf=iceberg_conf,
            job_arguments=emr_arguments,
            network=network,
        )

    def _acknowledge_wildcards(
        self,
        storage: LakeStorage,
        catalog: Catalog,
        raw_prefixes: list[str],
        table_bucket: TableBucket | None,
    ) -> None:
        """cdk-nag's IAM5 findings of both job roles, each a wildcard the jobs' work needs."""
        lake_findings = lake_access_findings(
            storage, catalog, raw_prefixes, lake_formation=self.settings.lake_formation
        )
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
            reason=(
                "The Glue job role reaches only what the jobs use: objects under the source folders of "
                "the configured tables in the raw bucket, the warehouse prefix of the curated bucket, the "
                "quarantine bucket, its temp and Spark UI prefixes, the tables of the configured databases "
                "(created by the jobs, so named at run time), Glue's job log groups (named by Glue per job "
                "run) and the stage's key. CDK's grants for the script/library assets and the Spark UI "
                "prefix use S3 action wildcards (Get*/List*) on those objects only, and CDK's Spark UI "
                "grant lets the role use the stage's key (kms:ReEncrypt*, kms:GenerateDataKey*) for those "
                "objects."
            ),
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
            reason=(
                "The EMR job role reaches only what the jobs use: objects under the source folders of the "
                "configured tables in the raw bucket, the warehouse prefix of the curated bucket, the "
                "quarantine bucket, the EMR log prefix, the tables of the configured databases (created by "
                "the jobs) and the stage's key. CDK's read grants for the entry-point and library assets "
                "use S3 action wildcards (Get*/List*) on those objects only."
            ),
        )
