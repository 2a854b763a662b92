"""Lineage (stage setting `lineage`): what the jobs' Spark settings and roles carry so that every run's
reads and writes reach a lineage graph, or none when the stage says "off".

* AWS's default capture (Glue 6.1+, emr-spark-8.2.0+; "Lineage for AWS Glue ETL jobs", "Lineage for
  Amazon EMR"): Glue and EMR register the OpenLineage listener with the `amazon_glue_api` transport
  themselves. The stack sets none of `spark.extraListeners` or `spark.openlineage.transport.*` (a job
  that overrides the transport or removes the listener sends nothing, "Troubleshooting data lineage"),
  and grants the job roles `glue:PostLineageEvent`, which has no resource-level permissions
  ("Permissions required for data lineage"). A created VPC's Glue interface endpoint has no policy,
  that is AWS's full-access default, so it allows the call (infra.network).
* `{datazone_domain_id}` on a runtime without that default (glue-5.1, glue-6.0, EMR before 8.2.0):
  Glue's "Generate lineage events" settings, the listener the runtime ships and the Amazon DataZone
  transport (SageMaker Unified Studio's "Automate lineage capture from tools"), and
  `datazone:PostLineageEvent` on that domain.
* `"off"`: `spark.openlineage.disabled=true` on every job ("Turning lineage capture on or off"): the
  listener stays registered and drops its events.

The jobs write every table by its catalog name (`MERGE INTO glue_catalog.db.t`, `writeTo(name)`), so
the graph shows the Glue table, not a path.
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam

from infra.settings_lineage import DataZoneLineage, LineageSetting
from lakeloader.control import runtimes

LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"
DISABLED = "spark.openlineage.disabled"


def spark_conf(setting: LineageSetting, *, aws_default: bool) -> dict[str, str]:
    """The Spark settings of one engine's jobs: `aws_default` when its runtime captures lineage itself."""
    if setting == "off":
        return {DISABLED: "true"}
    if isinstance(setting, DataZoneLineage) and not aws_default:
        return {
            "spark.extraListeners": LISTENER,
            "spark.openlineage.transport.type": "amazon_datazone_api",
            "spark.openlineage.transport.domainId": setting.datazone_domain_id,
            "spark.glue.accountId": Aws.ACCOUNT_ID,
        }
    return {}


def grant_post_events(role: iam.IRole, setting: LineageSetting, *, aws_default: bool) -> None:
    """What the role that runs the jobs needs to post the events its listener builds."""
    if setting == "off":
        return
    if aws_default:
        role.add_to_principal_policy(
            iam.PolicyStatement(sid="PostGlueLineage", actions=["glue:PostLineageEvent"], resources=["*"])
        )
    elif isinstance(setting, DataZoneLineage):
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PostDataZoneLineage",
                actions=["datazone:PostLineageEvent"],
                resources=[
                    f"arn:{Aws.PARTITION}:datazone:{Aws.REGION}:{Aws.ACCOUNT_ID}:domain/"
                    f"{setting.datazone_domain_id}"
                ],
            )
        )


def glue_captures(runtime: runtimes.Runtime) -> bool:
    """Whether the stage's Glue jobs run where AWS captures lineage by default."""
    return runtime.aws_lineage


def emr_captures(release_label: str) -> bool:
    """Whether the stage's EMR Serverless release captures lineage by default."""
    return runtimes.emr_captures_lineage(release_label)
