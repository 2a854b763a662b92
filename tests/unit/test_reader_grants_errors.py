"""Every error Glue's and Lake Formation's APIs can answer the reader-grants Lambda, per grant: reported
with its code, never a failed deploy (issue 68, item 2).

The error codes are the ones botocore's service models give each operation (GetDatabase and GetTable
of Glue, GrantPermissions and RevokePermissions of Lake Formation), plus AccessDeniedException, which
every AWS API may answer (AWS's "Common Errors"; Lake Formation answers it to a grantor without the
grant option, "Granting permissions on Data Catalog resources"). The clients are real boto3 clients
whose calls botocore's Stubber answers with real `ClientError`s checked against those models.

What each code must mean, written out here rather than imported from the code under test:

* the catalog lookup: EntityNotFoundException -> the grant waits for its table (not a failure);
  AccessDeniedException -> denied; any other code -> failed;
* GrantPermissions: EntityNotFoundException -> waiting; AccessDeniedException -> no grant option (IAM
  allows the function the call, so Lake Formation refused it); any other code -> failed.
"""

from __future__ import annotations

import boto3
import botocore.session
import pytest
from botocore.stub import Stubber

from lakeloader.control import reader_grants
from lakeloader.control.reader_grants import TableGrant

ACCOUNT = "123456789012"
CHILD = "s3tablescatalog/lakeloader-dev-tables"
ANALYST = f"arn:aws:iam::{ACCOUNT}:role/analyst"
FEDERATED = TableGrant(ANALYST, "crm", "customers", ("SELECT",), ("email",), CHILD)
GLUE_TABLE = TableGrant(ANALYST, "lakeloader_dev_sales", "orders", ("SELECT", "DESCRIBE"))
ACCESS_DENIED = "AccessDeniedException"


def model_errors(service: str, operation: str) -> list[str]:
    """The operation's error codes as botocore's service model gives them, and AccessDeniedException."""
    model = botocore.session.get_session().get_service_model(service).operation_model(operation)
    codes = [shape.metadata.get("error", {}).get("code", shape.name) for shape in model.error_shapes]
    assert codes, f"{service} {operation} names no error in its model"
    return sorted({*codes, ACCESS_DENIED})


LOOKUP_ERRORS = sorted({*model_errors("glue", "GetDatabase"), *model_errors("glue", "GetTable")})
GRANT_ERRORS = model_errors("lakeformation", "GrantPermissions")
REVOKE_ERRORS = model_errors("lakeformation", "RevokePermissions")


def expected_after_lookup(code: str) -> str:
    return {"EntityNotFoundException": "waiting", ACCESS_DENIED: "denied"}.get(code, "failed")


def expected_after_grant(code: str) -> str:
    return {"EntityNotFoundException": "waiting", ACCESS_DENIED: "no_grant_option"}.get(code, "failed")


@pytest.fixture
def clients():
    session = boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    glue, lakeformation = session.client("glue"), session.client("lakeformation")
    with Stubber(glue) as glue_stub, Stubber(lakeformation) as lf_stub:
        yield glue, lakeformation, glue_stub, lf_stub
        glue_stub.assert_no_pending_responses()
        lf_stub.assert_no_pending_responses()


def deploy(glue, lakeformation, grants: list[TableGrant]) -> dict:
    """The stack's custom resource creating: what answers CloudFormation (a raise is a FAILED deploy)."""
    event = {"RequestType": "Create", "ResourceProperties": {"Grants": reader_grants.encode(grants)}}
    return reader_grants.handle(event, grants=[], lakeformation=lakeformation, glue=glue, catalog_id=ACCOUNT)


def lookup_params(grant: TableGrant) -> dict:
    where = {"CatalogId": f"{ACCOUNT}:{grant.catalog}"} if grant.catalog else {}
    return {**where, "DatabaseName": grant.database, "Name": grant.table}


def table_found(glue_stub, grant: TableGrant) -> None:
    glue_stub.add_response("get_table", {"Table": {"Name": grant.table}}, lookup_params(grant))


def glue_table_granted(glue_stub, lf_stub) -> None:
    """The Glue table's grant, applied (the Lambda takes the grants in their encoded order: it first)."""
    table_found(glue_stub, GLUE_TABLE)
    lf_stub.add_response("grant_permissions", {})


