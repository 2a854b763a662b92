"""A stage's EMR Serverless settings, and which EMR releases a stage's runtime accepts."""

from __future__ import annotations

from pydantic import Field

from infra.settings_base import SettingsModel
from lakeloader.control import runtimes


class EmrSettings(SettingsModel):
    release_label: str = Field(
        # StageSettings fills in the stage runtime's release when the stage names none
        default=runtimes.runtime(runtimes.DEFAULT_RUNTIME).emr_release_label,
        pattern=r"^emr-(spark-)?\d+\.\d+\.\d+$",
        description="EMR Serverless release; default: the stage runtime's (glue-5.1: emr-7.12.0, glue-6.0: "
        "emr-spark-8.1.0). A later release of the same line is accepted (emr-7.12+ for glue-5.1, "
        "emr-spark-8.1.x for glue-6.0); any other is refused (infra.settings_emr.emr_release_problem)",
    )
    max_cpu: str = Field(default="16 vCPU", pattern=r"^\d+( vCPU)?$")
    max_memory: str = Field(default="64 GB", pattern=r"^\d+( GB)?$")
    max_disk: str = Field(default="200 GB", pattern=r"^\d+( GB)?$")
    idle_timeout_minutes: int = Field(default=15, ge=1, le=10080)
    image_uri: str | None = Field(
        default=None,
        pattern=r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/[a-z0-9][a-z0-9._/-]*"
        r"(:[A-Za-z0-9_][A-Za-z0-9._-]*|@sha256:[0-9a-f]{64})$",
        description="Optional custom image (ECR URI), built on the EMR Serverless image of the same "
        "release; its repository policy must let emr-serverless.amazonaws.com pull it (docs/deploy.md)",
    )
    spark_defaults: dict[str, str] = Field(
        default_factory=dict,
        description="Extra spark-defaults of the application (e.g. a Python venv archive)",
    )


def _release_line(label: str) -> tuple:
    """The part of an EMR release label that fixes its Spark and Iceberg lines.

    All of emr-7.x runs Spark 3.5 (its Iceberg moved with the minor: 7.12+ bundle 1.10), so a 7.x
    release is of the line of any older 7.x one. The emr-spark-8 releases change Spark with the minor
    (emr-spark-8.0.0: Spark 4.0.2 and Iceberg 1.10.1; emr-spark-8.1.0: Spark 4.1.1 and Iceberg 1.11.0,
    AWS's release pages), so there the minor is part of the line.
    """
    major, minor, _ = runtimes.emr_release(label)
    return ("emr-spark", major, minor) if label.startswith("emr-spark-") else ("emr", major)


def emr_release_problem(label: str, runtime: runtimes.Runtime) -> str | None:
    """Why `label` cannot be the EMR Serverless release of a stage on `runtime`, or None if it can.

    It can when it is the runtime's own release or a later one of the same line (_release_line): its
    Spark and Iceberg are then the runtime's, which the Glue jobs and the local tests run.
    """
    own = runtime.emr_release_label
    if _release_line(label) != _release_line(own):
        others = [
            row.name
            for row in runtimes.RUNTIMES.values()
            if _release_line(row.emr_release_label) == _release_line(label)
            and runtimes.emr_release(label) >= runtimes.emr_release(row.emr_release_label)
        ]
        switch = f", or set runtime to {others[0]}" if others else ""
        return (
            f"{label} is not on runtime {runtime.name}'s line (Spark {runtime.spark_line}, Iceberg "
            f"{runtime.iceberg_line}, as {own}): use {own} or leave release_label out{switch}"
        )
    if runtimes.emr_release(label) < runtimes.emr_release(own):
        return (
            f"{label} is older than {own}: its bundled Iceberg is not the {runtime.iceberg_line} line "
            f"lakeloader is tested with; use {own}"
        )
    return None
