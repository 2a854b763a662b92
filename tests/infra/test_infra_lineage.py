"""The stage setting `lineage` in the synthesized template, pinned to AWS's pages:

* "Lineage for AWS Glue ETL jobs" / "Lineage for Amazon EMR": Glue 6.1+ and emr-spark-8.2.0+ register
  the OpenLineage listener with the `amazon_glue_api` transport themselves;
* "Permissions required for data lineage": the job role needs `glue:PostLineageEvent` (no resource-level
  permissions: `Resource: *`), or the job runs and sends nothing;
* "Troubleshooting data lineage": private subnets need the Glue interface endpoint, its policy allowing
  `glue:PostLineageEvent`; a job that overrides `spark.openlineage.transport.type` or removes the
  listener sends nothing;
* "Turning lineage capture on or off": `spark.openlineage.disabled=true` (Glue `--conf`, EMR
  spark-defaults) turns it off;
* SageMaker Unified Studio's "Automate lineage capture from tools" (Glue's "Generate lineage events"):
  the listener with `spark.openlineage.transport.type=amazon_datazone_api` and the domain's id.

The stage that captures lineage by default is a glue-6.1 stage (its row's `aws_lineage`, EMR
emr-spark-8.2.0).
"""

from __future__ import annotations

import pytest

from infra.settings import SettingsError, resolve_stage
from lakeloader.control import runtimes
from tests.infra.cdk_helpers import CREATED_VPC, join, statements, with_settings
from tests.infra.iam_eval import Resolver, _statements, allowed, role_statements
from tests.infra.test_infra_nag import findings
from tests.infra.test_infra_runtimes import context, emr_without_release

DOMAIN = "dzd_5x8example01"
LINEAGE_RUNTIME = "glue-6.1"


@pytest.fixture(scope="module")
def captures_lineage_runtime():
    """The glue-6.1 row: AWS captures its jobs' lineage, and its EMR release's too."""
    row = runtimes.RUNTIMES[LINEAGE_RUNTIME]
    assert row.aws_lineage and runtimes.emr_captures_lineage(row.emr_release_label)
    return row


def on_glue_61(**settings) -> dict:
    return with_settings("dev", runtime=LINEAGE_RUNTIME, emr=emr_without_release(), **settings)


@pytest.fixture(scope="module")
def glue61(synth, captures_lineage_runtime):
    """A glue-6.1 stage in a created VPC, lineage left "on"."""
    return synth("dev", **on_glue_61(network=CREATED_VPC))


@pytest.fixture(scope="module")
def glue61_off(synth, captures_lineage_runtime):
    return synth("dev", **on_glue_61(lineage="off"))


@pytest.fixture(scope="module")
def datazone(synth):
    """The default runtime (glue-5.1, emr-7.12.0) sending lineage to a DataZone domain."""
    return synth("dev", **with_settings("dev", lineage={"datazone_domain_id": DOMAIN}))


def glue_confs(built) -> dict[str, dict[str, str]]:
    """Each Glue job's `--conf` settings, by job name."""
    found = {}
    for resource in built.resources("AWS::Glue::Job").values():
        props = resource["Properties"]
        pairs = join(props["DefaultArguments"]["--conf"]).split(" --conf ")
        found[props["Name"]] = dict(pair.split("=", 1) for pair in pairs)
    assert len(found) == 2, sorted(found)
    return found


def emr_conf(built) -> dict[str, str]:
    """The EMR Serverless application's spark-defaults: every job run on it starts with them."""
    _, app = built.resource("AWS::EMRServerless::Application")
    [defaults] = app["Properties"]["RuntimeConfiguration"]
    assert defaults["Classification"] == "spark-defaults"
    return {key: join(value) for key, value in defaults["Properties"].items()}


def job_roles(built) -> dict[str, str]:
    processing = built.stack.processing
    return {"glue": built.logical_id(processing.glue_role), "emr": built.logical_id(processing.emr_role)}


def role_allows(built, role: str, action: str, resource: str = "*") -> bool:
    return allowed(role_statements(built.template_json, job_roles(built)[role]), action, resource)


def test_glue_61_job_roles_may_post_lineage_events(glue61, captures_lineage_runtime):
    """The Glue job role, and the EMR job role where the release captures lineage, hold
    glue:PostLineageEvent on "*" (the action has no resource-level permissions)."""
    assert role_allows(glue61, "glue", "glue:PostLineageEvent")
    emr_captures = runtimes.emr_captures_lineage(captures_lineage_runtime.emr_release_label)
    assert role_allows(glue61, "emr", "glue:PostLineageEvent") == emr_captures
    granted = [s for s in statements(glue61, job_roles(glue61)["glue"]) if s.get("Sid") == "PostGlueLineage"]
    assert granted == [
        {"Sid": "PostGlueLineage", "Effect": "Allow", "Action": "glue:PostLineageEvent", "Resource": "*"}
    ]


def test_glue_61_jobs_keep_aws_listener_and_transport(glue61):
    """Nothing the stack sets replaces AWS's listener or transport, or turns lineage off."""
    confs = [*glue_confs(glue61).values(), emr_conf(glue61)]
    for conf in confs:
        touched = [k for k in conf if k.startswith("spark.openlineage.") or k == "spark.extraListeners"]
        assert touched == [], touched
    for resource in glue61.resources("AWS::Glue::Job").values():
        arguments = resource["Properties"]["DefaultArguments"]
        assert not [k for k in arguments if "openlineage" in k or "extraListeners" in k]


