"""Stage settings: what `cdk.json` context (or `-c key=value`) selects for dev and prod.

Context keys read by the app:

    stage                 dev | prod (default dev)
    config                the table config file (default config/tables.yaml, relative to the repo)
    lakeloader:project    resource name prefix (default "lakeloader")
    lakeloader:stages     {stage: settings} - the model below; unknown keys fail synth
    lake_formation        true/false: overrides the stage's lake_formation flag
    runtime               overrides the stage's runtime (glue-5.1, glue-6.0, glue-6.1: control.runtimes)
    alarm_email           overrides the stage's alarm_email

Every resource name is ``<project>-<stage>-<what>`` and every Glue database
``<project>_<stage>_<database>`` (the stage's ``database_prefix``), so two stages never collide
in one account.

The stage's own blocks have modules of their own, all on `infra.settings_base.SettingsModel`:
`settings_emr` (the EMR application and the releases a runtime accepts), `settings_access` (readers
and writers), `settings_network`, `settings_encryption` and `settings_s3_tables`. What the constructs
take of a stage instead of this model (its names, its retention) is `settings_names`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from infra.settings_access import ROLE_ARN, ReaderSettings, WriterSettings, check_readers, check_writers
from infra.settings_base import SettingsError, SettingsModel
from infra.settings_emr import EmrSettings, emr_release_problem
from infra.settings_encryption import EncryptionSettings
from infra.settings_lineage import LINEAGE_DESCRIPTION, DataZoneLineage, LineageSetting
from infra.settings_names import Retention, StageNames
from infra.settings_network import NetworkSettings
from infra.settings_s3_tables import S3TablesSettings
from lakeloader.control import runtimes
from lakeloader.control.ledger import DEFAULT_MAX_ATTEMPTS

STAGE_NAME = r"^[a-z][a-z0-9]{0,11}$"


# What AWS's default lineage capture sets, which a stage must not replace ("Lineage for Amazon EMR").
AWS_LINEAGE_KEYS = ("spark.extraListeners",)
TRANSPORT = "spark.openlineage.transport."


class GlueJobSettings(SettingsModel):
    # The .GRAVITON types are arm64 workers, on Glue versions that offer them (lakeloader.control.runtimes:
    # Runtime.graviton): G.1X.GRAVITON through G.16X.GRAVITON and R.1X.GRAVITON through R.8X.GRAVITON
    # ("Migrating AWS Glue for Spark jobs to AWS Glue version 6.1").
    worker_type: Literal[
        "G.025X", "G.1X", "G.2X", "G.4X", "G.8X", "G.12X", "G.16X", "R.1X", "R.2X", "R.4X", "R.8X",
        "G.1X.GRAVITON", "G.2X.GRAVITON", "G.4X.GRAVITON", "G.8X.GRAVITON", "G.12X.GRAVITON",
        "G.16X.GRAVITON", "R.1X.GRAVITON", "R.2X.GRAVITON", "R.4X.GRAVITON", "R.8X.GRAVITON",
    ]  # fmt: skip

    @property
    def architecture(self) -> str:
        """The workers' CPU, which the job bundle's native wheels are built for."""
        return runtimes.worker_architecture(self.worker_type)

    number_of_workers: int = Field(ge=2)
    timeout_minutes: int = Field(ge=1, le=10080)
    max_retries: int = Field(ge=0, le=10)
    max_concurrent_runs: int = Field(ge=1, le=1000)


class ArrivalLambdaSettings(SettingsModel):
    reserved_concurrency: int | None = Field(
        default=None,
        ge=1,
        description="Reserved concurrency of the S3-arrival Lambda; default none. A reservation comes out "
        "of the account's concurrency quota, and Lambda keeps 10 of it unreserved: on a new account "
        "(quota 10) any reservation fails the deploy. Set it once the quota is raised",
    )
    memory_mb: int = Field(default=256, ge=128, le=10240)
    timeout_seconds: int = Field(default=60, ge=1, le=900)
    retry_attempts: int = Field(default=2, ge=0, le=2)
    max_event_age_minutes: int = Field(default=360, ge=1, le=360)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class BatchingSettings(SettingsModel):
    """How ingest runs are shared: tables grouped per run, drained in parallel, runs queued."""

    tables_per_run: int = Field(
        default=1,
        ge=1,
        le=100,
        description="Tables due together (same engine and execution class) that one job run drains; "
        "1 (default): a run per table",
    )
    parallel_tables: int = Field(
        default=4, ge=1, le=64, description="Tables one run drains at once, in one Spark session"
    )
    job_run_queuing: bool = Field(
        default=False,
        description="Glue job-run queuing on the ingest job: starts beyond its concurrency wait in "
        "Glue's queue instead of failing (FLEX runs are never queued; needs ingest.max_retries 0)",
    )
    window_seconds: int = Field(
        default=0,
        ge=0,
        le=86_400,
        description="Batching window of the tables that do not set trigger.min_interval_seconds: arrivals "
        "wait and the sweep starts one run for them (0: every arrival starts a run)",
    )
    execution_class: Literal["STANDARD", "FLEX"] = Field(
        default="STANDARD",
        description="Glue execution class of the glue tables that do not set trigger.execution_class",
    )


class RawTransition(SettingsModel):
    days: int = Field(ge=1)
    storage_class: Literal[
        "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER_IR", "GLACIER", "DEEP_ARCHIVE"
    ]


FIELD_ERROR = "stage_field"


def field_error(field: str, message: str) -> PydanticCustomError:
    """A check of several settings that is about one of them: resolve_stage names `field` (a dotted
    path under the stage) as the key, as it does for a check of that field alone."""
    return PydanticCustomError(FIELD_ERROR, "{message}", {"field": field, "message": message})


class StageSettings(SettingsModel):
    """Settings of one stage (a value of `lakeloader:stages` in cdk.json)."""

    removal: Literal["destroy", "retain"] = Field(
        description="destroy: buckets/tables/key go with the stack (dev); retain: they outlive it (prod)"
    )
    runtime: str = Field(
        default=runtimes.DEFAULT_RUNTIME,
        description="What the stage's jobs run on, a row of control.runtimes: glue-5.1 (Spark 3.5, "
        "Iceberg 1.10, Python 3.11), glue-6.0 (Spark 4.1, Iceberg 1.11, Python 3.13) or glue-6.1 (Spark "
        "4.1.3, Iceberg 1.11, Python 3.14, Graviton workers). It sets the Glue version, the default EMR "
        "release and the Python the job bundle is built for (docs/deploy.md)",
    )
    raw_transition: RawTransition
    noncurrent_version_expiration_days: int = Field(ge=1)
    quarantine_expiration_days: int = Field(ge=1)
    access_log_expiration_days: int = Field(ge=1)
    temp_expiration_days: int = Field(default=7, ge=1)
    log_retention_days: Literal[1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653]
    ingest: GlueJobSettings
    maintain: GlueJobSettings
    spark_ui: bool = True
    emr: EmrSettings
    arrival_lambda: ArrivalLambdaSettings
    batching: BatchingSettings = Field(default_factory=BatchingSettings)
    max_attempts: int = Field(
        default=DEFAULT_MAX_ATTEMPTS,
        ge=1,
        le=100,
        description="Times one raw file may fail its batch (bad input naming it) before it is "
        "quarantined: no run takes it again until `lakeloader requeue`",
    )
    raw_event_prefixes: list[str] = Field(
        default_factory=list,
        description="Raw-bucket key prefixes that trigger the Lambda; [] (default): each source folder "
        "of the "
        'config; [""]: the whole bucket',
    )
    sweep_schedule: str | None = Field(
        default="rate(15 minutes)",
        description="EventBridge schedule of the Lambda's sweep (starts runs for tables left pending); "
        '"off": none',
    )
    maintenance_schedule: str | None = Field(
        default="cron(0 3 * * ? *)", description='EventBridge schedule expression; "off": no schedule'
    )
    crawlers: dict[str, str] = Field(
        default_factory=dict,
        description='Crawler per source folder: {source: "cron(...)" or "on-demand"}; "*" = every source',
    )
    lake_formation: bool = False
    target_storage: Literal["glue", "s3_tables"] = Field(
        default="glue",
        description="target.storage of the tables that do not set it: glue (Glue Data Catalog + curated "
        "bucket) or s3_tables (the stage's S3 Tables table bucket)",
    )
    s3_tables: S3TablesSettings = Field(default_factory=S3TablesSettings)
    encryption: EncryptionSettings = Field(default_factory=EncryptionSettings)
    network: NetworkSettings | None = Field(
        default=None,
        description="Run the jobs and functions in a VPC (docs/deploy.md#private-networks); default none",
    )
    lineage: LineageSetting = Field(default="on", description=LINEAGE_DESCRIPTION)
    readers: list[ReaderSettings] = Field(
        default_factory=list,
        description="Roles that may query the tables, each with its own Athena workgroup (docs/query.md); "
        "[] (default): none",
    )
    writers: list[WriterSettings] = Field(
        default_factory=list,
        description="Roles that land files in the raw bucket (a DMS endpoint, an S3 sink), each with its "
        "prefixes (docs/sources.md); [] (default): none",
    )
    verify_role_arn: str | None = Field(
        default=None,
        pattern=ROLE_ARN,
        description="The role you run `lakeloader verify` as: the stack attaches the verify policy to it "
        "and, in Lake Formation mode, grants it DROP and SELECT on the canary tables (docs/deploy.md#verify)",
    )
    query_results_expiration_days: int = Field(
        default=7, ge=1, description="Days the readers' Athena query results are kept"
    )
    alarm_email: str | None = None
    database_prefix: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9_]*$",
        description="Prefix of the stage's Glue database names: the config's database crm is "
        '<prefix>crm in the catalog. Default "<project>_<stage>_", so stages and other stacks '
        'in one account never share a database; "" keeps the bare config names (one stage per account)',
    )

    # (cdk.json context passes through jsii, which drops null values: "off" and "on-demand"
    # spell "none" where a null would be lost.)

    @field_validator("runtime")
    @classmethod
    def _known_runtime(cls, value: str) -> str:
        if value not in runtimes.RUNTIMES:
            raise ValueError(
                f"{value!r} is not a runtime lakeloader runs on; choose one of {', '.join(runtimes.RUNTIMES)}"
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _runtime_release(cls, data: Any) -> Any:
        """An emr block without release_label gets the stage runtime's release."""
        emr = data.get("emr") if isinstance(data, dict) else None
        if isinstance(emr, dict) and "release_label" not in emr:
            row = runtimes.RUNTIMES.get(data.get("runtime", runtimes.DEFAULT_RUNTIME))
            if row is not None:  # an unknown runtime is refused by its own validator
                data = {**data, "emr": {**emr, "release_label": row.emr_release_label}}
        return data

    @model_validator(mode="after")
    def _release_on_the_runtime_line(self) -> StageSettings:
        problem = emr_release_problem(self.emr.release_label, self.runtime_row)
        if problem:
            raise field_error("emr.release_label", problem)
        return self

    @model_validator(mode="after")
    def _datazone_where_aws_has_no_default(self) -> StageSettings:
        """DataZone's transport would replace AWS's amazon_glue_api one, and a job that overrides the
        transport sends AWS nothing ("Troubleshooting data lineage")."""
        if isinstance(self.lineage, DataZoneLineage) and self.runtime_row.aws_lineage:
            raise field_error(
                "lineage.datazone_domain_id",
                f"runtime {self.runtime} sends lineage to the Glue Data Catalog by default, and a DataZone "
                'transport would override it: use lineage "on" there (DataZone is for runtimes without '
                "AWS's default lineage, e.g. glue-5.1 and glue-6.0)",
            )
        return self

    @model_validator(mode="after")
    def _emr_keeps_aws_listener(self) -> StageSettings:
        """On a release that captures lineage, emr.spark_defaults may not replace AWS's listener or its
        transport: the runs would send nothing ("Troubleshooting data lineage")."""
        if self.lineage == "off" or not runtimes.emr_captures_lineage(self.emr.release_label):
            return self
        touched = sorted(
            k for k in self.emr.spark_defaults if k in AWS_LINEAGE_KEYS or k.startswith(TRANSPORT)
        )
        if touched:
            raise field_error(
                "emr.spark_defaults",
                f"{', '.join(touched)} would replace the OpenLineage listener or transport that "
                f"{self.emr.release_label} registers, and its runs would send no lineage: leave them out "
                '(lineage "off" turns lineage off)',
            )
        return self

    @model_validator(mode="after")
    def _graviton_workers(self) -> StageSettings:
        """Graviton worker types only where the runtime's Glue offers them, and one CPU for both jobs:
        they share one job bundle, whose native wheels are built for one architecture."""
        for field in ("ingest", "maintain"):
            worker_type = getattr(self, field).worker_type
            graviton = runtimes.worker_architecture(worker_type) == runtimes.AARCH64
            if graviton and not self.runtime_row.graviton:
                offered = ", ".join(r.name for r in runtimes.RUNTIMES.values() if r.graviton)
                raise field_error(
                    f"{field}.worker_type",
                    f"{worker_type} is a Graviton worker type, which runtime {self.runtime} does not offer "
                    f"(Glue {self.runtime_row.glue_version}); use {offered} or a type without .GRAVITON",
                )
        if self.ingest.architecture != self.maintain.architecture:
            raise field_error(
                "maintain.worker_type",
                f"{self.maintain.worker_type} runs on {self.maintain.architecture} and ingest.worker_type "
                f"{self.ingest.worker_type} on {self.ingest.architecture}: both jobs share one job bundle "
                "built for one CPU; give both Graviton types or neither",
            )
        return self

    @property
    def runtime_row(self) -> runtimes.Runtime:
        """The stage's runtime: its Glue version, EMR release, Spark, Iceberg and Python."""
        return runtimes.runtime(self.runtime)

    @field_validator("maintenance_schedule", "sweep_schedule")
    @classmethod
    def _schedule(cls, value: str | None) -> str | None:
        if value is None or value == "off":
            return None
        if not (value.startswith("cron(") or value.startswith("rate(")):
            raise ValueError('use an EventBridge expression (cron(...) or rate(...)) or "off"')
        return value

    @model_validator(mode="after")
    def _queuing_without_retries(self) -> StageSettings:
        if self.batching.job_run_queuing and self.ingest.max_retries:
            raise ValueError(
                "batching.job_run_queuing needs ingest.max_retries 0 (Glue refuses job-run queuing on a "
                f"job with retries; it is {self.ingest.max_retries})"
            )
        return self

    @model_validator(mode="after")
    def _flex_workers(self) -> StageSettings:
        if self.batching.execution_class == "FLEX" and self.ingest.worker_type not in FLEX_WORKER_TYPES:
            raise ValueError(flex_refusal("batching.execution_class", self.ingest.worker_type))
        return self

    @model_validator(mode="after")
    def _readers_and_writers(self) -> StageSettings:
        check_writers(self.writers)
        check_readers(self.readers, lake_formation=self.lake_formation)
        return self

    @field_validator("crawlers")
    @classmethod
    def _crawler_schedules(cls, value: dict[str, str]) -> dict[str, str]:
        for source, schedule in value.items():
            if schedule != "on-demand" and not schedule.startswith("cron("):
                raise ValueError(f'crawler {source!r}: use a cron(...) expression or "on-demand"')
        return value

    @property
    def retain(self) -> bool:
        return self.removal == "retain"


