"""A stage's `lineage` setting: AWS's default lineage capture kept, turned off, or (on runtimes without
it) sent to an Amazon DataZone domain. What each value deploys: infra.lineage."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from infra.settings_base import SettingsModel


class DataZoneLineage(SettingsModel):
    """AWS Glue's "Generate lineage events" option: the OpenLineage listener that Glue 5.x and EMR 7.11+
    ship, with the Amazon DataZone transport, posting to one DataZone (SageMaker Unified Studio) domain."""

    datazone_domain_id: str = Field(
        pattern=r"^dzd[-_][a-zA-Z0-9_-]{1,36}$",
        description="The domain the jobs' lineage events go to (dzd_...), in the stage's account and region",
    )


LineageSetting = Literal["on", "off"] | DataZoneLineage

LINEAGE_DESCRIPTION = (
    '"on" (default): keep AWS\'s own lineage capture where the runtime has it (glue-6.1+, '
    'emr-spark-8.2.0+), with the role permission and endpoint it needs; "off": every job sets '
    "spark.openlineage.disabled=true; {datazone_domain_id: dzd_...} (runtimes without AWS's default "
    "only): the OpenLineage listener with the DataZone transport (docs/operate.md#lineage)"
)
