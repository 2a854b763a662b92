"""Least privilege: roles reach only their buckets/prefixes, tables and key."""

from __future__ import annotations

import pytest

from tests.infra.cdk_helpers import as_list, join, statements, with_settings

# Actions that take no resource-level permission, granted on "*" (each with a reason in the code).
STAR_ACTIONS = {
    "cloudwatch:PutMetricData",  # conditioned on the namespace
    "lakeformation:GetDataAccess",
    "lakeformation:GrantPermissions",  # reader-grants: its grant options decide
    "lakeformation:RevokePermissions",
    "logs:CreateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:DescribeLogGroups",
    "logs:DescribeResourcePolicies",
    "logs:GetLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:UpdateLogDelivery",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
    "xray:PutTelemetryRecords",
    "xray:PutTraceSegments",
}


def all_statements(synth):
    for role_id in synth.resources("AWS::IAM::Role"):
        for statement in statements(synth, role_id):
            yield role_id, statement


def our_roles(synth) -> dict[str, str]:
    """Role name -> logical id of the roles lakeloader defines (CDK's own handlers excluded)."""
    return {
        join(r["Properties"]["RoleName"]): k
        for k, r in synth.resources("AWS::IAM::Role").items()
        if "RoleName" in r["Properties"]
    }


def test_no_admin_or_service_wide_actions(stage_synth):
    for role_id, statement in all_statements(stage_synth):
        for action in as_list(statement["Action"]):
            assert action != "*" and not action.endswith(":*"), (role_id, action)


def test_star_resources_only_for_actions_without_resource_level_permissions(synth):
    exclude = [
        {
            "role_arn": "arn:aws:iam::123456789012:role/support",
            "tables": ["crm.customers"],
            "exclude_columns": {"crm.customers": ["email"]},
        }
    ]
    with_grants = synth("dev", lake_formation="true", **with_settings("dev", readers=exclude))
    assert with_grants.resources("Custom::LakeloaderReaderGrants")  # the reader-grants Lambda is there
    for synthesized in (synth("dev"), synth("dev", lake_formation="true"), with_grants):
        for role_id, statement in all_statements(synthesized):
            if statement["Effect"] == "Allow" and "*" in as_list(statement["Resource"]):
                assert set(as_list(statement["Action"])) <= STAR_ACTIONS, role_id


def test_metrics_are_limited_to_our_namespaces(dev):
    checked = 0
    for _, statement in all_statements(dev):
        if "cloudwatch:PutMetricData" in as_list(statement["Action"]):
            assert statement["Condition"] == {
                "StringEquals": {"cloudwatch:namespace": ["lakeloader", "Glue"]}
            }
            checked += 1
    assert checked == 2  # the Glue and EMR job roles; none checked would pass vacuously


def test_our_roles_use_no_aws_managed_policies_and_are_named_by_stage_and_region(stage_synth):
    """IAM names are account-wide: with the region in them, a stage deploys to two regions of one account."""
    roles = our_roles(stage_synth)
    assert sorted(roles) == sorted(
        f"lakeloader-{stage_synth.stage}-{n}-${{AWS::Region}}"
        for n in ["config-sync", "s3-arrival", "glue-job", "emr-job"]
        + (["crawler"] if stage_synth.stage == "dev" else [])
    )
    for logical_id in roles.values():
        assert "ManagedPolicyArns" not in stage_synth.template_json["Resources"][logical_id]["Properties"]


def s3_object_resources(synth, role_id: str) -> set[str]:
    found = set()
    for statement in statements(synth, role_id):
        if any(a.startswith("s3:") for a in as_list(statement["Action"])):
            found |= {join(r) for r in as_list(statement["Resource"])}
    return found


@pytest.mark.parametrize("role", ["glue_role", "emr_role"])
def test_job_roles_reach_only_their_prefixes(dev, role):
    role_id = dev.logical_id(getattr(dev.stack.processing, role))
    storage = dev.stack.storage
    raw, curated, quarantine, assets = (
        dev.logical_id(b) for b in (storage.raw, storage.curated, storage.quarantine, storage.assets)
    )
    allowed = {
        f"${{{raw}.Arn}}",
        # the tables' source folders, not each table's prefix: one grant a source (docs/scale.md)
        f"${{{raw}.Arn}}/crm/*",
        f"${{{raw}.Arn}}/inventory/*",
        f"${{{raw}.Arn}}/sales/*",
        f"${{{raw}.Arn}}/lakeloader-canary/*",  # the canary tables every stage deploys
        f"${{{curated}.Arn}}",
        f"${{{curated}.Arn}}/warehouse/*",
        f"${{{quarantine}.Arn}}",
        f"${{{quarantine}.Arn}}/*",
        f"${{{assets}.Arn}}",
        f"${{{assets}.Arn}}/glue/tmp/*",
        f"${{{assets}.Arn}}/glue/spark-ui/*",
        f"${{{assets}.Arn}}/emr/logs/*",
    }
    resources = s3_object_resources(dev, role_id)
    cdk_assets = {r for r in resources if "cdk-hnb659fds-assets" in r}
    assert resources - cdk_assets <= allowed
    # code assets: the bucket and single objects, never the whole bootstrap bucket
    assert all(not r.endswith("/*") for r in cdk_assets), cdk_assets


def test_nothing_writes_the_raw_bucket(stage_synth):
    raw = stage_synth.logical_id(stage_synth.stack.storage.raw)
    for role_id, statement in all_statements(stage_synth):
        writes = [
            a for a in as_list(statement["Action"]) if a.startswith("s3:Put") or a.startswith("s3:Delete")
        ]
        if writes:
            resources = [join(r) for r in as_list(statement["Resource"])]
            assert not [r for r in resources if r.startswith(f"${{{raw}.Arn}}/")], (role_id, writes)


def test_arrival_lambda_starts_only_the_ingest_job_and_passes_only_the_emr_role(dev):
    role_id = dev.logical_id(dev.stack.triggers.arrival.role)
    by_sid = {s.get("Sid"): s for s in statements(dev, role_id)}
    assert by_sid["StartGlueIngest"]["Resource"] == join_ref_job(dev, dev.stack.processing.ingest_job)
    assert by_sid["PassEmrJobRole"] == {
        "Action": "iam:PassRole",
        "Condition": {"StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}},
        "Effect": "Allow",
        "Resource": {"Fn::GetAtt": [dev.logical_id(dev.stack.processing.emr_role), "Arn"]},
        "Sid": "PassEmrJobRole",
    }
    passes = [s for _, s in all_statements(dev) if "iam:PassRole" in as_list(s["Action"])]
    assert len(passes) == 1


def join_ref_job(synth, job) -> dict:
    return {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":glue:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":job/",
                {"Ref": synth.logical_id(job)},
            ],
        ]
    }


def test_dynamodb_access_is_per_table(dev):
    tables = {
        dev.logical_id(t)
        for t in (
            dev.stack.config_store.config_table,
            dev.stack.config_store.ledger_table,
            dev.stack.config_store.runs_table,
        )
    }
    checked = set()
    for role_id, statement in all_statements(dev):
        if any(a.startswith("dynamodb:") for a in as_list(statement["Action"])):
            for resource in as_list(statement["Resource"]):
                assert resource["Fn::GetAtt"][0] in tables and resource["Fn::GetAtt"][1] == "Arn"
            checked.add(role_id)
    assert len(checked) == 4  # jobs (Glue, EMR), arrival and config sync; none would pass vacuously
