"""Readers' Lake Formation grants on tables by name, applied once the table exists.

Lake Formation grants a table by name (or its columns, for a reader's `exclude_columns`) only once
the table is in the Data Catalog, and the jobs create a table at its first run. So the stack does not
create these grants itself (a first deploy would fail on them and roll back): it writes them into the
reader-grants Lambda's environment (`READER_GRANTS`, `encode`), and the Lambda applies them:

* when Glue reports a table created ("Glue Data Catalog Database State Change", `typeOfChange`
  `CreateTable`, on EventBridge): the grants of those tables;
* when CloudFormation creates or updates the stack's custom resource: every grant whose table exists
  (a reader added after the first run), and on an update it revokes the grants the new settings no
  longer hold; on a delete, it revokes them all;
* on its hourly schedule: every grant whose table exists (EventBridge delivers Glue's events on a best
  effort basis).

A grant may name a child catalog of the account's (`catalog`): the tables of the stage's S3 Tables
table bucket, which Lake Formation sees through the federated catalog
`<account>:s3tablescatalog/<bucket>` (a namespace is a database there). Those grants include DESCRIBE
on the namespace itself (`table` None). S3 Tables creates tables through its own API, not Glue's
CreateTable, so no Glue event names them: the deploy and the hourly pass apply them, and until the
account's S3 Tables integration shows the namespace or the table in that catalog they wait.

Granting what is already granted changes nothing in Lake Formation, so each path may repeat another.

A grant that cannot be applied never fails the deploy (a failed custom resource rolls the whole stack
back, and some grants can only be given after a first successful deploy: the grant option in the
S3 Tables federated catalog needs the function's role to exist). Each grant ends in one outcome, with
the error code AWS answered and its message: granted; waiting (not found: its table has not been
created yet, or the account's S3 Tables integration does not show it); denied (AccessDeniedException on
the catalog lookup: the function may not see the catalog); no_grant_option (AccessDeniedException from
GrantPermissions, which IAM allows the function: Lake Formation refuses because the function holds no
grant option there); failed (any other error code of Glue's or Lake Formation's API). The Lambda puts
them in its custom resource's response data and its `ReaderGrantsUngranted` metric, and
`lakeloader doctor` names each ungranted grant with the administrator's command that applies it
(`grant_command`).
Standard library and boto3 only: the Lambda ships it as plain Python.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

log = logging.getLogger(__name__)

# The function is `<project>-<stage>-reader-grants` (the stack's name, then this): doctor finds it so.
FUNCTION_NAME = "reader-grants"
ENV_GRANTS = "READER_GRANTS"
ENV_CATALOG_ID = "CATALOG_ID"
GLUE_SOURCE = "aws.glue"
TABLE_CREATED_DETAIL_TYPE = "Glue Data Catalog Database State Change"
TABLE_CREATED = "CreateTable"
SCHEDULED_DETAIL_TYPE = "Scheduled Event"
# What CloudFormation's custom resource passes (the same JSON as the environment's).
PROPERTY_GRANTS = "Grants"
# Outcomes of one grant (the keys of `apply`'s result); the last three are ungranted.
GRANTED, WAITING, DENIED, NO_GRANT_OPTION, FAILED = (
    "granted",
    "waiting",
    "denied",
    "no_grant_option",
    "failed",
)
UNGRANTED = (DENIED, NO_GRANT_OPTION, FAILED)
NOT_FOUND = "EntityNotFoundException"
ACCESS_DENIED = "AccessDeniedException"


@dataclass(frozen=True)
class TableGrant:
    """One reader's grant on one table by name: `permissions` on the table, or, with
    `excluded_columns`, SELECT on every column but those; with `table` None, on the database."""

    principal: str
    database: str  # the Glue database (stage prefix included), or the S3 Tables namespace
    table: str | None
    permissions: tuple[str, ...]
    excluded_columns: tuple[str, ...] = ()
    catalog: str = ""  # a child catalog of the account's, "s3tablescatalog/<table bucket>"; "" for its own

    def catalog_id(self, account_catalog_id: str) -> str:
        """The Data Catalog the grant is in: the account's, or its child `<account>:<catalog>`."""
        return f"{account_catalog_id}:{self.catalog}" if self.catalog else account_catalog_id

    def resource(self, account_catalog_id: str) -> dict[str, Any]:
        catalog_id = self.catalog_id(account_catalog_id)
        if self.table is None:
            return {"Database": {"CatalogId": catalog_id, "Name": self.database}}
        named = {"CatalogId": catalog_id, "DatabaseName": self.database, "Name": self.table}
        if self.excluded_columns:
            return {
                "TableWithColumns": {
                    **named,
                    "ColumnWildcard": {"ExcludedColumnNames": list(self.excluded_columns)},
                }
            }
        return {"Table": named}

    def listed_on(self, account_catalog_id: str) -> dict[str, Any]:
        """The resource to ask ListPermissions about for this grant. A grant with hidden columns is asked
        about on its table: ListPermissions "does not support getting privileges on a table with
        columns. Instead, call this operation on the table, and the operation returns the table and the
        table w columns" (Lake Formation API Reference, ListPermissions); it answers InvalidInput else."""
        resource = self.resource(account_catalog_id)
        columns = resource.get("TableWithColumns")
        if columns is None:
            return resource
        return {"Table": {key: columns[key] for key in ("CatalogId", "DatabaseName", "Name")}}

    def held_in(self, listed: Iterable[Mapping[str, Any]]) -> bool:
        """Whether ListPermissions' entries (its `PrincipalResourcePermissions`, asked about `listed_on`)
        hold this grant: its permissions on its own resource. The table's entries with other hidden
        columns (or none hidden) are not this grant, nor is a grant on the whole table one on some columns."""
        kind = next(iter(self.resource("")))

        def same(resource: Mapping[str, Any]) -> bool:
            found = resource.get(kind)
            if found is None:
                return False
            if self.table is None:
                return found.get("Name") == self.database
            hidden = (found.get("ColumnWildcard") or {}).get("ExcludedColumnNames") or []
            named = (found.get("DatabaseName"), found.get("Name")) == (self.database, self.table)
            return named and sorted(hidden) == sorted(self.excluded_columns)

        mine = [entry for entry in listed if same(entry.get("Resource", {}))]
        return set(self.permissions) <= {p for entry in mine for p in entry.get("Permissions", [])}

    def as_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "p": self.principal,
            "d": self.database,
            "t": self.table,
            "a": list(self.permissions),
        }
        if self.excluded_columns:
            found["x"] = list(self.excluded_columns)
        if self.catalog:
            found["c"] = self.catalog
        return found

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> TableGrant:
        return cls(
            raw["p"], raw["d"], raw["t"], tuple(raw["a"]), tuple(raw.get("x") or ()), raw.get("c") or ""
        )

    def __str__(self) -> str:
        hidden = f" without {', '.join(self.excluded_columns)}" if self.excluded_columns else ""
        where = f"{self.catalog}/" if self.catalog else ""
        named = self.database if self.table is None else f"{self.database}.{self.table}"
        return f"{'+'.join(self.permissions)} on {where}{named}{hidden} to {self.principal}"


