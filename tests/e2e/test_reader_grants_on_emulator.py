"""A reader's Lake Formation grant on a table by name, on the embedded emulator: absent before the
table's first run, present after it, with nothing deployed again.

The deployed pieces are the stack's own: the reader-grants Lambda's bundle (lambda/reader_grants with
lakeloader.control.reader_grants), its grants JSON, and the EventBridge pattern the stack gives its rule
(infra.reader_grants.table_created_pattern). The emulator sends Glue's "Glue Data Catalog Database
State Change" (`typeOfChange` CreateTable) when a table is created, as Glue does ("AWS Glue events",
https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-glue.html), and EventBridge runs the
rule's Lambda target with it. The table is created through Glue's CreateTable, the call a job's first
run makes through Iceberg's GlueCatalog. Lake Formation grants a table by name only once it exists
("Granting permissions on Data Catalog resources",
https://docs.aws.amazon.com/lake-formation/latest/dg/granting-catalog-permissions.html).
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path

import boto3
import pytest

from infra.functions import lambda_source
from infra.lambda_code import lambda_bundle
from infra.reader_grants import table_created_pattern
from lakeloader.control import reader_grants
from lakeloader.control.reader_grants import TableGrant
from lakeloader_dev.emulator import Emulator
from lakeloader_dev.emulator.loop import lakeloader
from lakeloader_dev.emulator.patches_catalog import federation_answers
from tests.e2e.conftest import E2E_CONTEXT
from tests.e2e.emulated import ROLE
from tests.infra.cdk_helpers import with_settings

pytestmark = pytest.mark.e2e

ACCOUNT = "123456789012"
SUPPORT = f"arn:aws:iam::{ACCOUNT}:role/support"
ANALYST = f"arn:aws:iam::{ACCOUNT}:role/analyst"
# tests/e2e/tables.yaml: s3t_crm.customers is in the stage's table bucket, crm.customers in Glue
FEDERATED = f"{ACCOUNT}:s3tablescatalog/lakeloader-dev-tables"
ANALYST_READS = {
    "role_arn": ANALYST,
    "tables": ["s3t_crm.*", "crm.customers"],
    "exclude_columns": {"crm.customers": ["email"]},
}
DATABASE = "lakeloader_e2e_crm"
GRANT = TableGrant(SUPPORT, DATABASE, "customers", ("SELECT",), ("email", "phone"))


def bundle_zip() -> bytes:
    folder = lambda_bundle("lakeloader-e2e-reader-grants", lambda_source("reader_grants"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
            archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


def support_grants() -> list[dict]:
    found = boto3.client("lakeformation").list_permissions(CatalogId=ACCOUNT)["PrincipalResourcePermissions"]
    return [p for p in found if p["Principal"]["DataLakePrincipalIdentifier"] == SUPPORT]


def test_a_readers_table_grant_is_absent_before_the_first_run_and_present_after_it(
    emulator: Emulator,
) -> None:
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    iam = boto3.client("iam")
    if ROLE.rsplit("/", 1)[1] not in [r["RoleName"] for r in iam.list_roles()["Roles"]]:
        iam.create_role(RoleName=ROLE.rsplit("/", 1)[1], AssumeRolePolicyDocument=json.dumps(trust))
    function = boto3.client("lambda").create_function(
        FunctionName="reader-grants",
        Runtime="python3.12",
        Role=ROLE,
        Handler="handler.handler",
        Code={"ZipFile": bundle_zip()},
        Environment={
            "Variables": {
                reader_grants.ENV_GRANTS: reader_grants.encode([GRANT]),
                reader_grants.ENV_CATALOG_ID: ACCOUNT,
            }
        },
        Timeout=60,
    )
    events = boto3.client("events")
    events.put_rule(
        Name="reader-grants-table-created", EventPattern=json.dumps(table_created_pattern([DATABASE]))
    )
    events.put_targets(
        Rule="reader-grants-table-created", Targets=[{"Id": "grants", "Arn": function["FunctionArn"]}]
    )
    glue = boto3.client("glue")
    glue.create_database(DatabaseInput={"Name": DATABASE})
    glue.create_table(DatabaseName=DATABASE, TableInput={"Name": "orders"})  # a table nobody reads
    time.sleep(1)
    assert support_grants() == [], "granted before the table exists"

    glue.create_table(DatabaseName=DATABASE, TableInput={"Name": "customers"})  # the first run
    deadline = time.monotonic() + 60
    while not support_grants() and time.monotonic() < deadline:
        time.sleep(0.5)
    (grant,) = support_grants()
    assert grant["Permissions"] == ["SELECT"]
    assert grant["Resource"] == {
        "TableWithColumns": {
            "CatalogId": ACCOUNT,
            "DatabaseName": DATABASE,
            "Name": "customers",
            "ColumnWildcard": {"ExcludedColumnNames": ["email", "phone"]},
        }
    }
    invocations = [i for i in emulator.journal.invocations if i.function == "reader-grants"]
    assert invocations and all(i.ok for i in invocations), invocations


def test_a_lake_formation_s3_tables_stage_deploys_when_the_federation_denies_and_doctor_names_the_grants(
    emulator: Emulator,
) -> None:
    """The synthesized stage (Lake Formation mode, the S3 Tables table bucket, a reader of both catalogs)
    deploys on the emulator while the S3 Tables federated catalog answers AccessDeniedException, as it
    does once the account's integration is on and before an administrator grants the function: the
    reader-grants custom resource reports those grants and the stack is CREATE_COMPLETE. `doctor`
    names each ungranted grant with the command that applies it; the Glue table's grant waits for the
    table's first run."""
    from lakeloader_dev.emulator import patches_cloudformation
    from lakeloader_dev.emulator.deploy import deploy

    trust = {"Version": "2012-10-17", "Statement": []}
    boto3.client("iam").create_role(RoleName="analyst", AssumeRolePolicyDocument=json.dumps(trust))
    federation_answers("AccessDeniedException")
    try:
        deployment = deploy(
            endpoint=emulator.endpoint,
            context={
                **E2E_CONTEXT,
                "lake_formation": "true",
                **with_settings("dev", readers=[ANALYST_READS]),
            },
            failures=patches_cloudformation.CFN_FAILURES.get,
            timeout=400,
        )
        (stack,) = boto3.client("cloudformation").describe_stacks(StackName=deployment.stack_name)["Stacks"]
        assert stack["StackStatus"] == "CREATE_COMPLETE"
        function = f"{deployment.stack_name}-{reader_grants.FUNCTION_NAME}"
        deadline = time.monotonic() + 30  # the journal records the run just after it answered CloudFormation
        while not (runs := [i for i in emulator.journal.invocations if i.function == function]):
            assert time.monotonic() < deadline, "the reader-grants custom resource never ran"
            time.sleep(0.2)
        (created,) = runs
        assert created.ok, created
        denied = created.result["denied"]
        assert [line.split(": ", 1)[1].split(":")[0] for line in denied] == ["AccessDeniedException"] * 2
        assert created.result["waiting"] == [str(TableGrant(ANALYST, "lakeloader_dev_crm", "customers",
                                                            ("SELECT",), ("email",)))]  # fmt: skip

        code, out = lakeloader("doctor", "--stage", "dev")
    finally:
        federation_answers(None)
    assert code == 1, out
    namespace = TableGrant(
        ANALYST, "s3t_crm", None, ("DESCRIBE",), (), "s3tablescatalog/lakeloader-dev-tables"
    )
    fails = [line for line in out.splitlines() if line.startswith("FAIL reader grant")]
    assert len(fails) == 2 and f"FAIL reader grant {namespace}: not granted: AccessDeniedException" in out, (
        out
    )
    fixes = [line.strip() for line in out.splitlines() if "fix: aws lakeformation grant-permissions" in line]
    assert len(fixes) == 2, out
    assert f"fix: {reader_grants.grant_command(namespace, ACCOUNT)}" in fixes
    assert all(
        f"--catalog-id {FEDERATED} --principal DataLakePrincipalIdentifier={ANALYST}" in f for f in fixes
    )
    assert "--   reader grant SELECT on lakeloader_dev_crm.customers without email" in out, out
