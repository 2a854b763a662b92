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
Standard library and boto3 only: the Lambda ships it as plain Python.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

ENV_GRANTS = "READER_GRANTS"
ENV_CATALOG_ID = "CATALOG_ID"
GLUE_SOURCE = "aws.glue"
TABLE_CREATED_DETAIL_TYPE = "Glue Data Catalog Database State Change"
TABLE_CREATED = "CreateTable"
SCHEDULED_DETAIL_TYPE = "Scheduled Event"
# What CloudFormation's custom resource passes (the same JSON as the environment's).
PROPERTY_GRANTS = "Grants"


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


def exists(glue: Any, grant: TableGrant, account_catalog_id: str) -> bool:
    """Whether the grant's table (or database) is in its catalog yet."""
    where = {"CatalogId": grant.catalog_id(account_catalog_id)} if grant.catalog else {}
    try:
        if grant.table is None:
            glue.get_database(**where, Name=grant.database)
        else:
            glue.get_table(**where, DatabaseName=grant.database, Name=grant.table)
    except glue.exceptions.EntityNotFoundException:
        return False
    return True


def apply(
    grants: Iterable[TableGrant],
    *,
    lakeformation: Any,
    glue: Any,
    catalog_id: str,
    tables: set[tuple[str, str]] | None = None,
) -> dict[str, list[str]]:
    """Grant each of `grants` (those of the Glue-created `tables` only, when given) whose table exists;
    the others wait for their table. Returns {"granted": [...], "waiting": [...]} as readable lines."""
    done: dict[str, list[str]] = {"granted": [], "waiting": []}
    for grant in grants:
        if tables is not None and (grant.catalog or (grant.database, grant.table) not in tables):
            continue
        if not exists(glue, grant, catalog_id):
            done["waiting"].append(str(grant))
            continue
        lakeformation.grant_permissions(
            CatalogId=grant.catalog_id(catalog_id),
            Principal={"DataLakePrincipalIdentifier": grant.principal},
            Resource=grant.resource(catalog_id),
            Permissions=list(grant.permissions),
            PermissionsWithGrantOption=[],
        )
        done["granted"].append(str(grant))
        log.info("granted %s", grant)
    return done


def revoke(grants: Iterable[TableGrant], *, lakeformation: Any, glue: Any, catalog_id: str) -> list[str]:
    """Revoke each of `grants` whose table exists (a table that is gone took its grants with it)."""
    revoked = []
    for grant in grants:
        if not exists(glue, grant, catalog_id):
            continue
        try:
            lakeformation.revoke_permissions(
                CatalogId=grant.catalog_id(catalog_id),
                Principal={"DataLakePrincipalIdentifier": grant.principal},
                Resource=grant.resource(catalog_id),
                Permissions=list(grant.permissions),
                PermissionsWithGrantOption=[],
            )
        except lakeformation.exceptions.InvalidInputException as exc:  # not granted (any more)
            log.info("nothing to revoke for %s: %s", grant, exc)
            continue
        revoked.append(str(grant))
        log.info("revoked %s", grant)
    return revoked


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
            return {"revoked": revoke(current, lakeformation=lakeformation, glue=glue, catalog_id=catalog_id)}
        result: dict[str, Any] = {}
        if request == "Update":
            old = decode((event.get("OldResourceProperties") or {}).get(PROPERTY_GRANTS))
            dropped = [g for g in old if g not in set(current)]
            result["revoked"] = revoke(dropped, lakeformation=lakeformation, glue=glue, catalog_id=catalog_id)
        return result | apply(current, lakeformation=lakeformation, glue=glue, catalog_id=catalog_id)
    tables = created_tables(event)
    if tables is None and event.get("detail-type") != SCHEDULED_DETAIL_TYPE:
        log.warning("ignored an event of %s / %s", event.get("source"), event.get("detail-type"))
        return {"granted": [], "waiting": [], "ignored": True}
    return apply(grants, lakeformation=lakeformation, glue=glue, catalog_id=catalog_id, tables=tables)