def encode(grants: Iterable[TableGrant]) -> str:
    """The grants as compact JSON, sorted (the same settings give the same text, hence no update)."""
    rows = sorted((g.as_json() for g in grants), key=lambda r: json.dumps(r, sort_keys=True))
    return json.dumps(rows, separators=(",", ":"), sort_keys=True)


def decode(text: str | None) -> list[TableGrant]:
    return [TableGrant.from_json(row) for row in json.loads(text or "[]")]


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", "Unknown"))


def described(grant: TableGrant, exc: ClientError) -> str:
    """The grant and what AWS answered, as one readable line."""
    message = str(exc.response.get("Error", {}).get("Message", "")).strip()
    return f"{grant}: {error_code(exc)}" + (f": {message}" if message else "")


def lookup(glue: Any, grant: TableGrant, account_catalog_id: str) -> ClientError | None:
    """None when the grant's table (or database) is in its catalog; else the error that says why not."""
    where = {"CatalogId": grant.catalog_id(account_catalog_id)} if grant.catalog else {}
    try:
        if grant.table is None:
            glue.get_database(**where, Name=grant.database)
        else:
            glue.get_table(**where, DatabaseName=grant.database, Name=grant.table)
    except ClientError as exc:
        return exc
    return None


def lookup_outcome(exc: ClientError) -> str:
    """What a failed catalog lookup means for the grant: it waits for its table, or it is ungranted."""
    return {NOT_FOUND: WAITING, ACCESS_DENIED: DENIED}.get(error_code(exc), FAILED)


def grant_outcome(exc: ClientError) -> str:
    """What a failed GrantPermissions means. IAM lets the function call it on any resource, so an
    AccessDeniedException is Lake Formation's: the function holds no grant option on that resource."""
    return {NOT_FOUND: WAITING, ACCESS_DENIED: NO_GRANT_OPTION}.get(error_code(exc), FAILED)


def grant_command(grant: TableGrant, account_catalog_id: str) -> str:
    """The one AWS CLI command a data lake administrator runs to apply `grant` by hand."""
    resource = json.dumps(grant.resource(account_catalog_id), separators=(",", ":"), sort_keys=True)
    return (
        f"aws lakeformation grant-permissions --catalog-id {grant.catalog_id(account_catalog_id)} "
        f"--principal DataLakePrincipalIdentifier={grant.principal} --resource '{resource}' "
        f"--permissions {' '.join(grant.permissions)}"
    )


