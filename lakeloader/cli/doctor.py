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
