"""What a first deploy in a real account needs and the emulator cannot show (issue 40): each test follows
the AWS page its docstring names, as read against the synthesized template."""

from __future__ import annotations

import re

import pytest
import yaml

from infra.packaging import REPO_ROOT
from infra.settings import SettingsError
from tests.infra.cdk_helpers import CREATED_VPC, join, synthesize, with_settings

S3A_REGION = "spark.hadoop.fs.s3a.endpoint.region"
ATHENA_WORKGROUP_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,128}$")


def test_every_glue_and_emr_job_sets_the_s3a_region(stage_synth):
    """Migrating AWS Glue for Spark jobs to AWS Glue version 5.1
    (https://docs.aws.amazon.com/glue/latest/dg/migrating-version-51.html): S3A replaces EMRFS for
    `s3://`, and without `fs.s3a.endpoint.region` S3A does not use the job's region. Both engines."""
    jobs = stage_synth.resources("AWS::Glue::Job")
    assert len(jobs) == 2
    for job in jobs.values():
        settings = join(job["Properties"]["DefaultArguments"]["--conf"]).split(" --conf ")
        assert f"{S3A_REGION}=${{AWS::Region}}" in settings
    (app,) = stage_synth.resources("AWS::EMRServerless::Application").values()
    (defaults,) = app["Properties"]["RuntimeConfiguration"]
    assert defaults["Classification"] == "spark-defaults"
    assert defaults["Properties"][S3A_REGION] == {"Ref": "AWS::Region"}


def endpoint_services(built) -> set[str]:
    return {
        join(props["Properties"]["ServiceName"]).rsplit(".", 1)[1]
        for props in built.resources("AWS::EC2::VPCEndpoint").values()
    }


def test_lake_formation_mode_in_a_created_vpc_has_a_lake_formation_endpoint(synth):
    """AWS Lake Formation and interface VPC endpoints (AWS PrivateLink)
    (https://docs.aws.amazon.com/lake-formation/latest/dg/privatelink.html): full table access vends
    each table's credentials through Lake Formation (GetDataAccess), which a VPC with no route out
    reaches only through a `com.amazonaws.<region>.lakeformation` endpoint. IAM mode needs none."""
    lf = synth("dev", lake_formation="true", **with_settings("dev", network=CREATED_VPC))
    iam_mode = synth("dev", **with_settings("dev", network=CREATED_VPC))
    assert "lakeformation" in endpoint_services(lf)
    assert endpoint_services(lf) - endpoint_services(iam_mode) == {"lakeformation"}
    (endpoint,) = [
        e["Properties"]
        for e in lf.resources("AWS::EC2::VPCEndpoint").values()
        if join(e["Properties"]["ServiceName"]).endswith(".lakeformation")
    ]
    assert endpoint["PrivateDnsEnabled"] is True
    assert endpoint["VpcEndpointType"] == "Interface"


def key_statements(built) -> dict[str, dict]:
    (key,) = built.resources("AWS::KMS::Key").values()
    return {s["Sid"]: s for s in key["Properties"]["KeyPolicy"]["Statement"] if "Sid" in s}


def test_eventbridge_may_use_the_key_of_the_alarm_topic_without_a_source_condition(dev):
    """Amazon SNS, "Enable compatibility between event sources from AWS services and encrypted topics"
    (https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services):
    the key policy lets events.amazonaws.com use kms:GenerateDataKey* and kms:Decrypt; the request
    EventBridge makes carries no aws:SourceAccount, so a condition on it drops every failure
    notification (every service principal's statement: test_infra_key_policy)."""
    statements = key_statements(dev)
    events = statements["AllowEventBridgeRules"]
    assert events["Principal"] == {"Service": "events.amazonaws.com"}
    assert sorted(events["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert "Condition" not in events
    others = [s for sid, s in statements.items() if sid not in ("AllowEventBridgeRules",)]
    assert all("events.amazonaws.com" not in str(s.get("Principal")) for s in others)


def test_flex_with_a_worker_type_glue_cannot_flex_is_refused_at_synth(tmp_path):
    """AWS Glue job properties, "Job run execution class"
    (https://docs.aws.amazon.com/glue/latest/dg/add-job.html): Flex runs jobs of Glue 3.0 or later on
    G.1X or G.2X workers only. The stage's FLEX default runs on the ingest job's workers."""
    ingest = {"worker_type": "G.4X", "number_of_workers": 2, "timeout_minutes": 60, "max_retries": 0,
              "max_concurrent_runs": 10}  # fmt: skip
    batching = {"execution_class": "FLEX"}
    with pytest.raises(SettingsError, match=r"batching\.execution_class FLEX .* G\.4X") as raised:
        synthesize(tmp_path, "dev", **with_settings("dev", ingest=ingest, batching=batching))
    assert "\n" not in str(raised.value)


def test_a_table_that_flexes_on_workers_glue_cannot_flex_is_refused_at_synth(tmp_path):
    """The same rule for a table's own `trigger.execution_class: FLEX` (Glue's "Job run execution
    class"): its runs start the ingest job with ExecutionClass FLEX."""
    config = yaml.safe_load((REPO_ROOT / "config" / "tables.yaml").read_text())
    config["tables"][0]["trigger"] = {**config["tables"][0].get("trigger", {}), "execution_class": "FLEX"}
    path = tmp_path / "tables.yaml"
    path.write_text(yaml.safe_dump(config))
    ingest = {"worker_type": "R.8X", "number_of_workers": 2, "timeout_minutes": 60, "max_retries": 0,
              "max_concurrent_runs": 10}  # fmt: skip
    with pytest.raises(SettingsError, match=r"ingest\.worker_type: table crm\.customers .* R\.8X") as raised:
        synthesize(tmp_path / "out", "dev", config=str(path), **with_settings("dev", ingest=ingest))
    assert "\n" not in str(raised.value)


def test_workgroup_names_stay_in_athenas_characters_for_any_role_name(synth):
    """Athena API Reference, CreateWorkGroup (https://docs.aws.amazon.com/athena/latest/APIReference/
    API_CreateWorkGroup.html): Name matches `[a-zA-Z0-9._-]{1,128}`; an IAM role name may also hold
    `+=,@` (IAM's CreateRole, RoleName `[\\w+=,.@-]+`)."""
    readers = [{"role_arn": "arn:aws:iam::123456789012:role/a+b@c"}]
    built = synth("dev", **with_settings("dev", readers=readers))
    (workgroup,) = built.resources("AWS::Athena::WorkGroup").values()
    name = workgroup["Properties"]["Name"]
    assert ATHENA_WORKGROUP_NAME.match(name), name
    assert name == "lakeloader-dev-reader-a_b_c"
    results = workgroup["Properties"]["WorkGroupConfiguration"]["ResultConfiguration"]
    assert join(results["OutputLocation"]).endswith("/a_b_c/")


def test_two_role_names_that_would_share_a_workgroup_are_refused_at_synth(tmp_path):
    """The substitution of CreateWorkGroup's character set must not give two readers one workgroup."""
    readers = [
        {"role_arn": "arn:aws:iam::123456789012:role/a+b"},
        {"role_arn": "arn:aws:iam::123456789012:role/a=b"},
    ]
    with pytest.raises(SettingsError, match=r"roles 'a\+b' and 'a=b' would share .* 'a_b'") as raised:
        synthesize(tmp_path, "dev", **with_settings("dev", readers=readers))
    assert "\n" not in str(raised.value)
