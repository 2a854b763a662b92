"""The emulator's patches around the Glue Data Catalog (PINNED with patches.MOTO_VERSION): Lake
Formation's idempotent grants and its listing of a table's column grants, Glue's "table created"
events, and EventBridge rules whose targets are Lambda functions (the reader-grants path: a table
created -> an event -> the grant Lambda).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from lakeloader_dev.emulator.lambda_runner import invoke_async

# Lake Formation: granting again what a principal holds --------------------------------


def patch_lakeformation_regrant() -> None:
    """Lake Formation grants idempotently: granting a principal what it holds changes nothing. moto
    5.2.5 merges the permissions into the stored grant in place, changing its hash inside the set that
    holds it, so a later revoke of it raises KeyError. Merge it out of the set and put it back."""
    from moto.lakeformation.models import PermissionCatalog

    if getattr(PermissionCatalog.add_permission, "lakeloader", False):
        return

    def add_permission(self: Any, permission: Any) -> None:
        for existing in list(self.permissions):
            if permission.equal_principal_and_resouce(existing):
                self.permissions.remove(existing)
                existing.merge(permission)
                self.permissions.add(existing)
                return
        self.permissions.add(permission)

    add_permission.lakeloader = True  # type: ignore[attr-defined]
    PermissionCatalog.add_permission = add_permission  # type: ignore[method-assign]


def patch_lakeformation_list_table_columns() -> None:
    """Lake Formation's ListPermissions on a table answers the table's grants and its grants with
    columns ("call this operation on the table, and the operation returns the table and the table w
    columns", Lake Formation API Reference, ListPermissions: it refuses a table with columns as the
    resource); moto 5.2.5 answers the table's grants only."""
    from moto.lakeformation.models import LakeFormationBackend

    if getattr(LakeFormationBackend.list_permissions, "lakeloader", False):
        return
    original = LakeFormationBackend.list_permissions

    def list_permissions(
        self: Any, catalog_id: str, principal: Any = None, resource: Any = None, resource_type: Any = None
    ) -> list[dict[str, Any]]:
        found = original(self, catalog_id, principal, resource, resource_type)
        table = getattr(resource, "table", None)
        if table is None or table.name is None or catalog_id not in self.grants:
            return found
        for permission in self.grants[catalog_id].permissions:
            columns = permission.resource.get("TableWithColumns") or {}
            listed = permission.to_external_form()
            if (
                (columns.get("DatabaseName"), columns.get("Name")) == (table.database_name, table.name)
                and (principal is None or permission.principal == principal)
                and listed not in found
            ):
                found.append(listed)
        return found

    list_permissions.lakeloader = True  # type: ignore[attr-defined]
    LakeFormationBackend.list_permissions = list_permissions  # type: ignore[method-assign]


# Glue's "table created" events and EventBridge rules that target a Lambda --------------

GLUE_DATABASE_CHANGE = "Glue Data Catalog Database State Change"


def patch_glue_table_events() -> None:
    """Glue sends "Glue Data Catalog Database State Change" (`typeOfChange` CreateTable, the database
    and the table) to the account's default event bus when a table is created (AWS Glue events,
    EventBridge reference); moto's Glue sends nothing."""
    from moto.events.models import events_backends
    from moto.glue.models import GlueBackend

    original = GlueBackend.create_table

    def create_table(self: Any, database_name: str, table_name: str, *args: Any, **kwargs: Any) -> Any:
        table = original(self, database_name, table_name, *args, **kwargs)
        detail = {"databaseName": database_name, "typeOfChange": "CreateTable", "changedTables": [table_name]}
        arn = f"arn:aws:glue:{self.region_name}:{self.account_id}:table/{database_name}/{table_name}"
        events_backends[self.account_id][self.region_name].put_events(
            [
                {
                    "Source": "aws.glue",
                    "DetailType": GLUE_DATABASE_CHANGE,
                    "Detail": json.dumps(detail),
                    "Resources": [arn],
                }
            ]
        )
        return table

    GlueBackend.create_table = create_table  # type: ignore[method-assign]