# Glue runs FLEX job runs on these worker types only ("Job run execution class" in the Glue job
# documentation: "Flexible job runs are supported for jobs using AWS Glue version 3.0 or later and G.1X
# or G.2X worker types"; CDK's Job construct refuses the others the same way). No Graviton type is
# among them, so a FLEX table on a Graviton ingest job is refused (docs/deploy.md, "Graviton workers").
FLEX_WORKER_TYPES = ("G.1X", "G.2X")


def flex_refusal(where: str, worker_type: str) -> str:
    return (
        f"{where} FLEX runs on the ingest job, whose worker_type is {worker_type}: Glue runs FLEX only "
        f"on {' or '.join(FLEX_WORKER_TYPES)} (set ingest.worker_type to one of them, or use STANDARD)"
    )


class Stage(SettingsModel):
    """A resolved stage: its name, the project prefix and its settings."""

    project: str = Field(pattern=r"^[a-z][a-z0-9-]{1,20}$")
    name: str = Field(pattern=STAGE_NAME)
    settings: StageSettings

    @property
    def names(self) -> StageNames:
        """How the stage names its resources: what most constructs take instead of this model."""
        return StageNames(
            project=self.project, stage=self.name, configured_database_prefix=self.settings.database_prefix
        )

    @property
    def retention(self) -> Retention:
        return Retention(retain=self.settings.retain, log_retention_days=self.settings.log_retention_days)

    @property
    def prefix(self) -> str:
        return self.names.prefix

    @property
    def runtime(self) -> runtimes.Runtime:
        """The runtime the stage's jobs run on (its `runtime` setting's row)."""
        return self.settings.runtime_row

    def resource_name(self, what: str) -> str:
        return self.names.resource_name(what)

    def role_name(self, what: str) -> str:
        return self.names.role_name(what)

    @property
    def glue_prefix(self) -> str:
        return self.names.glue_prefix

    @property
    def database_prefix(self) -> str:
        return self.names.database_prefix

    def glue_database(self, database: str) -> str:
        return self.names.glue_database(database)