def test_the_error_codes_are_the_apis_own():
    """The lists the tests below walk through: if botocore's models change, so do they."""
    assert {"EntityNotFoundException", "FederationSourceException", ACCESS_DENIED} <= set(LOOKUP_ERRORS)
    assert {"EntityNotFoundException", "InvalidInputException", ACCESS_DENIED} <= set(GRANT_ERRORS)


@pytest.mark.parametrize("code", LOOKUP_ERRORS)
def test_each_lookup_error_is_reported_for_its_grant_and_the_other_grant_applies(clients, code):
    """The federated catalog's lookup answers `code` (its S3 Tables integration off, the function not
    allowed to see it, the federation failing): that grant is reported with the code and AWS's message,
    and the Glue table's grant is applied all the same."""
    glue, lakeformation, glue_stub, lf_stub = clients
    glue_table_granted(glue_stub, lf_stub)
    glue_stub.add_client_error(
        "get_table",
        service_error_code=code,
        service_message=f"{code} said so",
        expected_params=lookup_params(FEDERATED),
    )
    result = deploy(glue, lakeformation, [FEDERATED, GLUE_TABLE])
    outcome = expected_after_lookup(code)
    assert result["granted"] == [str(GLUE_TABLE)]
    if outcome == "waiting":
        assert result["waiting"] == [str(FEDERATED)] and reader_grants.ungranted(result) == []
    else:
        assert result[outcome] == [f"{FEDERATED}: {code}: {code} said so"]
        assert reader_grants.ungranted(result) == result[outcome]


@pytest.mark.parametrize("code", GRANT_ERRORS)
def test_each_grant_error_is_reported_for_its_grant_and_the_other_grant_applies(clients, code):
    """Lake Formation refuses the federated table's grant with `code` (no grant option there yet: a data
    lake administrator gives it once the function's role exists): reported, never raised."""
    glue, lakeformation, glue_stub, lf_stub = clients
    glue_table_granted(glue_stub, lf_stub)
    table_found(glue_stub, FEDERATED)
    lf_stub.add_client_error("grant_permissions", service_error_code=code, service_message="refused")
    result = deploy(glue, lakeformation, [FEDERATED, GLUE_TABLE])
    outcome = expected_after_grant(code)
    assert result["granted"] == [str(GLUE_TABLE)]
    if outcome == "waiting":
        assert result["waiting"] == [str(FEDERATED)] and reader_grants.ungranted(result) == []
    else:
        assert result[outcome] == [f"{FEDERATED}: {code}: refused"]


@pytest.mark.parametrize("code", REVOKE_ERRORS)
def test_a_stack_delete_reports_each_revoke_error_and_does_not_fail(clients, code):
    """InvalidInputException is Lake Formation's "not granted": nothing to revoke. Any other code is
    reported as unrevoked: a delete that failed on a grant would leave the stack DELETE_FAILED."""
    glue, lakeformation, glue_stub, lf_stub = clients
    table_found(glue_stub, FEDERATED)
    lf_stub.add_client_error("revoke_permissions", service_error_code=code, service_message="refused")
    event = {"RequestType": "Delete", "ResourceProperties": {"Grants": reader_grants.encode([FEDERATED])}}
    result = reader_grants.handle(
        event, grants=[], lakeformation=lakeformation, glue=glue, catalog_id=ACCOUNT
    )
    if code == "InvalidInputException":
        assert result == {"revoked": []}
    else:
        assert result == {"revoked": [], "unrevoked": [f"{FEDERATED}: {code}: refused"]}


def test_a_revoke_whose_table_is_gone_is_not_reported(clients):
    glue, lakeformation, glue_stub, _ = clients
    glue_stub.add_client_error(
        "get_table", service_error_code="EntityNotFoundException", expected_params=lookup_params(FEDERATED)
    )
    event = {"RequestType": "Delete", "ResourceProperties": {"Grants": reader_grants.encode([FEDERATED])}}
    result = reader_grants.handle(
        event, grants=[], lakeformation=lakeformation, glue=glue, catalog_id=ACCOUNT
    )
    assert result == {"revoked": []}


def test_a_bug_still_raises(clients):
    """Only an error that is not AWS's answer (here: the client given a bad argument) fails the call."""
    glue, lakeformation, glue_stub, _ = clients
    with pytest.raises(AttributeError):
        reader_grants.handle(
            {"RequestType": "Create", "ResourceProperties": {"Grants": reader_grants.encode([GLUE_TABLE])}},
            grants=[],
            lakeformation=lakeformation,
            glue=None,
            catalog_id=ACCOUNT,
        )


