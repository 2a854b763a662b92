"""A deployed stage found from its stack (lakeloader.cli.stage), and `lakeloader doctor --stage` on it: the
stack's name, the outputs it must and may have, what a missing stack or output says, the Glue databases
the prefix makes, and the command a job prints for its stage. moto's CloudFormation and Lake Formation
over HTTP; the CLI's main with argv."""

from __future__ import annotations

import json

import boto3
import pytest

from lakeloader import cli
from lakeloader.cli.doctor import IAM_ALLOWED_PRINCIPALS
from lakeloader.cli.stage import DeployedStage, StageNotFoundError, stack_name
from lakeloader.control.contract import stage_options
from tests.unit import stage_world
from tests.unit.stage_world import Stage
from tests.unit.test_operator_verbs import one_file_in

moto_server, aws_endpoint, stage = stage_world.moto_server, stage_world.aws_endpoint, stage_world.stage

OUTPUTS = {
    "RawBucketName": "raw",
    "Warehouse": "s3://curated/warehouse/",
    "ConfigTableName": "acme-dev-config",
    "LedgerTableName": "acme-dev-ledger",
    "RunsTableName": "acme-dev-runs",
    "IngestJobName": "acme-dev-ingest",
    "ArrivalFunctionName": "acme-dev-s3-arrival",
}


def deploy(name: str, outputs: dict[str, str]) -> None:
    """A stack with these outputs, as `cdk deploy` leaves one."""
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    boto3.client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))


def test_a_stage_is_the_stack_named_after_its_project_and_stage_and_its_jobs_say_so():
    assert stack_name("dev") == "lakeloader-dev"
    assert stack_name("prod", "acme-lake") == "acme-lake-prod"
    # what a job prints for the rebuild it asks for: how its user names the stage, from its config table
    assert stage_options("lakeloader-dev-config") == ["--stage", "dev"]
    assert stage_options("acme-lake-prod-config") == ["--project", "acme-lake", "--stage", "prod"]
    assert stage_options("lakeloader-e2e-1a2b-config") == ["--project", "lakeloader-e2e", "--stage", "1a2b"]


def test_the_stages_outputs_name_its_resources_and_the_optional_ones_default_to_empty(aws_endpoint):
    deploy("acme-dev", OUTPUTS)
    found = DeployedStage.from_stack("acme-dev")
    assert found == DeployedStage(
        raw_bucket="raw",
        warehouse="s3://curated/warehouse/",
        config_table="acme-dev-config",
        ledger_table="acme-dev-ledger",
        runs_table="acme-dev-runs",
        ingest_job="acme-dev-ingest",
        arrival_function="acme-dev-s3-arrival",
        emr_application="",
        database_prefix="",
    )
    assert found.glue_database("crm") == "crm"
    ledger = found.ledger()
    assert (ledger.ledger_table, ledger.runs_table) == ("acme-dev-ledger", "acme-dev-runs")

    deploy("acme-prod", OUTPUTS | {"EmrApplicationId": "00f1abc", "GlueDatabasePrefix": "acme_prod_"})
    found = DeployedStage.from_stack("acme-prod")
    assert (found.emr_application, found.database_prefix) == ("00f1abc", "acme_prod_")
    assert found.glue_database("crm") == "acme_prod_crm"


@pytest.mark.parametrize("missing", sorted(OUTPUTS))
def test_a_stack_without_one_of_the_outputs_is_not_a_stage(aws_endpoint, missing):
    deploy(f"other-{missing.lower()}", {k: v for k, v in OUTPUTS.items() if k != missing})
    with pytest.raises(StageNotFoundError) as raised:
        DeployedStage.from_stack(f"other-{missing.lower()}")
    assert str(raised.value) == (
        f"stack 'other-{missing.lower()}' has no output {missing}: is it a lakeloader stage?"
    )


def test_a_stage_that_is_not_there_is_one_line_naming_its_stack(aws_endpoint, capsys, monkeypatch):
    assert cli.main(["status", "--stage", "nowhere", "--project", "acme"]) == 2
    assert capsys.readouterr().err == (
        "lakeloader: error: stack 'acme-nowhere': Stack with id acme-nowhere does not exist\n"
    )
    assert cli.main(["verify", "--stage", "nowhere", "--project", "acme"]) == 2  # it reads the outputs itself
    assert capsys.readouterr().err.startswith("lakeloader: error: stack 'acme-nowhere': ")
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION"):  # boto3's own complaint, in one line
        monkeypatch.delenv(name)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with pytest.raises(StageNotFoundError) as raised:
        DeployedStage.from_stack("acme-dev")
    assert str(raised.value) == "stack 'acme-dev': AWS: You must specify a region."


def doctor(stage: Stage, capsys) -> tuple[int, list[str]]:
    code, out = stage.cli(capsys, "doctor")
    return code, out.splitlines()


def test_doctor_without_lake_formation_mode_checks_nothing_else(stage, capsys):
    code, lines = doctor(stage, capsys)
    assert code == 0
    arn = "arn:aws:s3:::curated/warehouse"
    assert lines == [f"--   Lake Formation mode: off ({arn} is not registered): IAM policies decide"]


def test_doctor_in_lake_formation_mode_checks_every_database_of_the_stage(stage, capsys):
    lakeformation = boto3.client("lakeformation")
    arn = "arn:aws:s3:::curated/warehouse"
    lakeformation.register_resource(ResourceArn=arn, UseServiceLinkedRole=True)
    try:
        lakeformation.put_data_lake_settings(DataLakeSettings={"AllowFullTableExternalDataAccess": True})
        one_file_in(stage, "quarantined")  # a stuck file is status's business, not doctor's
        code, lines = doctor(stage, capsys)
        assert code == 0, lines
        assert lines == [
            f"ok   Lake Formation mode: on ({arn} is registered)",
            "ok   full table access for external engines: allowed",
            # every table's database, the disabled table's too, once each and sorted
            "ok   database crm: IAMAllowedPrincipals holds nothing",
            "ok   database old: IAMAllowedPrincipals holds nothing",
            "ok   database sales: IAMAllowedPrincipals holds nothing",
        ]

        lakeformation.grant_permissions(
            Principal={"DataLakePrincipalIdentifier": IAM_ALLOWED_PRINCIPALS},
            Resource={"Database": {"Name": "sales"}},
            Permissions=["ALL"],
        )
        code, lines = doctor(stage, capsys)
        assert code == 1
        assert lines[4] == "FAIL database sales: IAMAllowedPrincipals holds ALL: IAM alone still decides"
        assert lines[5].startswith("       fix: aws lakeformation revoke-permissions")
    finally:
        lakeformation.put_data_lake_settings(DataLakeSettings={})
        lakeformation.deregister_resource(ResourceArn=arn)


def test_a_table_the_stage_does_not_have_is_one_line_listing_the_ones_it_has(stage, capsys):
    for verb, extra in (("status", []), ("skip", ["--reason", "r"]), ("backfill", [])):
        capsys.readouterr()
        assert (
            cli.main([verb, "--stage", stage.name, "--table", "crm.customers", "--table", "crm.nope", *extra])
            == 2
        )
        assert capsys.readouterr().err == (
            "lakeloader: error: unknown table 'crm.nope': the stage has crm.customers, crm.vip, old.archive, "
            "sales.orders\n"
        )
