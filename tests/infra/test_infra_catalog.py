"""Catalog: Glue databases, security configuration, crawlers, Lake Formation mode."""

from __future__ import annotations

import pytest
from aws_cdk import App
from aws_cdk.assertions import Match

from infra.app import build, cdk_json_context
from infra.settings import SettingsError
from tests.infra.cdk_helpers import join


def test_one_glue_database_per_target_database(stage_synth):
    names = {
        r["Properties"]["DatabaseInput"]["Name"]
        for r in stage_synth.resources("AWS::Glue::Database").values()
        if "_raw_" not in r["Properties"]["DatabaseInput"]["Name"]
    }
    prefix = f"lakeloader_{stage_synth.stage}_"  # stage-scoped: stages share no database
    assert names == {f"{prefix}crm", f"{prefix}sales", f"{prefix}inventory", f"{prefix}lakeloader_canary"}
    curated = stage_synth.logical_id(stage_synth.stack.storage.curated)
    crm = f"{prefix}crm"
    db = stage_synth.resource("AWS::Glue::Database", lambda p: p["DatabaseInput"]["Name"] == crm)[1]
    assert join(db["Properties"]["DatabaseInput"]["LocationUri"]) == (
        f"s3://${{{curated}}}/warehouse/{prefix}crm.db"
    )


def test_security_configuration_encrypts_s3_logs_and_bookmarks_with_the_key(dev):
    key = {"Fn::GetAtt": [dev.logical_id(dev.stack.storage.key), "Arn"]}
    dev.template.has_resource_properties(
        "AWS::Glue::SecurityConfiguration",
        {
            "Name": "lakeloader-dev-glue",
            "EncryptionConfiguration": {
                "CloudWatchEncryption": {"CloudWatchEncryptionMode": "SSE-KMS", "KmsKeyArn": key},
                "JobBookmarksEncryption": {"JobBookmarksEncryptionMode": "CSE-KMS", "KmsKeyArn": key},
                "S3Encryptions": [{"S3EncryptionMode": "SSE-KMS", "KmsKeyArn": key}],
            },
        },
    )


def test_dev_has_an_on_demand_crawler_per_source(dev):
    crawlers = dev.resources("AWS::Glue::Crawler")
    by_name = {c["Properties"]["Name"]: c["Properties"] for c in crawlers.values()}
    assert sorted(by_name) == [
        "lakeloader-dev-raw-crm",
        "lakeloader-dev-raw-inventory",
        "lakeloader-dev-raw-sales",
    ]
    crm = by_name["lakeloader-dev-raw-crm"]
    raw = dev.logical_id(dev.stack.storage.raw)
    assert [join(t["Path"]) for t in crm["Targets"]["S3Targets"]] == [
        f"s3://${{{raw}}}/crm/public/customers/"
    ]
    assert crm["DatabaseName"] == "lakeloader_dev_raw_crm"
    assert "Schedule" not in crm
    assert crm["CrawlerSecurityConfiguration"] == {
        "Ref": dev.logical_id(dev.stack.catalog.security_configuration)
    }


def test_prod_has_no_crawlers(prod):
    assert prod.resources("AWS::Glue::Crawler") == {}


def test_crawler_schedule_per_source_from_context(synth):
    stages = cdk_json_context()["lakeloader:stages"]
    stages["dev"] = {**stages["dev"], "crawlers": {"sales": "cron(0 4 * * ? *)"}}
    synthesized = synth("dev", **{"lakeloader:stages": stages})
    crawlers = [c["Properties"] for c in synthesized.resources("AWS::Glue::Crawler").values()]
    assert [(c["Name"], c.get("Schedule")) for c in crawlers] == [
        ("lakeloader-dev-raw-sales", {"ScheduleExpression": "cron(0 4 * * ? *)"})
    ]


def test_crawler_for_an_unknown_source_fails_synth():
    context = cdk_json_context()
    context["lakeloader:stages"]["dev"]["crawlers"] = {"hr": "on-demand"}
    with pytest.raises(SettingsError, match=r"crawlers: no table of the config lies under 'hr'"):
        build(App(context=context), nag=False)


def test_no_lake_formation_resources_by_default(stage_synth):
    assert stage_synth.resources("AWS::LakeFormation::Resource") == {}
    assert stage_synth.resources("AWS::LakeFormation::PrincipalPermissions") == {}


def test_lake_formation_mode_registers_the_warehouse_and_grants_the_job_roles(synth):
    lf = synth("dev", lake_formation="true")
    curated = lf.logical_id(lf.stack.storage.curated)
    _, location = lf.resource("AWS::LakeFormation::Resource")
    assert join(location["Properties"]["ResourceArn"]) == f"${{{curated}.Arn}}/warehouse"
    assert location["Properties"]["UseServiceLinkedRole"] is False
    grants = [g["Properties"] for g in lf.resources("AWS::LakeFormation::PrincipalPermissions").values()]
    glue_role = {"Fn::GetAtt": [lf.logical_id(lf.stack.processing.glue_role), "Arn"]}
    mine = [g for g in grants if g["Principal"]["DataLakePrincipalIdentifier"] == glue_role]
    assert {"DATA_LOCATION_ACCESS"} in [set(g["Permissions"]) for g in mine]
    tables = [g for g in mine if "Table" in g["Resource"]]
    assert sorted(g["Resource"]["Table"]["DatabaseName"] for g in tables) == [
        "lakeloader_dev_crm",
        "lakeloader_dev_inventory",
        "lakeloader_dev_lakeloader_canary",
        "lakeloader_dev_sales",
    ]
    assert all(g["Permissions"] == ["ALL"] for g in tables), "full table access: a job that writes needs ALL"
    assert all(g["PermissionsWithGrantOption"] == [] for g in grants)
    lf.template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Action": "lakeformation:GetDataAccess", "Resource": "*"})]
                )
            }
        },
    )