def apply(
    grants: Iterable[TableGrant],
    *,
    lakeformation: Any,
    glue: Any,
    catalog_id: str,
    tables: set[tuple[str, str]] | None = None,
) -> dict[str, list[str]]:
    """Grant each of `grants` (those of the Glue-created `tables` only, when given) whose table exists;
    the others wait for their table. Returns {"granted": [...], "waiting": [...]} as readable lines, and
    each ungranted outcome (UNGRANTED) that occurred, its lines naming the error AWS answered."""
    done: dict[str, list[str]] = {GRANTED: [], WAITING: []}
    for grant in grants:
        if tables is not None and (grant.catalog or (grant.database, grant.table) not in tables):
            continue
        missing = lookup(glue, grant, catalog_id)
        if missing is not None:
            outcome = lookup_outcome(missing)
            done.setdefault(outcome, []).append(
                str(grant) if outcome == WAITING else described(grant, missing)
            )
            continue
        try:
            lakeformation.grant_permissions(**permissions_request(grant, catalog_id))
        except ClientError as exc:
            outcome = grant_outcome(exc)
            done.setdefault(outcome, []).append(str(grant) if outcome == WAITING else described(grant, exc))
            log.warning("not granted (%s): %s", outcome, described(grant, exc))
            continue
        done[GRANTED].append(str(grant))
        log.info("granted %s", grant)
    return done


def permissions_request(grant: TableGrant, catalog_id: str) -> dict[str, Any]:
    """Lake Formation's GrantPermissions and RevokePermissions take the same request (no grant option)."""
    return {
        "CatalogId": grant.catalog_id(catalog_id),
        "Principal": {"DataLakePrincipalIdentifier": grant.principal},
        "Resource": grant.resource(catalog_id),
        "Permissions": list(grant.permissions),
        "PermissionsWithGrantOption": [],
    }


def ungranted(result: Mapping[str, Any]) -> list[str]:
    """The lines of `apply`'s result whose grant is not applied for a reason other than its table."""
    return [line for outcome in UNGRANTED for line in result.get(outcome, [])]


def revoke(
    grants: Iterable[TableGrant], *, lakeformation: Any, glue: Any, catalog_id: str
) -> dict[str, list[str]]:
    """Revoke each of `grants` whose table exists (a table that is gone took its grants with it).
    Returns {"revoked": [...]}, and "unrevoked" with the error of each revoke AWS refused: a stack's
    delete or update does not fail on a grant either."""
    done: dict[str, list[str]] = {"revoked": []}
    for grant in grants:
        missing = lookup(glue, grant, catalog_id)
        if missing is not None:
            if lookup_outcome(missing) != WAITING:
                done.setdefault("unrevoked", []).append(described(grant, missing))
            continue
        try:
            lakeformation.revoke_permissions(**permissions_request(grant, catalog_id))
        except ClientError as exc:
            if error_code(exc) == "InvalidInputException":  # not granted (any more)
                log.info("nothing to revoke for %s: %s", grant, exc)
            else:
                done.setdefault("unrevoked", []).append(described(grant, exc))
            continue
        done["revoked"].append(str(grant))
        log.info("revoked %s", grant)
    return done


def created_tables(event: Mapping[str, Any]) -> set[tuple[str, str]] | None:
    """The (database, table) pairs a Glue "table created" event names; None for any other event."""
    detail = event.get("detail") or {}
    if event.get("source") != GLUE_SOURCE or event.get("detail-type") != TABLE_CREATED_DETAIL_TYPE:
        return None
    if detail.get("typeOfChange") != TABLE_CREATED:
        return set()
    database = detail.get("databaseName") or ""
    return {(database, table) for table in detail.get("changedTables") or []}


def handle(
    event: Mapping[str, Any], *, grants: list[TableGrant], lakeformation: Any, glue: Any, catalog_id: str
) -> dict[str, Any]:
    """One invocation: a Glue event, a CloudFormation custom-resource request or the schedule."""
    request = event.get("RequestType")
    if request:  # CloudFormation
        current = decode((event.get("ResourceProperties") or {}).get(PROPERTY_GRANTS))
        if request == "Delete":
            return revoke(current, lakeformation=lakeformation, glue=glue, catalog_id=catalog_id)
        result: dict[str, Any] = {}
        if request == "Update":
            old = decode((event.get("OldResourceProperties") or {}).get(PROPERTY_GRANTS))
            dropped = [g for g in old if g not in set(current)]
            result = revoke(dropped, lakeformation=lakeformation, glue=glue, catalog_id=catalog_id)
        return result | apply(current, lakeformation=lakeformation, glue=glue, catalog_id=catalog_id)
    tables = created_tables(event)
    if tables is None and event.get("detail-type") != SCHEDULED_DETAIL_TYPE:
        log.warning("ignored an event of %s / %s", event.get("source"), event.get("detail-type"))
        return {"granted": [], "waiting": [], "ignored": True}
    return apply(grants, lakeformation=lakeformation, glue=glue, catalog_id=catalog_id, tables=tables)