def test_the_administrators_command_grants_exactly_the_grant():
    """The fix `lakeloader doctor` prints: one AWS CLI command, its --resource the request's own."""
    command = reader_grants.grant_command(FEDERATED, ACCOUNT)
    assert command == (
        f"aws lakeformation grant-permissions --catalog-id {ACCOUNT}:{CHILD} "
        f"--principal DataLakePrincipalIdentifier={ANALYST} "
        '--resource \'{"TableWithColumns":{"CatalogId":"123456789012:s3tablescatalog/lakeloader-dev-tables",'
        '"ColumnWildcard":{"ExcludedColumnNames":["email"]},"DatabaseName":"crm","Name":"customers"}}\' '
        "--permissions SELECT"
    )


def test_the_administrators_command_lists_every_permission():
    assert reader_grants.grant_command(GLUE_TABLE, ACCOUNT).endswith(" --permissions SELECT DESCRIBE")


@pytest.mark.parametrize("code", [c for c in LOOKUP_ERRORS if c != "EntityNotFoundException"])
def test_a_revoke_whose_table_cannot_be_looked_up_is_reported_unrevoked(clients, code):
    """A table the function may not see, or a lookup that failed, may still hold the grant: reported."""
    glue, lakeformation, glue_stub, _ = clients
    glue_stub.add_client_error(
        "get_table",
        service_error_code=code,
        service_message="refused",
        expected_params=lookup_params(FEDERATED),
    )
    event = {"RequestType": "Delete", "ResourceProperties": {"Grants": reader_grants.encode([FEDERATED])}}
    result = reader_grants.handle(
        event, grants=[], lakeformation=lakeformation, glue=glue, catalog_id=ACCOUNT
    )
    assert result == {"revoked": [], "unrevoked": [f"{FEDERATED}: {code}: refused"]}


def test_a_revoke_goes_on_after_a_grant_whose_table_is_gone_or_that_was_not_granted(clients, caplog):
    """Each grant is revoked on its own: one whose table is gone, or that Lake Formation says is not
    granted (InvalidInputException), does not stop the next; the function's log names each outcome."""
    glue, lakeformation, glue_stub, lf_stub = clients
    extra = TableGrant(ANALYST, "lakeloader_dev_sales", "lines", ("SELECT",))
    gone, not_granted, revoked = reader_grants.decode(reader_grants.encode([FEDERATED, GLUE_TABLE, extra]))
    glue_stub.add_client_error(
        "get_table", service_error_code="EntityNotFoundException", expected_params=lookup_params(gone)
    )
    table_found(glue_stub, not_granted)
    lf_stub.add_client_error(
        "revoke_permissions", service_error_code="InvalidInputException", service_message="no"
    )
    table_found(glue_stub, revoked)
    lf_stub.add_response("revoke_permissions", {})
    event = {
        "RequestType": "Delete",
        "ResourceProperties": {"Grants": reader_grants.encode([FEDERATED, GLUE_TABLE, extra])},
    }
    caplog.set_level("INFO", logger=reader_grants.log.name)

    result = reader_grants.handle(
        event, grants=[], lakeformation=lakeformation, glue=glue, catalog_id=ACCOUNT
    )

    assert result == {"revoked": [str(revoked)]}
    messages = [r.getMessage() for r in caplog.records if r.name == reader_grants.log.name]
    assert f"revoked {revoked}" in messages
    (nothing,) = [m for m in messages if m.startswith("nothing to revoke for ")]
    assert nothing.startswith(f"nothing to revoke for {not_granted}: ") and "InvalidInputException" in nothing


def test_only_a_glue_table_created_event_names_tables():
    """Glue's "Glue Data Catalog Database State Change" with typeOfChange CreateTable names them; the
    same detail type from another source, or another detail type from Glue, is no such event."""
    created = {
        "source": reader_grants.GLUE_SOURCE,
        "detail-type": reader_grants.TABLE_CREATED_DETAIL_TYPE,
        "detail": {"typeOfChange": reader_grants.TABLE_CREATED, "changedTables": ["orders", "lines"]},
    }
    assert reader_grants.created_tables(created) == {("", "orders"), ("", "lines")}  # no database named
    assert reader_grants.created_tables(created | {"source": "aws.s3"}) is None
    assert reader_grants.created_tables(created | {"detail-type": "Glue Job State Change"}) is None