def patch_events_lambda_targets(runtime: Callable[[], Any]) -> None:
    """EventBridge invokes a rule's Lambda targets asynchronously with the event; moto 5.2.5 delivers to
    logs, SQS and event buses only. An event on the bus never reaches a scheduled rule: on AWS a rule
    has a schedule or a pattern, and moto matches every event against a schedule's empty pattern (the
    sweep Lambda ran on each table a Glue job created, and a schedule's Step Functions target failed
    Glue's CreateTable with NotImplementedError)."""
    from moto.events.models import Rule
    from moto.utilities.arns import parse_arn

    original = Rule.send_to_targets

    def send_to_targets(self: Any, original_event: Any, transform_input: bool = True) -> None:
        if self.scheduled_expression:
            return
        functions = [t for t in self.targets if parse_arn(t["Arn"]).service == "lambda"]
        others = [t for t in self.targets if t not in functions]
        if others:  # moto raises NotImplementedError on a target type it does not deliver to
            every, self.targets = self.targets, others
            try:
                original(self, original_event, transform_input)
            finally:
                self.targets = every
        if not functions or not self.event_pattern.matches_event(original_event):
            return
        from moto.awslambda.utils import get_backend

        for target in functions:
            arn = parse_arn(target["Arn"])
            try:
                fn = get_backend(arn.account, arn.region).get_function(target["Arn"])
            except Exception:  # noqa: BLE001 - like EventBridge: a missing target fails no put_events
                continue
            invoke_async(runtime(), fn, dict(original_event), trigger="events")

    Rule.send_to_targets = send_to_targets  # type: ignore[method-assign]


# The S3 Tables federation of the Glue Data Catalog ---------------------------------------

# What the federated catalog `<account>:s3tablescatalog/<bucket>` answers Glue's GetCatalog,
# GetDatabase and GetTable: None, as moto does (it ignores CatalogId: a namespace is "not found", the
# account's S3 Tables integration being off), or an error code, e.g. "AccessDeniedException" (the
# integration on, and the caller not allowed to see it). A test sets it through `federation_answers`.
FEDERATION: dict[str, str | None] = {"answer": None}
FEDERATED_CATALOG = ":s3tablescatalog"


def federation_answers(code: str | None) -> None:
    """Make the S3 Tables federated catalog answer `code` to every lookup (None: moto's own answer)."""
    FEDERATION["answer"] = code


def patch_glue_s3_tables_federation() -> None:
    from moto.glue.exceptions import GlueClientError
    from moto.glue.responses import GlueResponse

    if getattr(GlueResponse.get_table, "lakeloader", False):
        return

    def answering(original: Callable[..., Any]) -> Callable[..., Any]:
        def lookup(self: Any) -> Any:
            catalog = str(self.parameters.get("CatalogId") or "")
            code = FEDERATION["answer"]
            if code and FEDERATED_CATALOG in catalog:
                raise GlueClientError(
                    code, f"not authorized to access catalog {catalog} (the emulator's answer)"
                )
            return original(self)

        lookup.lakeloader = True  # type: ignore[attr-defined]
        return lookup

    for name in ("get_catalog", "get_database", "get_table"):
        if hasattr(GlueResponse, name):
            setattr(GlueResponse, name, answering(getattr(GlueResponse, name)))


# Lake Formation's DROP on Glue's DeleteTable ------------------------------------------------

# What Glue's DeleteTable answers in Lake Formation mode: None, as moto does (it checks no permission),
# or an error code, e.g. "AccessDeniedException": Lake Formation's answer to a caller without DROP on
# the table, as a data lake administrator is for a table another principal created ("Implicit Lake
# Formation permissions"). A test sets it through `table_drops_answer`.
TABLE_DROP: dict[str, str | None] = {"answer": None}


def table_drops_answer(code: str | None) -> None:
    """Make Glue's DeleteTable answer `code` to every request (None: moto's own answer)."""
    TABLE_DROP["answer"] = code


def patch_glue_table_drop_permission() -> None:
    from moto.glue.exceptions import GlueClientError
    from moto.glue.responses import GlueResponse

    if getattr(GlueResponse.delete_table, "lakeloader", False):
        return
    original = GlueResponse.delete_table

    def delete_table(self: Any) -> Any:
        code = TABLE_DROP["answer"]
        if code:
            table = f"{self.parameters.get('DatabaseName')}.{self.parameters.get('Name')}"
            reason = f"Insufficient Lake Formation permission(s): Required Drop on {table}"
            raise GlueClientError(code, f"{reason} (the emulator's answer)")
        return original(self)

    delete_table.lakeloader = True  # type: ignore[attr-defined]
    GlueResponse.delete_table = delete_table  # type: ignore[method-assign]
