"""`lakeloader doctor --stage NAME`: the account preconditions a deployed stage relies on, each checked
with the call an operator would make by hand, and the fix when it fails (docs/query.md).

Lake Formation mode is recognised by its registered warehouse. In that mode Lake Formation must allow
full table access for external engines (Glue 5 / EMR 7 jobs get no credentials otherwise), and
`IAMAllowedPrincipals` must hold nothing on the stage's databases (or IAM alone still decides).
boto3 only; AWS_ENDPOINT_URL points it at an emulator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3

IAM_ALLOWED_PRINCIPALS = "IAM_ALLOWED_PRINCIPALS"


@dataclass(frozen=True)
class Precondition:
    """One precondition of the stage: passed, failed (with the fix) or not applicable (`passed` None)."""

    name: str
    passed: bool | None
    detail: str
    fix: str = ""

    def line(self) -> str:
        mark = {True: "ok  ", False: "FAIL", None: "--  "}[self.passed]
        text = f"{mark} {self.name}: {self.detail}"
        return f"{text}\n       fix: {self.fix}" if self.fix and self.passed is False else text


def warehouse_arn(warehouse: str, region: str) -> str:
    """The S3 ARN Lake Formation registers for `s3://bucket/prefix/` (the stack registers it so)."""
    partition = (
        "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"
    )
    return f"arn:{partition}:s3:::{warehouse.removeprefix('s3://').rstrip('/')}"


def lake_formation_checks(
    warehouse: str, databases: list[str], client: Any | None = None
) -> list[Precondition]:
    """The Lake Formation preconditions of a stage whose warehouse is `warehouse`, with `databases`."""
    client = client or boto3.client("lakeformation")
    arn = warehouse_arn(warehouse, client.meta.region_name)
    try:
        client.describe_resource(ResourceArn=arn)
    except client.exceptions.EntityNotFoundException:
        off = f"off ({arn} is not registered): IAM policies decide"
        return [Precondition("Lake Formation mode", None, off)]
    checks = [Precondition("Lake Formation mode", True, f"on ({arn} is registered)")]
    settings = client.get_data_lake_settings()["DataLakeSettings"]
    checks.append(
        Precondition(
            "full table access for external engines",
            settings.get("AllowFullTableExternalDataAccess") is True,
            "allowed"
            if settings.get("AllowFullTableExternalDataAccess")
            else "not allowed: every Glue/EMR run of the stage fails with AccessDenied",
            "Lake Formation console > Application integration settings > allow external engines to access "
            "data in Amazon S3 locations with full table access",
        )
    )
    for database in databases:
        held = client.list_permissions(
            Principal={"DataLakePrincipalIdentifier": IAM_ALLOWED_PRINCIPALS},
            Resource={"Database": {"Name": database}},
        )["PrincipalResourcePermissions"]
        checks.append(
            Precondition(
                f"database {database}",
                not held,
                "IAMAllowedPrincipals holds nothing"
                if not held
                else "IAMAllowedPrincipals holds "
                f"{', '.join(sorted({p for h in held for p in h['Permissions']}))}: IAM alone still decides",
                "aws lakeformation revoke-permissions --principal DataLakePrincipalIdentifier="
                f'{IAM_ALLOWED_PRINCIPALS} --resource \'{{"Database": {{"Name": "{database}"}}}}\' '
                "--permissions ALL",
            )
        )
    return checks


def reader_grant_checks(
    function_name: str, *, functions: Any = None, glue: Any = None, lakeformation: Any = None
) -> list[Precondition]:
    """Each reader grant on a table by name (the reader-grants Lambda's `READER_GRANTS`), checked as Lake
    Formation holds it: granted; waiting for its table's first run (not a failure); or ungranted, with
    the data lake administrator's one command that applies it. A stage without that Lambda (IAM mode,
    or no such grant) has none."""
    from botocore.exceptions import ClientError

    from lakeloader.control import reader_grants

    functions = functions or boto3.client("lambda")
    try:
        environment = functions.get_function_configuration(FunctionName=function_name).get("Environment", {})
    except functions.exceptions.ResourceNotFoundException:
        return []
    except ClientError as exc:
        code = reader_grants.error_code(exc)
        fix = f"allow lambda:GetFunctionConfiguration on {function_name} to the role you run doctor with"
        return [Precondition("reader grants", False, f"cannot read {function_name}: {code}", fix)]
    variables = environment.get("Variables", {})
    catalog_id = variables[reader_grants.ENV_CATALOG_ID]
    glue = glue or boto3.client("glue")
    lakeformation = lakeformation or boto3.client("lakeformation")
    checks = []
    for grant in reader_grants.decode(variables.get(reader_grants.ENV_GRANTS)):
        name = f"reader grant {grant}"
        missing = reader_grants.lookup(glue, grant, catalog_id)
        if missing is not None and reader_grants.lookup_outcome(missing) == reader_grants.WAITING:
            checks.append(
                Precondition(name, None, "waits for its table's first run (the Lambda grants it then)")
            )
            continue
        if missing is not None:
            detail = f"not granted: {reader_grants.error_code(missing)} on the catalog lookup"
        else:
            try:
                held = lakeformation.list_permissions(
                    CatalogId=grant.catalog_id(catalog_id),
                    Principal={"DataLakePrincipalIdentifier": grant.principal},
                    Resource=grant.listed_on(catalog_id),
                )["PrincipalResourcePermissions"]
            except ClientError as exc:
                held, detail = [], f"not granted: {reader_grants.error_code(exc)} on listing its permissions"
            else:
                detail = "not granted"
            if grant.held_in(held):
                checks.append(Precondition(name, True, "granted"))
                continue
        checks.append(Precondition(name, False, detail, reader_grants.grant_command(grant, catalog_id)))
    return checks
