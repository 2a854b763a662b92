"""Readers' Lake Formation grants on tables by name, applied once the table exists (issue 40, item 3).

Lake Formation grants a table by name only once it exists ("Granting permissions on Data Catalog
resources", https://docs.aws.amazon.com/lake-formation/latest/dg/granting-catalog-permissions.html:
the grant names an existing table, or all tables with a wildcard), and Glue reports each table it
creates on EventBridge as a "Glue Data Catalog Database State Change" with `typeOfChange`
`CreateTable` ("AWS Glue events", https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-glue.html).
These tests run lakeloader.control.reader_grants against moto's Glue and Lake Formation, in process.
"""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from lakeloader.control import reader_grants
from lakeloader.control.reader_grants import TableGrant
from lakeloader_dev.emulator.patches_catalog import patch_lakeformation_regrant
from tests.aws_fixtures import AWS_TEST_ENV

ACCOUNT = "123456789012"
ANALYST = "arn:aws:iam::123456789012:role/analyst"
SUPPORT = "arn:aws:iam::123456789012:role/support"
CUSTOMERS = TableGrant(ANALYST, "lakeloader_dev_crm", "customers", ("SELECT", "DESCRIBE"))
HIDDEN = TableGrant(SUPPORT, "lakeloader_dev_crm", "customers", ("SELECT",), ("email", "phone"))
ORDERS = TableGrant(ANALYST, "lakeloader_dev_sales", "orders", ("SELECT", "DESCRIBE"))


@pytest.fixture
def aws(monkeypatch):
    patch_lakeformation_regrant()  # moto 5.2.5 loses a grant granted twice (lakeloader_dev.emulator)
    for name, value in AWS_TEST_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        glue = boto3.client("glue")
        for database in ("lakeloader_dev_crm", "lakeloader_dev_sales"):
            glue.create_database(DatabaseInput={"Name": database})
        yield {"glue": glue, "lakeformation": boto3.client("lakeformation"), "catalog_id": ACCOUNT}


def create_table(aws, database: str, table: str) -> None:
    """What a job's first run does through Iceberg's GlueCatalog."""
    aws["glue"].create_table(DatabaseName=database, TableInput={"Name": table})


def granted(aws, principal: str) -> list[dict]:
    found = aws["lakeformation"].list_permissions(CatalogId=ACCOUNT)["PrincipalResourcePermissions"]
    return [
        {"resource": p["Resource"], "permissions": sorted(p["Permissions"])}
        for p in found
        if p["Principal"]["DataLakePrincipalIdentifier"] == principal
    ]


def table_created(database: str, *tables: str) -> dict:
    """The event Glue sends when a table is created (AWS Glue events, EventBridge reference)."""
    return {
        "source": "aws.glue",
        "detail-type": "Glue Data Catalog Database State Change",
        "detail": {"databaseName": database, "typeOfChange": "CreateTable", "changedTables": list(tables)},
    }


def test_a_grant_waits_for_its_table_and_is_applied_when_glue_reports_it_created(aws):
    """Before the first run the table does not exist: nothing is granted (no failure, no rollback).
    Glue's CreateTable event grants that table's readers, the column grant without its hidden
    columns, and nothing for a table not yet created."""
    grants = [CUSTOMERS, HIDDEN, ORDERS]
    first = reader_grants.handle({"detail-type": "Scheduled Event"}, grants=grants, **aws)
    assert first == {"granted": [], "waiting": [str(g) for g in grants]}
    assert granted(aws, ANALYST) == [] and granted(aws, SUPPORT) == []

    create_table(aws, "lakeloader_dev_crm", "customers")
    done = reader_grants.handle(table_created("lakeloader_dev_crm", "customers"), grants=grants, **aws)
    assert done == {"granted": [str(CUSTOMERS), str(HIDDEN)], "waiting": []}
    table = {"CatalogId": ACCOUNT, "DatabaseName": "lakeloader_dev_crm", "Name": "customers"}
    assert granted(aws, ANALYST) == [{"resource": {"Table": table}, "permissions": ["DESCRIBE", "SELECT"]}]
    hidden = {**table, "ColumnWildcard": {"ExcludedColumnNames": ["email", "phone"]}}
    assert granted(aws, SUPPORT) == [{"resource": {"TableWithColumns": hidden}, "permissions": ["SELECT"]}]

    # the same event again (EventBridge delivers at least once) changes nothing
    reader_grants.handle(table_created("lakeloader_dev_crm", "customers"), grants=grants, **aws)
    assert len(granted(aws, ANALYST)) == 1 and len(granted(aws, SUPPORT)) == 1


def test_a_deploy_grants_the_tables_that_exist_and_revokes_what_the_settings_dropped(aws):
    """The stack's custom resource: Create grants every table already there (a reader added after
    the first run), Update revokes the grants the new settings no longer hold, Delete revokes all."""
    create_table(aws, "lakeloader_dev_crm", "customers")
    request = {"ResourceProperties": {"Grants": reader_grants.encode([CUSTOMERS, HIDDEN, ORDERS])}}
    created = reader_grants.handle({"RequestType": "Create", **request}, grants=[], **aws)
    assert created == {"granted": [str(CUSTOMERS), str(HIDDEN)], "waiting": [str(ORDERS)]}
    update = {
        "RequestType": "Update",
        "ResourceProperties": {"Grants": reader_grants.encode([CUSTOMERS, ORDERS])},
        "OldResourceProperties": request["ResourceProperties"],
    }
    updated = reader_grants.handle(update, grants=[], **aws)
    assert updated["revoked"] == [str(HIDDEN)] and granted(aws, SUPPORT) == []
    assert len(granted(aws, ANALYST)) == 1
    deleted = reader_grants.handle({**update, "RequestType": "Delete"}, grants=[], **aws)
    assert deleted == {"revoked": [str(CUSTOMERS)]} and granted(aws, ANALYST) == []


def test_other_events_grant_nothing(aws):
    """A Glue event of another change, or an event of another source, applies no grant."""
    create_table(aws, "lakeloader_dev_crm", "customers")
    other = table_created("lakeloader_dev_crm", "customers")
    other["detail"]["typeOfChange"] = "UpdateTable"
    assert reader_grants.handle(other, grants=[CUSTOMERS], **aws) == {"granted": [], "waiting": []}
    stranger = {"source": "aws.s3", "detail-type": "Object Created", "detail": {}}
    assert reader_grants.handle(stranger, grants=[CUSTOMERS], **aws)["ignored"] is True
    assert granted(aws, ANALYST) == []


def test_the_grants_round_trip_through_their_compact_json():
    text = reader_grants.encode([ORDERS, HIDDEN, CUSTOMERS])
    assert set(reader_grants.decode(text)) == {ORDERS, HIDDEN, CUSTOMERS}
    assert (
        reader_grants.encode(reader_grants.decode(text))
        == text
        == reader_grants.encode([CUSTOMERS, HIDDEN, ORDERS])
    )
