"""Deploying into a shared account: stage-scoped Glue databases, no reserved concurrency by default,
S3-valid bucket names, retention on every log group, least-privilege catalog actions, Lake Formation."""

from __future__ import annotations

import copy
import re

import pytest
from aws_cdk import App

from infra.app import build, cdk_json_context
from infra.catalog import glue_job_log_groups
from infra.settings import ArrivalLambdaSettings, SettingsError
from infra.storage import bucket_name_problem
from tests.infra.cdk_helpers import as_list, join, statements

PREFIXED = {name: f"lakeloader_dev_{name}" for name in ("crm", "inventory", "lakeloader_canary", "sales")}


def stages_with(stage: str, **settings) -> dict:
    """cdk.json's stages with some settings of one stage replaced."""
    stages = copy.deepcopy(cdk_json_context()["lakeloader:stages"])
    stages[stage].update(settings)
    return stages


def glue_databases(synth) -> set[str]:
    databases = synth.resources("AWS::Glue::Database").values()
    return {n for n in (r["Properties"]["DatabaseInput"]["Name"] for r in databases) if "_raw_" not in n}


def outputs(synth) -> dict[str, str]:
    return {k: join(v["Value"]) for k, v in synth.template_json["Outputs"].items()}


def job_arguments(synth) -> list[dict]:
    return [job["Properties"]["DefaultArguments"] for job in synth.resources("AWS::Glue::Job").values()]


def catalog_resources(synth, role) -> list[str]:
    """The Glue ARNs a role's policy names, as readable strings."""
    found = statements(synth, synth.logical_id(role))
    glue = [s for s in found if any(a.startswith("glue:") for a in as_list(s["Action"]))]
    return [join(r) for s in glue for r in s["Resource"]]


# --- stage-scoped Glue databases ----------------------------------------------------------------


def test_databases_jobs_and_outputs_use_the_stage_prefix(dev):
    assert glue_databases(dev) == set(PREFIXED.values())
    assert {args["--lakeloader_database_prefix"] for args in job_arguments(dev)} == {"lakeloader_dev_"}
    assert dev.stack.processing.emr.entry_point_arguments[-2:] == ["--database-prefix", "lakeloader_dev_"]
    out = outputs(dev)
    assert out["GlueDatabasePrefix"] == "lakeloader_dev_"
    databases = dev.stack.catalog.databases  # the output refers to them: crm=<Ref of lakeloader_dev_crm>
    assert out["GlueDatabases"] == ",".join(f"{k}=${{{dev.logical_id(databases[k])}}}" for k in PREFIXED)
    for name, physical in PREFIXED.items():
        resource = dev.template_json["Resources"][dev.logical_id(databases[name])]
        assert resource["Properties"]["DatabaseInput"]["Name"] == physical


@pytest.mark.parametrize("role", ["glue_role", "emr_role"])
def test_job_roles_reach_the_stage_databases_only(dev, role):
    arns = catalog_resources(dev, getattr(dev.stack.processing, role))
    databases = {a.rsplit(":database/", 1)[1] for a in arns if ":database/" in a}
    assert databases == {*PREFIXED.values(), "default"}
    tables = {a.rsplit(":table/", 1)[1] for a in arns if ":table/" in a}
    assert tables == {f"{name}/*" for name in PREFIXED.values()}


def test_dev_teardown_drops_only_the_stages_own_databases(dev):
    """dev's databases go with the stack; none of them is a bare config name another stack may use."""
    for resource in dev.resources("AWS::Glue::Database").values():
        assert resource["DeletionPolicy"] == "Delete"
        assert resource["Properties"]["DatabaseInput"]["Name"].startswith("lakeloader_dev_")