def test_an_error_without_a_message_is_its_code_alone():
    from botocore.exceptions import ClientError

    error = ClientError({"Error": {"Code": ACCESS_DENIED}}, "GetTable")
    assert reader_grants.described(GLUE_TABLE, error) == f"{GLUE_TABLE}: {ACCESS_DENIED}"


def test_the_grants_text_is_compact_and_no_text_is_no_grant():
    """The custom resource's property (CloudFormation compares it as text): no spaces between items."""
    text = reader_grants.encode([FEDERATED, GLUE_TABLE])
    assert ", " not in text and '": ' not in text and reader_grants.decode(text)
    assert reader_grants.decode(None) == reader_grants.decode("") == []


def test_an_answer_without_an_error_is_described_as_unknown():
    from botocore.exceptions import ClientError

    assert reader_grants.described(GLUE_TABLE, ClientError({}, "GetTable")) == f"{GLUE_TABLE}: Unknown"


def test_a_grant_waiting_for_its_table_does_not_hold_back_the_next(clients):
    glue, lakeformation, glue_stub, lf_stub = clients
    waiting, granted = reader_grants.decode(reader_grants.encode([FEDERATED, GLUE_TABLE]))
    glue_stub.add_client_error(
        "get_table", service_error_code="EntityNotFoundException", expected_params=lookup_params(waiting)
    )
    table_found(glue_stub, granted)
    lf_stub.add_response("grant_permissions", {})
    assert deploy(glue, lakeformation, [FEDERATED, GLUE_TABLE]) == {
        "granted": [str(granted)],
        "waiting": [str(waiting)],
    }


def test_each_grant_is_applied_on_its_own_and_logged(clients, caplog):
    """A grant Lake Formation refuses does not stop the next, nor does one whose table a Glue event does
    not name; the function's log names each outcome with AWS's answer."""
    glue, lakeformation, glue_stub, lf_stub = clients
    extra = TableGrant(ANALYST, "lakeloader_dev_sales", "lines", ("SELECT",))
    refused, granted = reader_grants.decode(reader_grants.encode([GLUE_TABLE, extra]))
    table_found(glue_stub, refused)
    lf_stub.add_client_error("grant_permissions", service_error_code=ACCESS_DENIED, service_message="no")
    table_found(glue_stub, granted)
    lf_stub.add_response("grant_permissions", {})
    caplog.set_level("INFO", logger=reader_grants.log.name)

    done = reader_grants.apply([refused, granted], lakeformation=lakeformation, glue=glue, catalog_id=ACCOUNT)

    assert done["granted"] == [str(granted)] and done["no_grant_option"] == [
        f"{refused}: {ACCESS_DENIED}: no"
    ]
    messages = [r.getMessage() for r in caplog.records if r.name == reader_grants.log.name]
    assert messages == [
        f"not granted (no_grant_option): {refused}: {ACCESS_DENIED}: no",
        f"granted {granted}",
    ]

    table_found(glue_stub, granted)
    lf_stub.add_response("grant_permissions", {})
    named = {(granted.database, granted.table)}
    done = reader_grants.apply(
        [refused, granted], lakeformation=lakeformation, glue=glue, catalog_id=ACCOUNT, tables=named
    )
    assert done == {"granted": [str(granted)], "waiting": []}


def test_a_grant_reads_as_one_line_naming_its_permissions_table_hidden_columns_and_principal():
    two_hidden = TableGrant(ANALYST, "crm", "customers", ("SELECT",), ("email", "phone"), CHILD)
    assert str(two_hidden) == f"SELECT on {CHILD}/crm.customers without email, phone to {ANALYST}"
    assert str(GLUE_TABLE) == f"SELECT+DESCRIBE on lakeloader_dev_sales.orders to {ANALYST}"
    assert str(TableGrant(ANALYST, "crm", None, ("DESCRIBE",))) == f"DESCRIBE on crm to {ANALYST}"


def test_an_event_of_another_kind_is_ignored_and_logged_with_its_source_and_type(clients, caplog):
    glue, lakeformation, _, _ = clients
    caplog.set_level("INFO", logger=reader_grants.log.name)
    event = {"source": "aws.s3", "detail-type": "Object Created", "detail": {}}
    result = reader_grants.handle(
        event, grants=[GLUE_TABLE], lakeformation=lakeformation, glue=glue, catalog_id=ACCOUNT
    )
    assert result == {"granted": [], "waiting": [], "ignored": True}
    messages = [r.getMessage() for r in caplog.records if r.name == reader_grants.log.name]
    assert messages == ["ignored an event of aws.s3 / Object Created"]
