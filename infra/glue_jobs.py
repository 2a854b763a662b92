"""A lakeloader Glue job: the Glue version and worker types this stack knows, Glue's one `--conf`, and
the PySpark job of one entry point (`glue_jobs/<script>`), which infra.processing makes twice (ingest,
maintain).

The job's resources are children of the scope it is given (Processing), so their construct paths, hence
their logical ids, stay as they were when Processing made them itself.
"""

from __future__ import annotations

from typing import cast

from aws_cdk import Duration
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from infra.catalog import Catalog
from infra.packaging import REPO_ROOT
from infra.settings import GlueJobSettings, SettingsError
from infra.settings_names import StageNames
from infra.storage import SPARK_UI_PREFIX, LakeStorage
from lakeloader.control import runtimes

_GLUE_VERSIONS = {
    "4.0": glue.GlueVersion.V4_0,
    "5.0": glue.GlueVersion.V5_0,
    "5.1": glue.GlueVersion.V5_1,
    "6.0": glue.GlueVersion.V6_0,
}
# Glue versions newer than aws-cdk-lib's GlueVersion enum (2.275.0 ends at V6_0): the job is built on
# the latest version the enum has, and its AWS::Glue::Job's GlueVersion is then set to the runtime's.
_GLUE_VERSIONS_AFTER_CDK = {"6.1": glue.GlueVersion.V6_0}


def glue_version(runtime: runtimes.Runtime) -> glue.GlueVersion:
    """The CDK enum of the runtime's Glue version (for one newer than the enum: the version it builds on)."""
    known = _GLUE_VERSIONS | _GLUE_VERSIONS_AFTER_CDK
    if runtime.glue_version not in known:
        raise SettingsError(
            f"runtime {runtime.name}'s Glue version {runtime.glue_version!r} is not one this stack knows "
            f"({', '.join(known)}); add it to infra.glue_jobs._GLUE_VERSIONS"
        )
    return known[runtime.glue_version]


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


# aws-cdk-lib 2.275.0's WorkerType has no Graviton member: such a job is built on the x86_64 type of the
# same size, and its AWS::Glue::Job's WorkerType is then set to the Graviton one.
_GRAVITON_WORKER_TYPES = {
    f"{size}{runtimes.GRAVITON_SUFFIX}": _WORKER_TYPES[size]
    for size in ("G.1X", "G.2X", "G.4X", "G.8X", "G.12X", "G.16X", "R.1X", "R.2X", "R.4X", "R.8X")
}


def glue_conf_argument(conf: dict[str, str]) -> str:
    """Glue takes one `--conf`; more settings ride in its value: "a=b --conf c=d ..."."""
    return " --conf ".join(f"{key}={value}" for key, value in conf.items())


def lakeloader_glue_job(
    scope: Construct,
    construct_id: str,
    *,
    names: StageNames,
    runtime: runtimes.Runtime,
    spark_ui: bool,
    role: iam.IRole,
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
    """The Glue job of `glue_jobs/<script>`, with the lakeloader library and the stage's job settings."""
    script_asset = s3_assets.Asset(scope, f"{construct_id}Script", path=str(REPO_ROOT / "glue_jobs" / script))
    made = glue.PySparkEtlJob(
        scope,
        construct_id,
        job_name=names.resource_name(name),
        description=description,
        role=role,
        script=glue.Code.from_bucket(script_asset.bucket, script_asset.s3_object_key),
        glue_version=glue_version(runtime),
        worker_configuration=glue.WorkerConfiguration(
            worker_type=(_WORKER_TYPES | _GRAVITON_WORKER_TYPES)[job.worker_type],
            number_of_workers=job.number_of_workers,
        ),
        timeout=Duration.minutes(job.timeout_minutes),
        max_retries=job.max_retries,
        max_concurrent_runs=job.max_concurrent_runs,
        job_run_queuing_enabled=job_run_queuing,
        default_arguments=dict(arguments),
        extra_python_files=[library],
        security_configuration=catalog.security_configuration,
        continuous_logging=glue.ContinuousLoggingProps(enabled=True),
        enable_metrics=True,
        enable_observability_metrics=True,
        spark_ui=(
            glue.SparkUIProps(bucket=storage.assets, prefix=f"/{SPARK_UI_PREFIX.rstrip('/')}")
            if spark_ui
            else None
        ),
        tags={"lakeloader:stage": names.stage, "lakeloader:job": name},
    )
    # What the CDK enums cannot say yet (a newer Glue version, a Graviton worker type), set on the
    # AWS::Glue::Job itself.
    cfn_job = cast(glue.CfnJob, made.node.default_child)
    if runtime.glue_version in _GLUE_VERSIONS_AFTER_CDK:
        cfn_job.glue_version = runtime.glue_version
    if job.worker_type in _GRAVITON_WORKER_TYPES:
        cfn_job.worker_type = job.worker_type
    return made
