"""A reader's Lake Formation grant on a table by name, on the embedded emulator: absent before the
table's first run, present after it, with nothing deployed again.

The deployed pieces are the stack's own: the reader-grants Lambda's bundle (lambda/reader_grants with
lakeloader.reader_grants), its grants JSON, and the EventBridge pattern the stack gives its rule
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
from lakeloader import reader_grants
from lakeloader.reader_grants import TableGrant
from lakeloader_dev.emulator import Emulator
from tests.e2e.emulated import ROLE

pytestmark = pytest.mark.e2e

ACCOUNT = "123456789012"
SUPPORT = f"arn:aws:iam::{ACCOUNT}:role/support"
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
