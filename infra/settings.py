"""Stage settings: what `cdk.json` context (or `-c key=value`) selects for dev and prod.

Context keys read by the app:

    stage                 dev | prod (default dev)
    config                the table config file (default config/tables.yaml, relative to the repo)
    lakeloader:project    resource name prefix (default "lakeloader")
    lakeloader:stages     {stage: settings} - the model below; unknown keys fail synth
    lake_formation        true/false: overrides the stage's lake_formation flag
    alarm_email           overrides the stage's alarm_email

Every resource name is ``<project>-<stage>-<what>``, so two stages never collide in one account.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

STAGE_NAME = r"^[a-z][a-z0-9]{0,11}$"

# CloudWatch namespace of the metrics lakeloader's jobs and Lambda publish (the dashboard reads it).
METRICS_NAMESPACE = "lakeloader"


class SettingsError(ValueError):
    """The cdk.json context is invalid; the message names the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GlueJobSettings(_Strict):
    worker_type: Literal[
        "G.025X", "G.1X", "G.2X", "G.4X", "G.8X", "G.12X", "G.16X", "R.1X", "R.2X", "R.4X", "R.8X"
    ]
    number_of_workers: int = Field(ge=2)
    timeout_minutes: int = Field(ge=1, le=10080)
    max_retries: int = Field(ge=0, le=10)
    max_concurrent_runs: int = Field(ge=1, le=1000)


class EmrSettings(_Strict):
    release_label: str = Field(pattern=r"^emr-7\.\d+\.\d+$")
    max_cpu: str = "16 vCPU"
    max_memory: str = "64 GB"
    max_disk: str = "200 GB"
    idle_timeout_minutes: int = Field(default=15, ge=1, le=10080)
    image_uri: str | None = Field(
        default=None,
        description="Custom image (ECR URI) with Python 3.11, pydantic and PyYAML for lakeloader",
    )
    spark_defaults: dict[str, str] = Field(
        default_factory=dict,
        description="Extra spark-defaults of the application (e.g. a Python venv archive)",
    )


class ArrivalLambdaSettings(_Strict):
    reserved_concurrency: int = Field(ge=1)
    memory_mb: int = Field(default=256, ge=128, le=10240)
    timeout_seconds: int = Field(default=60, ge=1, le=900)
    retry_attempts: int = Field(default=2, ge=0, le=2)
    max_event_age_minutes: int = Field(default=360, ge=1, le=360)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class RawTransition(_Strict):
    days: int = Field(ge=1)
    storage_class: Literal[
        "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING", "GLACIER_IR", "GLACIER", "DEEP_ARCHIVE"
    ]


class StageSettings(_Strict):
    """Settings of one stage (a value of `lakeloader:stages` in cdk.json)."""

    removal: Literal["destroy", "retain"] = Field(
        description="destroy: buckets/tables/key go with the stack (dev); retain: they outlive it (prod)"
    )
    raw_transition: RawTransition
    noncurrent_version_expiration_days: int = Field(ge=1)
    quarantine_expiration_days: int = Field(ge=1)
    access_log_expiration_days: int = Field(ge=1)
    temp_expiration_days: int = Field(default=7, ge=1)
    log_retention_days: Literal[1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653]
    ingest: GlueJobSettings
    maintain: GlueJobSettings
    glue_python_modules: str | None = Field(
        default=None,
        description="--additional-python-modules; default: lakeloader's runtime dependencies Glue 5.0 lacks "
        "(pydantic, PyYAML) at the versions pinned in requirements.txt",
    )
    spark_ui: bool = True
    emr: EmrSettings
    arrival_lambda: ArrivalLambdaSettings
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
    alarm_email: str | None = None

    # (cdk.json context passes through jsii, which drops null values: "off" and "on-demand"
    # spell "none" where a null would be lost.)

    @field_validator("maintenance_schedule", "sweep_schedule")
    @classmethod
    def _schedule(cls, value: str | None) -> str | None:
        if value is None or value == "off":
            return None
        if not (value.startswith("cron(") or value.startswith("rate(")):
            raise ValueError('use an EventBridge expression (cron(...) or rate(...)) or "off"')
        return value

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


class Stage(_Strict):
    """A resolved stage: its name, the project prefix and its settings."""

    project: str = Field(pattern=r"^[a-z][a-z0-9-]{1,20}$")
    name: str = Field(pattern=STAGE_NAME)
    settings: StageSettings

    @property
    def prefix(self) -> str:
        return f"{self.project}-{self.name}"

    def resource_name(self, what: str) -> str:
        """``<project>-<stage>-<what>``: the name of a stage-scoped resource."""
        return f"{self.prefix}-{what}"

    @property
    def glue_prefix(self) -> str:
        """The same prefix in the form Glue database names accept (lower case, underscores)."""
        return self.prefix.replace("-", "_")


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
    try:
        return Stage(project=context.get("lakeloader:project") or "lakeloader", name=name, settings=raw)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            loc = ".".join(str(p) for p in error["loc"])
            where = (
                f"lakeloader:stages.{name}.{loc.removeprefix('settings.')}"
                if loc.startswith("settings")
                else loc
            )
            lines.append(f"cdk.json context {where}: {error['msg'].removeprefix('Value error, ')}")
        raise SettingsError("\n".join(lines)) from None
