"""Readers (stage setting `readers`) of the tables in the stage's S3 Tables table bucket.

Such a table is not in the stage's Glue databases: query engines see it through the account's S3
Tables integration with the Glue Data Catalog, the federated catalog `s3tablescatalog`, whose child
`s3tablescatalog/<table bucket>` holds a database per namespace and the namespace's tables (Glue,
"Specifying AWS Glue resource ARNs"). A reader whose `tables` select some of them gets, in its policy:

* the Glue reads of that child catalog, of the namespaces and of its tables by name;
* in IAM mode, the S3 Tables reads: the table bucket (GetTableBucket, GetNamespace, ListNamespaces,
  ListTables) and the data of its tables (GetTable, GetTableMetadataLocation, GetTableData). A table's
  ARN carries its id, not its name, so these are scoped by name with the condition keys S3 Tables
  sets on a table's actions, `s3tables:namespace` and `s3tables:tableName` ("Actions, resources, and
  condition keys for Amazon S3 Tables");
* in Lake Formation mode, DESCRIBE on the namespaces and SELECT on the tables (without the excluded
  columns), in the federated catalog, applied by the reader-grants Lambda (infra.reader_grants):
  CloudFormation's AWS::LakeFormation::PrincipalPermissions takes only a 12-digit catalog id, not
  `<account>:s3tablescatalog/<bucket>`, and S3 Tables creates a table through its own API, so no Glue
  event announces it: the deploy and the hourly pass grant what the catalog shows.

The tables are always granted by name, so the tombstones' side tables beside them never are.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.s3_tables import TableBucket
from lakeloader.config import LakeConfig
from lakeloader.control.reader_grants import TableGrant

FEDERATED_CATALOG = "s3tablescatalog"
FEDERATED_READ_ACTIONS = [
    "glue:GetCatalog",
    "glue:GetDatabase",
    "glue:GetDatabases",
    "glue:GetTable",
    "glue:GetTables",
]
READER_TABLE_BUCKET_ACTIONS = [
    "s3tables:GetTableBucket",
    "s3tables:GetNamespace",
    "s3tables:ListNamespaces",
    "s3tables:ListTables",
]
READER_TABLE_ACTIONS = ["s3tables:GetTable", "s3tables:GetTableMetadataLocation", "s3tables:GetTableData"]


def bucket_targets(lake: LakeConfig) -> set[str]:
    """The config targets (`database.table`) that live in the table bucket."""
    return {f"{t.target.database}.{t.target.table}" for t in lake.tables if t.target.storage == "s3_tables"}


def namespaces_of(tables: list[str]) -> dict[str, list[str]]:
    """Namespace (the config database) -> the tables, sorted."""
    found: dict[str, list[str]] = {}
    for target in sorted(tables):
        namespace, table = target.split(".", 1)
        found.setdefault(namespace, []).append(table)
    return found


def child_catalog(bucket_name: str) -> str:
    """The table bucket's catalog under the account's: `s3tablescatalog/<bucket>`."""
    return f"{FEDERATED_CATALOG}/{bucket_name}"


def federated_arns(scope: Construct, bucket_name: str, tables: dict[str, list[str]]) -> list[str]:
    """The Glue ARNs of the federated catalog, the table bucket's child catalog, its `tables`' namespaces
    and the tables by name."""
    stack = Stack.of(scope)
    child = child_catalog(bucket_name)
    arns = [
        stack.format_arn(service="glue", resource="catalog", resource_name=FEDERATED_CATALOG),
        stack.format_arn(service="glue", resource="catalog", resource_name=child),
    ]
    for namespace, names in tables.items():
        arns.append(
            stack.format_arn(service="glue", resource="database", resource_name=f"{child}/{namespace}")
        )
        arns += [
            stack.format_arn(service="glue", resource="table", resource_name=f"{child}/{namespace}/{name}")
            for name in names
        ]
    return arns


def reader_statements(
    scope: Construct, *, bucket: TableBucket, tables: dict[str, list[str]], lake_formation: bool
) -> list[iam.PolicyStatement]:
    """What a reader of `tables` (namespace -> names) needs beyond the stage key, which every reader has:
    the federated catalog's entries, and in IAM mode the tables' data (Lake Formation vends it otherwise)."""
    statements = [
        iam.PolicyStatement(
            sid="ReadS3TablesCatalog",
            actions=FEDERATED_READ_ACTIONS,
            resources=federated_arns(scope, bucket.name, tables),
        )
    ]
    if lake_formation:
        return statements
    statements.append(
        iam.PolicyStatement(
            sid="ReadTableBucket", actions=READER_TABLE_BUCKET_ACTIONS, resources=[bucket.arn]
        )
    )
    statements += [
        iam.PolicyStatement(
            sid=f"ReadS3Tables{index}",
            actions=READER_TABLE_ACTIONS,
            resources=[bucket.tables_arn],
            conditions={"StringEquals": {"s3tables:namespace": namespace, "s3tables:tableName": names}},
        )
        for index, (namespace, names) in enumerate(tables.items())
    ]
    return statements


def federated_grants(
    principal: str, bucket_name: str, tables: dict[str, list[str]], exclude_columns: dict[str, list[str]]
) -> list[TableGrant]:
    """A reader's Lake Formation grants in the table bucket's catalog: DESCRIBE on each namespace, SELECT
    on each table (with DESCRIBE, unless some of its columns are hidden)."""
    catalog = child_catalog(bucket_name)
    grants = []
    for namespace, names in tables.items():
        grants.append(TableGrant(principal, namespace, None, ("DESCRIBE",), catalog=catalog))
        for name in names:
            excluded = tuple(exclude_columns.get(f"{namespace}.{name}") or ())
            permissions = ("SELECT",) if excluded else ("SELECT", "DESCRIBE")
            grants.append(TableGrant(principal, namespace, name, permissions, excluded, catalog))
    return grants