def test_created_vpc_glue_endpoint_allows_post_lineage_event(glue61):
    """The created VPC's Glue interface endpoint lets the jobs' events through: no policy (AWS's default,
    full access) or one that allows glue:PostLineageEvent."""
    endpoints = [
        props
        for props in (r["Properties"] for r in glue61.resources("AWS::EC2::VPCEndpoint").values())
        if join(props["ServiceName"]).endswith(".glue")
    ]
    assert len(endpoints) == 1
    [endpoint] = endpoints
    assert endpoint["VpcEndpointType"] == "Interface"
    document = endpoint.get("PolicyDocument")
    if document is not None:
        found = _statements("GlueEndpoint", document, Resolver(glue61.template_json))
        assert allowed(found, "glue:PostLineageEvent", "*")


def test_lineage_off_disables_every_job(glue61_off):
    """lineage: off sets spark.openlineage.disabled=true on both Glue jobs and on the EMR application's
    runs, and grants no job role the call."""
    for name, conf in glue_confs(glue61_off).items():
        assert conf.get("spark.openlineage.disabled") == "true", name
    assert emr_conf(glue61_off).get("spark.openlineage.disabled") == "true"
    for role in ("glue", "emr"):
        assert not role_allows(glue61_off, role, "glue:PostLineageEvent"), role


def test_default_runtime_stage_sets_no_lineage(dev):
    """glue-5.1 and emr-7.12.0 capture nothing by default: no permission, no setting."""
    assert not runtimes.RUNTIMES["glue-5.1"].aws_lineage
    for role in ("glue", "emr"):
        assert not role_allows(dev, role, "glue:PostLineageEvent"), role
    for conf in [*glue_confs(dev).values(), emr_conf(dev)]:
        assert not [k for k in conf if "openlineage" in k or k == "spark.extraListeners"]


def test_datazone_lineage_adds_the_listener_and_transport(datazone):
    """lineage: {datazone_domain_id} on glue-5.1: the listener Glue 5.x and EMR 7.11+ ship, with the
    DataZone transport and domain, on both Glue jobs and the EMR runs."""
    expected = {
        "spark.extraListeners": "io.openlineage.spark.agent.OpenLineageSparkListener",
        "spark.openlineage.transport.type": "amazon_datazone_api",
        "spark.openlineage.transport.domainId": DOMAIN,
        "spark.glue.accountId": "${AWS::AccountId}",
    }
    for conf in [*glue_confs(datazone).values(), emr_conf(datazone)]:
        assert {k: conf.get(k) for k in expected} == expected


def test_datazone_lineage_grants_post_lineage_event_on_the_domain(datazone):
    domain_arn = f"arn:aws:datazone:us-east-1:123456789012:domain/{DOMAIN}"
    for role in ("glue", "emr"):
        assert role_allows(datazone, role, "datazone:PostLineageEvent", domain_arn), role
        assert not role_allows(datazone, role, "datazone:PostLineageEvent", f"{domain_arn}x"), role
        assert not role_allows(datazone, role, "glue:PostLineageEvent"), role


def test_no_unacknowledged_nag_findings(glue61, datazone):
    """glue:PostLineageEvent on "*" (the action has no resource-level permissions) is among the
    wildcards the job roles acknowledge; the DataZone grant names its domain."""
    assert findings(glue61.app) == []
    assert findings(datazone.app) == []


def test_datazone_refused_where_aws_captures_lineage(captures_lineage_runtime):
    """A DataZone transport on glue-6.1 would override amazon_glue_api, and AWS's graph would get nothing."""
    settings = context(
        runtime=LINEAGE_RUNTIME, emr=emr_without_release(), lineage={"datazone_domain_id": DOMAIN}
    )
    with pytest.raises(
        SettingsError, match=r"lakeloader:stages\.dev\.lineage\.datazone_domain_id: runtime glue-6\.1"
    ):
        resolve_stage(settings)


def test_emr_spark_defaults_may_not_replace_aws_listener(captures_lineage_runtime):
    """On an EMR release that captures lineage, a stage's own spark-defaults that replace the listener or
    its transport are refused; with lineage "off" nothing is sent anyway."""
    if not runtimes.emr_captures_lineage(captures_lineage_runtime.emr_release_label):
        pytest.skip(f"{captures_lineage_runtime.emr_release_label} captures no lineage by default")
    emr = {**emr_without_release(), "spark_defaults": {"spark.openlineage.transport.type": "console"}}
    refused = r"lakeloader:stages\.dev\.emr\.spark_defaults: spark\.openlineage"
    with pytest.raises(SettingsError, match=refused):
        resolve_stage(context(runtime=LINEAGE_RUNTIME, emr=emr))
    resolve_stage(context(runtime=LINEAGE_RUNTIME, emr=emr, lineage="off"))


def test_datazone_domain_id_is_checked():
    with pytest.raises(SettingsError, match=r"lineage"):
        resolve_stage(context(lineage={"datazone_domain_id": "my-domain"}))


@pytest.mark.parametrize(
    ("label", "captures"),
    [("emr-7.12.0", False), ("emr-spark-8.1.0", False), ("emr-spark-8.2.0", True), ("emr-spark-8.3.1", True)],
)
def test_emr_captures_lineage_from_emr_spark_8_2_0(label, captures):
    assert runtimes.emr_captures_lineage(label) is captures