def _as_bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "false", "1", "0", "yes", "no"}:
        return value.strip().lower() in {"true", "1", "yes"}
    raise SettingsError(f"context {key}: expected true or false, got {value!r}")


def resolve_stage(context: dict[str, Any]) -> Stage:
    """Build the selected stage from the app's context (a dict of cdk.json's context + -c values)."""
    name = context.get("stage") or "dev"
    stages = context.get("lakeloader:stages")
    if not isinstance(stages, dict) or not stages:
        raise SettingsError("context lakeloader:stages is missing: cdk.json must define the stages' settings")
    if name not in stages:
        raise SettingsError(
            f"context stage={name!r}: unknown stage; cdk.json defines {', '.join(sorted(stages))}"
        )
    raw = dict(stages[name])
    if context.get("lake_formation") is not None:
        raw["lake_formation"] = _as_bool(context["lake_formation"], "lake_formation")
    if context.get("alarm_email"):
        raw["alarm_email"] = context["alarm_email"]
    if context.get("max_attempts") is not None:  # e.g. -c max_attempts=1: quarantine at the first failure
        raw["max_attempts"] = context["max_attempts"]
    if context.get("runtime"):  # e.g. -c runtime=glue-6.0
        raw["runtime"] = context["runtime"]
    try:
        return Stage(project=context.get("lakeloader:project") or "lakeloader", name=name, settings=raw)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            loc = ".".join(str(p) for p in error["loc"])
            if error["type"] == FIELD_ERROR:
                loc = ".".join(part for part in (loc, error["ctx"]["field"]) if part)
            where = (
                f"lakeloader:stages.{name}.{loc.removeprefix('settings').lstrip('.')}".rstrip(".")
                if loc.startswith("settings")
                else loc
            )
            lines.append(f"cdk.json context {where}: {error['msg'].removeprefix('Value error, ')}")
        raise SettingsError("\n".join(lines)) from None