def test_database_prefix_is_configurable_per_stage(synth):
    custom = synth("dev", **{"lakeloader:stages": stages_with("dev", database_prefix="acme_")})
    assert glue_databases(custom) == {"acme_crm", "acme_inventory", "acme_lakeloader_canary", "acme_sales"}
    assert {args["--lakeloader_database_prefix"] for args in job_arguments(custom)} == {"acme_"}
    arns = catalog_resources(custom, custom.stack.processing.glue_role)
    assert any(a.endswith(":table/acme_crm/*") for a in arns)

    bare = synth("dev", **{"lakeloader:stages": stages_with("dev", database_prefix="")})
    assert glue_databases(bare) == set(PREFIXED)
    assert {args["--lakeloader_database_prefix"] for args in job_arguments(bare)} == {""}
    assert "--database-prefix" not in bare.stack.processing.emr.entry_point_arguments
    assert "GlueDatabasePrefix" not in outputs(bare)


def test_database_prefix_must_be_a_glue_name():
    context = {**cdk_json_context(), "lakeloader:stages": stages_with("dev", database_prefix="Acme-")}
    with pytest.raises(SettingsError, match=r"lakeloader:stages\.dev\.database_prefix"):
        build(App(context=context), nag=False)


# --- reserved concurrency -----------------------------------------------------------------------


def test_reserved_concurrency_is_optional_and_settable(synth):
    description = ArrivalLambdaSettings.model_fields["reserved_concurrency"].description
    assert "quota" in description and "10" in description
    stages = stages_with("dev")
    stages["dev"]["arrival_lambda"] = {**stages["dev"]["arrival_lambda"], "reserved_concurrency": 3}
    reserved = synth("dev", **{"lakeloader:stages": stages})
    function = reserved.template_json["Resources"][reserved.logical_id(reserved.stack.triggers.function)]
    assert function["Properties"]["ReservedConcurrentExecutions"] == 3


# --- bucket names -------------------------------------------------------------------------------


CHARACTERS = "only lower-case letters, digits, '.' and '-', starting and ending with a letter or digit"


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("lakeloader-dev-raw-123456789012-ap-southeast-5", None),
        ("ab", "2 characters; S3 allows 3 to 63"),
        ("abc", None),
        ("a" * 63, None),
        ("a" * 64, "64 characters; S3 allows 3 to 63"),
        ("Lakeloader-dev", CHARACTERS),
        ("lake_loader", CHARACTERS),
        ("lakeloader-", CHARACTERS),
        ("lake..loader", "two adjacent periods"),
        ("192.168.5.4", "formatted as an IP address"),
        ("xn--lakeloader", "a prefix or suffix S3 reserves"),
        ("lakeloader-s3alias", "a prefix or suffix S3 reserves"),
    ],
)
def test_bucket_name_rules(name, problem):
    """The whole reason, as synth's error quotes it to the user."""
    assert bucket_name_problem(name) == problem


def test_a_bucket_name_longer_than_s3_allows_fails_synth_naming_bucket_and_settings():
    context = {**cdk_json_context(), "lakeloader:project": "a-long-project-name12", "stage": "dev"}
    with pytest.raises(SettingsError) as caught:
        build(App(context=context), nag=False)
    message = str(caught.value)
    assert "\n" not in message
    assert "a-long-project-name12-dev-access-logs-<account>-<region>" in message
    assert "lakeloader:project" in message and "63" in message


def test_longest_stage_name_fits_with_the_default_project():
    stages = {"abcdefghijkl": stages_with("dev")["dev"]}
    context = {**cdk_json_context(), "stage": "abcdefghijkl", "lakeloader:stages": stages}
    build(App(context=context), nag=False)  # 12-character stage: every bucket name still valid


# --- log retention ------------------------------------------------------------------------------


