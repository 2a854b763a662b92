"""Readers' grants on tables by name are applied when the table first exists: no CloudFormation grant
of a table the first deploy cannot have yet (it would fail and roll the stack back), and no second
deploy needed.

* Lake Formation grants a named table, or its columns, only once it exists ("Granting permissions on
  Data Catalog resources", https://docs.aws.amazon.com/lake-formation/latest/dg/granting-catalog-permissions.html);
  all tables of a database take a wildcard, which needs none (those stay CloudFormation grants).
* Glue sends "Glue Data Catalog Database State Change" with `typeOfChange` CreateTable, the database
  and the tables ("AWS Glue events", https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-glue.html),
  on a best effort basis: the rule on it is backed by an hourly run and by each deploy.
* Whoever grants must hold the permission with grant option, or be a data lake administrator (same
  Lake Formation page): the Lambda holds SELECT and DESCRIBE with grant option on the readers'
  databases' tables (a wildcard grant), and is no administrator.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from cfnlint.api import ManualArgs, lint

from lakeloader.control import reader_grants
from tests.infra.cdk_helpers import with_settings
from tests.infra.iam_eval import allowed, role_statements
from tests.infra.test_infra_cfn_lint import IGNORED, REGIONS
from tests.infra.test_infra_nag import findings

ACCOUNT = "123456789012"
HANDLER = Path(__file__).resolve().parents[2] / "lambda" / "reader_grants" / "handler.py"
ANALYST = f"arn:aws:iam::{ACCOUNT}:role/analyst"
SUPPORT = f"arn:aws:iam::{ACCOUNT}:role/support"
READERS = [
    {
        "role_arn": ANALYST,
        "tables": ["crm.*", "sales.order_lines"],
        "exclude_columns": {"sales.order_lines": ["price"]},
    },
    {
        "role_arn": SUPPORT,
        "tables": ["crm.customers"],
        "exclude_columns": {"crm.customers": ["email", "phone"]},
    },
]


@pytest.fixture(scope="module")
def lf(synth):
    return synth("dev", lake_formation="true", **with_settings("dev", readers=READERS))


def grants_function(built) -> tuple[str, dict]:
    return built.resource(
        "AWS::Lambda::Function", lambda p: p.get("FunctionName") == "lakeloader-dev-reader-grants"
    )


def test_no_cloudformation_grant_names_a_table_the_jobs_create(lf):
    """Every reader grant CloudFormation makes is on a database or a whole database's tables
    (wildcard); the named table and the table with hidden columns are the Lambda's."""
    for props in (p["Properties"] for p in lf.resources("AWS::LakeFormation::PrincipalPermissions").values()):
        resource = props["Resource"]
        assert "TableWithColumns" not in resource, resource
        if "Table" in resource:
            assert resource["Table"].get("TableWildcard") == {} and "Name" not in resource["Table"], resource


def test_the_lambda_holds_the_named_grants_and_the_deploy_applies_them(lf):
    """The grants are in the Lambda's environment (what Glue's events and the schedule apply) and in
    the custom resource's properties (what each deploy applies, and revokes when they are dropped)."""
    _, function = grants_function(lf)
    env = function["Properties"]["Environment"]["Variables"]
    grants = reader_grants.decode(env[reader_grants.ENV_GRANTS])
    assert {(g.principal, g.database, g.table, g.permissions, g.excluded_columns) for g in grants} == {
        (ANALYST, "lakeloader_dev_sales", "order_lines", ("SELECT",), ("price",)),
        (SUPPORT, "lakeloader_dev_crm", "customers", ("SELECT",), ("email", "phone")),
    }
    (custom,) = lf.resources("Custom::LakeloaderReaderGrants").values()
    assert custom["Properties"][reader_grants.PROPERTY_GRANTS] == env[reader_grants.ENV_GRANTS]
    # the whole crm database of the analyst stays a CloudFormation wildcard grant
    wildcards = [
        p["Properties"]["Resource"]["Table"]
        for p in lf.resources("AWS::LakeFormation::PrincipalPermissions").values()
        if p["Properties"]["Principal"]["DataLakePrincipalIdentifier"] == ANALYST
        and "Table" in p["Properties"]["Resource"]
    ]
    assert wildcards == [
        {"CatalogId": {"Ref": "AWS::AccountId"}, "DatabaseName": "lakeloader_dev_crm", "TableWildcard": {}}
    ]


