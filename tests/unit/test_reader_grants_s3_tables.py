"""Readers' Lake Formation grants on the table bucket's tables, in the federated catalog
`<account>:s3tablescatalog/<bucket>` (lakeloader.control.reader_grants with a grant's `catalog`).

Neither moto nor the emulator has the S3 Tables integration (the `s3tablescatalog` catalog): the Glue
and Lake Formation clients here are real boto3 clients whose calls botocore's Stubber answers, and
checks against the services' models, with the exact requests the Lambda must send. What they must
be: the child catalog id `<account>:s3tablescatalog/<bucket>`, a namespace as the database
("Integrating with Amazon S3 Tables", Glue; "Granting permissions on Data Catalog resources", Lake
Formation).
"""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber

from lakeloader.control import reader_grants
from lakeloader.control.reader_grants import TableGrant

ACCOUNT = "123456789012"
CHILD = "s3tablescatalog/lakeloader-dev-tables"
FEDERATED = f"{ACCOUNT}:{CHILD}"
ANALYST = f"arn:aws:iam::{ACCOUNT}:role/analyst"
NAMESPACE = TableGrant(ANALYST, "crm", None, ("DESCRIBE",), (), CHILD)
CUSTOMERS = TableGrant(ANALYST, "crm", "customers", ("SELECT",), ("email",), CHILD)
GRANTS = [NAMESPACE, CUSTOMERS]


@pytest.fixture
def clients():
    session = boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    glue, lakeformation = session.client("glue"), session.client("lakeformation")
    with Stubber(glue) as glue_stub, Stubber(lakeformation) as lf_stub:
        yield {"glue": glue, "lakeformation": lakeformation, "glue_stub": glue_stub, "lf_stub": lf_stub}
        glue_stub.assert_no_pending_responses()
        lf_stub.assert_no_pending_responses()


def run(clients, event: dict) -> dict:
    return reader_grants.handle(
        event,
        grants=GRANTS,
        lakeformation=clients["lakeformation"],
        glue=clients["glue"],
        catalog_id=ACCOUNT,
    )


def namespace_visible(clients) -> None:
    clients["glue_stub"].add_response(
        "get_database", {"Database": {"Name": "crm"}}, {"CatalogId": FEDERATED, "Name": "crm"}
    )


def table_lookup(clients, *, exists: bool) -> None:
    expected = {"CatalogId": FEDERATED, "DatabaseName": "crm", "Name": "customers"}
    if exists:
        clients["glue_stub"].add_response("get_table", {"Table": {"Name": "customers"}}, expected)
    else:
        clients["glue_stub"].add_client_error(
            "get_table", service_error_code="EntityNotFoundException", expected_params=expected
        )


NAMESPACE_REQUEST = {
    "CatalogId": FEDERATED,
    "Principal": {"DataLakePrincipalIdentifier": ANALYST},
    "Resource": {"Database": {"CatalogId": FEDERATED, "Name": "crm"}},
    "Permissions": ["DESCRIBE"],
    "PermissionsWithGrantOption": [],
}
TABLE_REQUEST = {
    "CatalogId": FEDERATED,
    "Principal": {"DataLakePrincipalIdentifier": ANALYST},
    "Resource": {
        "TableWithColumns": {
            "CatalogId": FEDERATED,
            "DatabaseName": "crm",
            "Name": "customers",
            "ColumnWildcard": {"ExcludedColumnNames": ["email"]},
        }
    },
    "Permissions": ["SELECT"],
    "PermissionsWithGrantOption": [],
}


def test_the_schedule_grants_the_namespace_and_the_table_waits_for_its_first_run(clients):
    namespace_visible(clients)
    clients["lf_stub"].add_response("grant_permissions", {}, NAMESPACE_REQUEST)
    table_lookup(clients, exists=False)
    done = run(clients, {"detail-type": "Scheduled Event"})
    assert done == {"granted": [str(NAMESPACE)], "waiting": [str(CUSTOMERS)]}


def test_once_the_table_exists_the_schedule_grants_it_without_the_hidden_columns(clients):
    namespace_visible(clients)
    clients["lf_stub"].add_response("grant_permissions", {}, NAMESPACE_REQUEST)
    table_lookup(clients, exists=True)
    clients["lf_stub"].add_response("grant_permissions", {}, TABLE_REQUEST)
    done = run(clients, {"detail-type": "Scheduled Event"})
    assert done == {"granted": [str(NAMESPACE), str(CUSTOMERS)], "waiting": []}


def test_without_the_integration_nothing_is_granted_and_the_deploy_succeeds(clients):
    """The account's S3 Tables integration not enabled yet: the federated catalog shows no namespace,
    so both grants wait (the deploy's custom resource answers SUCCESS with them waiting)."""
    clients["glue_stub"].add_client_error(
        "get_database",
        service_error_code="EntityNotFoundException",
        expected_params={"CatalogId": FEDERATED, "Name": "crm"},
    )
    table_lookup(clients, exists=False)
    deploy = {"RequestType": "Create", "ResourceProperties": {"Grants": reader_grants.encode(GRANTS)}}
    assert run(clients, deploy) == {"granted": [], "waiting": [str(NAMESPACE), str(CUSTOMERS)]}


def test_a_glue_table_created_event_does_not_touch_the_federated_grants(clients):
    """Glue's CreateTable events name Glue tables; a namespace of the same name is not one of them
    (any call here would find no stubbed response and fail)."""
    event = {
        "source": "aws.glue",
        "detail-type": "Glue Data Catalog Database State Change",
        "detail": {"databaseName": "crm", "typeOfChange": "CreateTable", "changedTables": ["customers"]},
    }
    assert run(clients, event) == {"granted": [], "waiting": []}


def test_deleting_the_stack_revokes_them_in_the_federated_catalog(clients):
    namespace_visible(clients)
    clients["lf_stub"].add_response("revoke_permissions", {}, NAMESPACE_REQUEST)
    table_lookup(clients, exists=True)
    clients["lf_stub"].add_response("revoke_permissions", {}, TABLE_REQUEST)
    delete = {"RequestType": "Delete", "ResourceProperties": {"Grants": reader_grants.encode(GRANTS)}}
    assert run(clients, delete) == {"revoked": [str(NAMESPACE), str(CUSTOMERS)]}


def test_the_grants_round_trip_through_the_lambdas_environment():
    assert reader_grants.decode(reader_grants.encode(GRANTS)) == sorted(
        GRANTS, key=lambda g: reader_grants.encode([g])
    )
    assert str(CUSTOMERS) == f"SELECT on {CHILD}/crm.customers without email to {ANALYST}"
