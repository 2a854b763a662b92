"""EMR Serverless: the Spark application `engine: emr` tables run on, its entry points and arguments.

The application runs at the stage runtime's release (emr-7.12.0 for glue-5.1, emr-spark-8.1.0 for
glue-6.0) `emr_steps/*.py` with the lakeloader zip on `spark.submit.pyFiles`, on the Python of a
packed virtual environment of the jobs' wheels (infra.packed_venv.emr_venv_archive) that
`spark.archives` unpacks as `./environment`, as AWS's "Using Python libraries with EMR Serverless"
documents, with the image's Iceberg jar. The S3-arrival Lambda starts the runs (EMR_EXTRA_ARGS:
`entry_point_arguments`).
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_emrserverless as emrserverless
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from infra.assets import SuffixedFileAsset
from infra.nag import acknowledge_wildcards, arn_ref
from infra.network import StageNetwork
from infra.packaging import REPO_ROOT
from infra.packed_venv import EMR_VENV_SUFFIX, emr_venv_archive
from infra.settings import SettingsError
from infra.settings_emr import EmrSettings
from infra.settings_names import StageNames
from infra.storage import EMR_LOGS_PREFIX, LakeStorage
from lakeloader.config import LakeConfig
from lakeloader.control import contract, runtimes

# The folder `spark.archives` unpacks the venv as, in the driver's and each executor's working directory.
EMR_VENV_ALIAS = "environment"
EMR_VENV_PYTHON = f"./{EMR_VENV_ALIAS}/bin/python"


def emr_venv_conf(archive_url: str) -> dict[str, str]:
    """Run driver and executors on the packed virtual environment's Python, as AWS's "Using Python
    libraries with EMR Serverless" (https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/using-python-libraries.html)
    documents: the archive in `spark.archives` as `#environment`, and `PYSPARK_PYTHON` (driver and
    executors) and `PYSPARK_DRIVER_PYTHON` at `./environment/bin/python`. No PYTHONPATH: the venv's
    site-packages is its interpreter's own."""
    return {
        "spark.archives": f"{archive_url}#{EMR_VENV_ALIAS}",
        "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON": EMR_VENV_PYTHON,
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON": EMR_VENV_PYTHON,
        "spark.executorEnv.PYSPARK_PYTHON": EMR_VENV_PYTHON,
    }


def check_emr_tables(
    names: StageNames, emr: EmrSettings, lake: LakeConfig, spark_defaults: dict[str, str]
) -> None:
    """Refuse `engine: emr` tables the stage's EMR Serverless application could not run.

    (A release off the stage runtime's line is refused by the settings already.)
    """
    tables = [t.id for t in lake.tables if t.engine == "emr"]
    if not tables:
        return
    where = f"cdk.json context lakeloader:stages.{names.stage}.emr"
    replaced = sorted(set(emr.spark_defaults) & set(spark_defaults))
    if replaced:
        problem = f"{where}.spark_defaults replaces {', '.join(replaced)}, which lakeloader's EMR runs need"
    else:
        # EMR Serverless' default driver and executor take 4 vCPU each.
        cores = sum(int(emr.spark_defaults.get(f"spark.{r}.cores", "4")) for r in ("driver", "executor"))
        vcpus = int(emr.max_cpu.split()[0])
        problem = (
            f"{where}.max_cpu is {emr.max_cpu}, below one driver and one executor ({cores} vCPU)"
            if vcpus < cores
            else None
        )
    if problem:
        raise SettingsError(f"table(s) {', '.join(tables)} have engine emr, but {problem}")