def test_glue_table_creation_in_the_readers_databases_invokes_the_lambda(lf):
    function_id, _ = grants_function(lf)
    rules = list(lf.resources("AWS::Events::Rule").values())
    targeted = [
        r["Properties"]
        for r in rules
        if any(t["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]} for t in r["Properties"].get("Targets", []))
    ]
    patterns = [r["EventPattern"] for r in targeted if "EventPattern" in r]
    assert patterns == [
        {
            "source": ["aws.glue"],
            "detail-type": ["Glue Data Catalog Database State Change"],
            "detail": {
                "databaseName": ["lakeloader_dev_crm", "lakeloader_dev_sales"],
                "typeOfChange": ["CreateTable"],
            },
        }
    ]
    assert [r["ScheduleExpression"] for r in targeted if "ScheduleExpression" in r] == ["rate(1 hour)"]


def test_the_lambda_may_grant_and_nothing_more(lf):
    """Lake Formation: SELECT and DESCRIBE with grant option on the readers' databases' tables (a
    wildcard, so a deploy needs no table). IAM: grant and revoke, read those tables' catalog entries;
    no data, no vended credentials, no catalog writes."""
    function_id, function = grants_function(lf)
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    role_arn = {"Fn::GetAtt": [role_id, "Arn"]}
    mine = [
        p["Properties"]
        for p in lf.resources("AWS::LakeFormation::PrincipalPermissions").values()
        if p["Properties"]["Principal"]["DataLakePrincipalIdentifier"] == role_arn
    ]
    assert sorted(p["Resource"]["Table"]["DatabaseName"] for p in mine) == [
        "lakeloader_dev_crm",
        "lakeloader_dev_sales",
    ]
    for props in mine:
        assert props["Resource"]["Table"]["TableWildcard"] == {}
        assert props["Permissions"] == props["PermissionsWithGrantOption"] == ["SELECT", "DESCRIBE"]
    statements = role_statements(lf.template_json, role_id)
    for action in ("lakeformation:GrantPermissions", "lakeformation:RevokePermissions"):
        assert allowed(statements, action, "*"), action
    table = f"arn:aws:glue:us-east-1:{ACCOUNT}:table/lakeloader_dev_crm/customers"
    assert allowed(statements, "glue:GetTable", table)
    for action in (
        "glue:CreateTable",
        "glue:UpdateTable",
        "lakeformation:GetDataAccess",
        "lakeformation:PutDataLakeSettings",
    ):
        assert not allowed(statements, action, table) and not allowed(statements, action, "*"), action
    assert not allowed(statements, "s3:GetObject", "arn:aws:s3:::lakeloader-dev-curated/warehouse/x")
    # the deploy's custom resource runs once the Lambda may grant
    (custom_id,) = lf.resources("Custom::LakeloaderReaderGrants")
    depends = set(lf.template_json["Resources"][custom_id].get("DependsOn", []))
    grantor_ids = {
        k
        for k, v in lf.resources("AWS::LakeFormation::PrincipalPermissions").items()
        if v["Properties"] in mine
    }
    assert grantor_ids <= depends


@pytest.mark.parametrize("lake_formation", ["false", "true"])
def test_no_lambda_without_grants_on_tables_by_name(synth, lake_formation):
    """IAM mode grants by IAM policy (no Lake Formation), and whole databases take wildcards."""
    readers = [{"role_arn": ANALYST, "tables": ["crm.*"]}]
    built = synth("dev", lake_formation=lake_formation, **with_settings("dev", readers=readers))
    assert built.resources("Custom::LakeloaderReaderGrants") == {}
    names = [
        json.dumps(p["Properties"].get("FunctionName"))
        for p in built.resources("AWS::Lambda::Function").values()
    ]
    assert not [n for n in names if "reader-grants" in n]


def test_the_reader_grants_lambda_passes_cdk_nag_and_cfn_lint(lf):
    """The stack's other checks, on a stage that has the Lambda (the shared variants' readers
    take whole databases only, so they have none)."""
    assert lf.resources("Custom::LakeloaderReaderGrants")
    assert findings(lf.app) == []
    matches = lint(lf.template_path.read_text(), config=ManualArgs(regions=REGIONS, ignore_checks=IGNORED))
    assert [f"{m.rule.id} {m.message} ({'/'.join(str(p) for p in m.path)})" for m in matches] == []


def published_metric(monkeypatch, capsys, function_name: str) -> dict:
    """The embedded-metric log line the deployed handler (lambda/reader_grants/handler.py) writes on an
    hourly run, as Lambda runs it (AWS_LAMBDA_FUNCTION_NAME set): namespace, metric, dimensions."""
    spec = importlib.util.spec_from_file_location("reader_grants_handler", HANDLER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", function_name)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv(reader_grants.ENV_CATALOG_ID, ACCOUNT)
    monkeypatch.delenv(reader_grants.ENV_GRANTS, raising=False)  # no grant: the run calls no AWS API
    capsys.readouterr()
    module.handler({"detail-type": reader_grants.SCHEDULED_DETAIL_TYPE}, None)
    (line,) = [json.loads(out) for out in capsys.readouterr().out.splitlines() if '"_aws"' in out]
    (directive,) = line["_aws"]["CloudWatchMetrics"]
    (dimensions,) = directive["Dimensions"]
    return {
        "Namespace": directive["Namespace"],
        "MetricName": directive["Metrics"][0]["Name"],
        "Dimensions": {name: line[name] for name in dimensions},
    }


def test_an_alarm_tells_the_operator_of_ungranted_reader_grants(lf, monkeypatch, capsys):
    """A deploy never fails for a reader grant (issue 68), so the stage alarms on what the grants
    Lambda publishes when it could not apply one: its own function's ReaderGrantsUngranted, as the
    handler writes it, at 1 or more in an hour (one hourly run), notifying the alarm topic like the
    stage's other alarms, and naming the command that lists each grant with its fix."""
    logical, function = grants_function(lf)
    published = published_metric(monkeypatch, capsys, function["Properties"]["FunctionName"])
    assert published == {
        "Namespace": "lakeloader",
        "MetricName": "ReaderGrantsUngranted",
        "Dimensions": {"Function": "lakeloader-dev-reader-grants"},
    }
    _, alarm = lf.resource(
        "AWS::CloudWatch::Alarm", lambda p: p.get("AlarmName") == "lakeloader-dev-reader-grants-ungranted"
    )
    props = alarm["Properties"]
    (watched,) = props["Metrics"]  # a labelled metric: one MetricStat
    assert watched["MetricStat"]["Metric"] == {
        **published,
        "Dimensions": [{"Name": "Function", "Value": {"Ref": logical}}],  # the FunctionName above
    }
    assert (watched["MetricStat"]["Stat"], watched["MetricStat"]["Period"]) == ("Maximum", 3600)
    assert props["EvaluationPeriods"] == 1
    assert (props["Threshold"], props["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert props["AlarmActions"] == [{"Ref": lf.logical_id(lf.stack.alarm_topic.topic)}]
    assert "lakeloader doctor --stage dev" in props["AlarmDescription"]


def test_no_ungranted_alarm_without_the_grants_lambda(synth):
    readers = [{"role_arn": ANALYST, "tables": ["crm.*"]}]
    built = synth("dev", lake_formation="true", **with_settings("dev", readers=readers))
    names = [a["Properties"]["AlarmName"] for a in built.resources("AWS::CloudWatch::Alarm").values()]
    assert "lakeloader-dev-reader-grants-ungranted" not in names
