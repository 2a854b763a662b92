"""`lakeloader doctor` on readers' grants on tables by name (issue 68, item 2): each grant as Lake
Formation holds it, read from the reader-grants Lambda's own environment. A grant Lake Formation holds
is ok; one whose table is not there yet waits (not a failure); one not held fails, named, with the data
lake administrator's command that applies it (that command's own test:
tests/unit/test_reader_grants_errors.py). Against moto's Lambda, Glue and Lake Formation, in
process; the grants are made here with Lake Formation's own request, written out, not with the code
under test (the ungranted AccessDenied path runs on the emulator:
tests/e2e/test_reader_grants_on_emulator.py).
"""

from __future__ import annotations

import io
import json
import zipfile

import boto3
import pytest
from moto import mock_aws

from lakeloader.cli.doctor import reader_grant_checks
from lakeloader.control import reader_grants
from lakeloader.control.reader_grants import TableGrant
from lakeloader_dev.emulator.patches_catalog import (
    patch_lakeformation_list_table_columns,
    patch_lakeformation_regrant,
)
from tests.aws_fixtures import AWS_TEST_ENV

ACCOUNT = "123456789012"
FUNCTION = "lakeloader-dev-reader-grants"
ANALYST = f"arn:aws:iam::{ACCOUNT}:role/analyst"
SUPPORT = f"arn:aws:iam::{ACCOUNT}:role/support"
CUSTOMERS = TableGrant(ANALYST, "lakeloader_dev_crm", "customers", ("SELECT", "DESCRIBE"))
HIDDEN = TableGrant(SUPPORT, "lakeloader_dev_crm", "customers", ("SELECT",), ("email", "phone"))
ORDERS = TableGrant(ANALYST, "lakeloader_dev_crm", "orders", ("SELECT", "DESCRIBE"))  # no table yet


@pytest.fixture
def stage(monkeypatch):
    """A stage's reader-grants function holding three grants, and the one table two of them name."""
    patch_lakeformation_regrant()
    patch_lakeformation_list_table_columns()  # as Lake Formation lists a table's column grants
    for name, value in AWS_TEST_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        trust = {"Version": "2012-10-17", "Statement": []}
        role = boto3.client("iam").create_role(RoleName="grants", AssumeRolePolicyDocument=json.dumps(trust))
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as archive:
            archive.writestr("handler.py", "def handler(event, context):\n    return {}\n")
        boto3.client("lambda").create_function(
            FunctionName=FUNCTION,
            Runtime="python3.12",
            Role=role["Role"]["Arn"],
            Handler="handler.handler",
            Code={"ZipFile": code.getvalue()},
            Environment={
                "Variables": {
                    reader_grants.ENV_GRANTS: reader_grants.encode([CUSTOMERS, HIDDEN, ORDERS]),
                    reader_grants.ENV_CATALOG_ID: ACCOUNT,
                }
            },
        )
        glue = boto3.client("glue")
        glue.create_database(DatabaseInput={"Name": "lakeloader_dev_crm"})
        glue.create_table(DatabaseName="lakeloader_dev_crm", TableInput={"Name": "customers"})
        yield boto3.client("lakeformation")


def grant(lakeformation, principal: str, resource: dict, permissions: list[str]) -> None:
    """What the Lambda (or an administrator) does: Lake Formation's GrantPermissions."""
    lakeformation.grant_permissions(
        CatalogId=ACCOUNT,
        Principal={"DataLakePrincipalIdentifier": principal},
        Resource=resource,
        Permissions=permissions,
    )


TABLE = {"CatalogId": ACCOUNT, "DatabaseName": "lakeloader_dev_crm", "Name": "customers"}


def hiding(*columns: str) -> dict:
    return {"TableWithColumns": {**TABLE, "ColumnWildcard": {"ExcludedColumnNames": list(columns)}}}


def not_granted(grant: TableGrant) -> str:
    """doctor's line of a grant Lake Formation does not hold, with the administrator's command."""
    fix = reader_grants.grant_command(grant, ACCOUNT)
    return f"FAIL reader grant {grant}: not granted\n       fix: {fix}"


def lines() -> list[str]:
    """doctor's line of each grant, in the order of the grants' names."""
    return sorted(check.line() for check in reader_grant_checks(FUNCTION))


def test_each_grant_lake_formation_holds_is_ok(stage):
    """The hidden-columns grant too: ListPermissions is asked about its table (it refuses a table with
    columns) and answers the table's grants, among which this one."""
    grant(stage, ANALYST, {"Table": TABLE}, ["SELECT", "DESCRIBE"])
    grant(stage, SUPPORT, hiding("phone", "email"), ["SELECT"])

    assert lines() == sorted(
        [
            f"ok   reader grant {CUSTOMERS}: granted",
            f"ok   reader grant {HIDDEN}: granted",
            f"--   reader grant {ORDERS}: waits for its table's first run (the Lambda grants it then)",
        ]
    )


def test_a_grant_hiding_other_columns_is_not_the_grant_and_doctor_gives_its_command(stage):
    """SUPPORT may read the table but phone: not what the settings ask (without email, phone)."""
    grant(stage, ANALYST, {"Table": TABLE}, ["SELECT", "DESCRIBE"])
    grant(stage, SUPPORT, hiding("email"), ["SELECT"])

    assert lines() == sorted(
        [
            f"ok   reader grant {CUSTOMERS}: granted",
            not_granted(HIDDEN),
            f"--   reader grant {ORDERS}: waits for its table's first run (the Lambda grants it then)",
        ]
    )


def test_before_any_grant_each_grant_of_an_existing_table_fails_with_its_command(stage):
    assert [line.split(": ", 1)[0] for line in lines()] == sorted(
        [f"FAIL reader grant {CUSTOMERS}", f"FAIL reader grant {HIDDEN}", f"--   reader grant {ORDERS}"]
    )
    fixes = {line.split("fix: ", 1)[1] for line in lines() if "fix: " in line}
    assert fixes == {reader_grants.grant_command(g, ACCOUNT) for g in (CUSTOMERS, HIDDEN)}