class EmrServerless:
    """The EMR Serverless application, its entry points and the job role's access to them.

    Not a construct of its own: its resources are children of `scope` (Processing), which keeps
    their construct paths, hence their logical ids, as they were before this module existed.
    """

    def __init__(
        self,
        scope: Construct,
        *,
        names: StageNames,
        runtime: runtimes.Runtime,
        emr: EmrSettings,
        storage: LakeStorage,
        role: iam.Role,
        library: s3_assets.Asset,
        iceberg_conf: dict[str, str],
        job_arguments: dict[str, str],
        network: StageNetwork | None = None,
    ) -> None:
        role.add_to_policy(
            iam.PolicyStatement(
                sid="EmrLogs",
                actions=["s3:PutObject", "s3:GetObject"],
                resources=[storage.assets.arn_for_objects(f"{EMR_LOGS_PREFIX}*")],
            )
        )
        # Spark unpacks an archive by its name's ending: the key must end in .tar.gz, not .gz.
        self.dependencies = SuffixedFileAsset(
            scope, "EmrVenv", path=str(emr_venv_archive(runtime=runtime)), suffix=EMR_VENV_SUFFIX
        )
        self.ingest_entry_point = s3_assets.Asset(
            scope, "EmrIngestEntryPoint", path=str(REPO_ROOT / "emr_steps" / "ingest.py")
        )
        self.maintain_entry_point = s3_assets.Asset(
            scope, "EmrMaintainEntryPoint", path=str(REPO_ROOT / "emr_steps" / "maintain.py")
        )
        for asset in (library, self.dependencies, self.ingest_entry_point, self.maintain_entry_point):
            asset.bucket.grant_read(role, asset.s3_object_key)
        # What lakeloader's EMR runs need; the stage's emr.spark_defaults add to it (check_emr_tables).
        self.lakeloader_conf = {
            **iceberg_conf,
            "spark.jars": runtimes.EMR_ICEBERG_JAR,
            "spark.submit.pyFiles": library.s3_object_url,
            **emr_venv_conf(self.dependencies.s3_object_url),
        }
        self.application = self._application(scope, names, emr, storage, network)
        self.application_arn = Stack.of(scope).format_arn(
            service="emr-serverless",
            resource="/applications",
            resource_name=self.application.attr_application_id,
        )
        self.image_pull_statement = self._image_pull_statement(scope, emr)
        # What the S3-arrival Lambda appends to its runs' entryPointArguments (EMR_EXTRA_ARGS): the
        # `job_arguments` (contract.ARG_* -> value) as the EMR scripts' options.
        self.entry_point_arguments = [
            part for name, value in job_arguments.items() for part in (contract.emr_arg(name), value)
        ]

    def _application(
        self,
        scope: Construct,
        names: StageNames,
        emr: EmrSettings,
        storage: LakeStorage,
        network: StageNetwork | None,
    ) -> emrserverless.CfnApplication:
        """The application at the stage's release, with lakeloader's Spark defaults and the stage's own."""
        return emrserverless.CfnApplication(
            scope,
            "EmrApplication",
            name=names.resource_name("spark"),
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
                    classification="spark-defaults", properties={**self.lakeloader_conf, **emr.spark_defaults}
                )
            ],
            network_configuration=(
                emrserverless.CfnApplication.NetworkConfigurationProperty(
                    subnet_ids=network.subnet_ids, security_group_ids=network.security_group_ids
                )
                if network is not None
                else None
            ),
            monitoring_configuration=emrserverless.CfnApplication.MonitoringConfigurationProperty(
                s3_monitoring_configuration=emrserverless.CfnApplication.S3MonitoringConfigurationProperty(
                    log_uri=storage.assets.s3_url_for_object(EMR_LOGS_PREFIX),
                    encryption_key_arn=storage.key.key_arn,
                )
            ),
        )

    @staticmethod
    def _image_pull_statement(scope: Construct, emr: EmrSettings) -> dict | None:
        """A custom image is pulled by the service, emr-serverless.amazonaws.com, when the application
        is created (before its id exists): the image's ECR repository policy must allow this
        account's applications. The stack cannot edit a repository it does not own; it outputs
        the statement to add (docs/deploy.md)."""
        if not emr.image_uri:
            return None
        return {
            "Sid": "EmrServerlessPull",
            "Effect": "Allow",
            "Principal": {"Service": "emr-serverless.amazonaws.com"},
            "Action": ["ecr:BatchGetImage", "ecr:DescribeImages", "ecr:GetDownloadUrlForLayer"],
            "Condition": {
                "ArnLike": {
                    "aws:SourceArn": Stack.of(scope).format_arn(
                        service="emr-serverless", resource="/applications", resource_name="*"
                    )
                }
            },
        }

    def grant_start_job(self, role: iam.IRole) -> None:
        """Let `role` start job runs on the application and read their state (passing the job role is
        Processing's grant to give)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="StartEmrIngest",
                actions=["emr-serverless:StartJobRun", "emr-serverless:GetJobRun"],
                resources=[self.application_arn, f"{self.application_arn}/jobruns/*"],
            )
        )
        acknowledge_wildcards(
            role,
            [
                "Resource::arn:<AWS::Partition>:emr-serverless:<AWS::Region>:<AWS::AccountId>:/applications/"
                f"{arn_ref(self.application, 'ApplicationId')}/jobruns/*"
            ],
            reason=(
                "GetJobRun addresses the runs of the stage's one EMR Serverless application; run ids are "
                "generated at run time."
            ),
        )