def test_every_log_group_has_the_stage_retention(stage_synth):
    groups = stage_synth.resources("AWS::Logs::LogGroup")
    days = cdk_json_context()["lakeloader:stages"][stage_synth.stage]["log_retention_days"]
    assert groups
    retention = {k: g["Properties"].get("RetentionInDays") for k, g in groups.items()}
    assert retention == dict.fromkeys(groups, days)
    key = stage_synth.logical_id(stage_synth.stack.storage.key)
    assert all(g["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key, "Arn"]} for g in groups.values())


def test_every_function_writes_to_a_log_group_of_the_stack(stage_synth):
    """CDK's own handlers (bucket notifications, auto-delete) included: Lambda would create theirs forever."""
    groups = set(stage_synth.resources("AWS::Logs::LogGroup"))
    functions = stage_synth.resources("AWS::Lambda::Function")
    assert len(functions) >= 3 if stage_synth.stage == "dev" else len(functions) >= 2
    for logical_id, function in functions.items():
        target = function["Properties"].get("LoggingConfig", {}).get("LogGroup")
        assert target in [{"Ref": g} for g in groups], (logical_id, target)


def test_state_machine_logs_to_a_log_group_of_the_stack(stage_synth):
    groups = set(stage_synth.resources("AWS::Logs::LogGroup"))
    (machine,) = stage_synth.resources("AWS::StepFunctions::StateMachine").values()
    (destination,) = machine["Properties"]["LoggingConfiguration"]["Destinations"]
    assert destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0] in groups


def test_glue_writes_only_to_log_groups_the_stack_owns(stage_synth):
    """With CloudWatch encryption in the security configuration, Glue's continuous logs go to
    `/aws-glue/jobs/logs-v2-<configuration>` ("Enabling continuous logging for AWS Glue jobs",
    https://docs.aws.amazon.com/glue/latest/dg/monitor-continuous-logging-enable.html, security
    configuration section), its error and output logs under the role and the configuration (JobRun's
    LogGroupName, https://docs.aws.amazon.com/glue/latest/webapi/API_JobRun.html), and a crawler's to
    `/aws-glue/crawlers-role/<role>-<configuration>`."""
    names = {
        join(g["Properties"]["LogGroupName"]) for g in stage_synth.resources("AWS::Logs::LogGroup").values()
    }
    configuration = f"lakeloader-{stage_synth.stage}-glue"
    for job in stage_synth.resources("AWS::Glue::Job").values():
        assert job["Properties"]["SecurityConfiguration"] == {
            "Ref": stage_synth.logical_id(stage_synth.stack.catalog.security_configuration)
        }
    role = f"lakeloader-{stage_synth.stage}-glue-job-${{AWS::Region}}"
    expected = {
        f"/aws-glue/jobs/logs-v2-{configuration}",
        f"/aws-glue/jobs/{configuration}-role/{role}/error",
        f"/aws-glue/jobs/{configuration}-role/{role}/output",
    }
    assert set(glue_job_log_groups(configuration, role)) == expected
    assert expected <= names
    assert not [n for n in names if n.startswith(("/aws-glue/jobs/error", "/aws-glue/jobs/output"))]
    if stage_synth.resources("AWS::Glue::Crawler"):
        crawler_role = f"lakeloader-{stage_synth.stage}-crawler-${{AWS::Region}}"
        assert f"/aws-glue/crawlers-role/{crawler_role}-{configuration}" in names


def test_emr_and_spark_ui_logs_in_s3_expire_with_the_log_retention(stage_synth):
    days = cdk_json_context()["lakeloader:stages"][stage_synth.stage]["log_retention_days"]
    assets = stage_synth.template_json["Resources"][stage_synth.logical_id(stage_synth.stack.storage.assets)]
    rules = {r.get("Prefix"): r for r in assets["Properties"]["LifecycleConfiguration"]["Rules"]}
    assert rules["emr/logs/"]["ExpirationInDays"] == days
    assert rules["glue/spark-ui/"]["ExpirationInDays"] == days
    _, app = stage_synth.resource("AWS::EMRServerless::Application")
    log_uri = join(app["Properties"]["MonitoringConfiguration"]["S3MonitoringConfiguration"]["LogUri"])
    assert log_uri.endswith("/emr/logs/")


# --- least privilege and Lake Formation -----------------------------------------------------------


@pytest.mark.parametrize("role", ["glue_role", "emr_role"])
def test_job_roles_never_create_or_change_databases(stage_synth, role):
    found = statements(stage_synth, stage_synth.logical_id(getattr(stage_synth.stack.processing, role)))
    actions = {a for s in found for a in as_list(s["Action"]) if a.startswith("glue:")}
    assert actions == {
        "glue:GetDatabase",
        "glue:GetTable",
        "glue:GetTables",
        "glue:CreateTable",
        "glue:UpdateTable",
        "glue:DeleteTable",
    }
    default = [s for s in found if s.get("Sid") == "ReadDefaultDatabase"]
    assert [s["Action"] for s in default] == ["glue:GetDatabase"]
    assert [join(r) for r in default[0]["Resource"] if ":database/" in join(r)] == [
        "arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:database/default"
    ]


def test_lake_formation_mode_gives_new_tables_no_iam_allowed_principals(synth, dev):
    lf = synth("dev", lake_formation="true")
    for resource in lf.resources("AWS::Glue::Database").values():
        assert resource["Properties"]["DatabaseInput"]["CreateTableDefaultPermissions"] == []
    for resource in dev.resources("AWS::Glue::Database").values():
        assert "CreateTableDefaultPermissions" not in resource["Properties"]["DatabaseInput"]


def test_a_role_name_that_could_pass_64_characters_in_some_region_fails_synth():
    from infra.settings import resolve_stage

    context = {"stage": "dev", "lakeloader:stages": cdk_json_context()["lakeloader:stages"]}
    stage = resolve_stage({**context, "lakeloader:project": "a" * 21})
    stage.role_name("glue-job")  # 21 + dev + glue-job + region: fits
    with pytest.raises(SettingsError, match="role name .*lf-data-access-<region> can exceed IAM's 64"):
        resolve_stage({**context, "stage": "prod", "lakeloader:project": "a" * 21}).role_name(
            "lf-data-access" * 2
        )


RETAINED_NAME = {
    "AWS::S3::Bucket": lambda p: p["BucketName"],
    "AWS::DynamoDB::Table": lambda p: p["TableName"],
    "AWS::Logs::LogGroup": lambda p: p["LogGroupName"],
    "AWS::Glue::SecurityConfiguration": lambda p: p["Name"],
    "AWS::Glue::Database": lambda p: p["DatabaseInput"]["Name"],
}


def test_the_deploy_guide_names_every_resource_a_failed_prod_deploy_leaves_behind(synth):
    """A retained resource with a fixed name makes the retry of a failed first deploy fail: each one
    is in docs/deploy.md#after-a-failed-first-deploy, spelt as a pattern of stage, account, region."""
    from infra.app import REPO_ROOT

    prod = synth("prod")
    guide = (REPO_ROOT / "docs" / "deploy.md").read_text().split("### After a failed first deploy")[1]
    guide = guide.split("\n### ")[0]
    retained = [r for r in prod.template_json["Resources"].values() if r.get("DeletionPolicy") == "Retain"]
    named = [join(RETAINED_NAME[r["Type"]](r["Properties"])) for r in retained if r["Type"] in RETAINED_NAME]
    assert len(named) >= 15 and any("raw" in n for n in named)
    for name in named:
        pattern = (
            name.replace("${AWS::AccountId}", "<account>")
            .replace("${AWS::Region}", "<region>")
            .replace("lakeloader-prod-", "lakeloader-<stage>-")
            .replace("lakeloader-prod/", "lakeloader-<stage>/")
        )
        pattern = re.sub(r"^lakeloader_prod_[a-z_]+$", "lakeloader_<stage>_<database>", pattern)  # canary too
        pattern = re.sub(r"BucketNotificationsHandler\w+$", "BucketNotificationsHandler...", pattern)
        assert f"`{pattern}`" in guide, name
    assert {r["Type"] for r in retained} - set(RETAINED_NAME) == {"AWS::KMS::Key"}  # unnamed: no clash
