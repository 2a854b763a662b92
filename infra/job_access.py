"""What the job roles of both engines (Glue, EMR Serverless) may reach in the lake.

Objects under the source folders of the configured tables' raw prefixes (infra.catalog.raw_folders),
the warehouse, the quarantine bucket, the
config/ledger/runs tables, the Iceberg tables of the stage's Glue databases, the stage's key and
lakeloader's metrics namespace; nothing more (tests/infra/test_infra_iam_sufficient.py checks
each action the jobs call is allowed).

In Lake Formation mode the warehouse is not among them: Glue 5.x and EMR Serverless 7.8+ full
table access read and write a registered table's S3 data with credentials Lake Formation vends
(`lakeformation:GetDataAccess` and the role's Lake Formation grants), and use the role's own
credentials only for what is not registered ("Using AWS Glue with AWS Lake Formation for Full
Table Access"; "Lake Formation full table access for EMR Serverless", step 2: the job runtime
role needs `lakeformation:GetDataAccess` in addition to its Lake Formation permissions). A direct
IAM grant on the warehouse would serve the jobs if Lake Formation's path broke, and hide that.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam

from infra.catalog import Catalog, glue_arns, grant_warehouse
from infra.config_store import ConfigStore
from infra.nag import arn_ref
from infra.storage import WAREHOUSE_PREFIX, LakeStorage
from lakeloader.control import contract

# What the jobs call on the Glue Data Catalog (Iceberg's GlueCatalog). CloudFormation owns the
# declared tables' databases; a found table's database the job creates (CREATE_DATABASE_ACTIONS).
JOB_CATALOG_ACTIONS = [
    "glue:GetDatabase",
    "glue:GetTable",
    "glue:GetTables",
    "glue:CreateTable",
    "glue:UpdateTable",
    "glue:DeleteTable",
]
# `CREATE NAMESPACE IF NOT EXISTS` of a found table's database (Iceberg's GlueCatalog.createNamespace):
# glue:CreateDatabase is authorised on the catalog and on the new database.
CREATE_DATABASE_ACTIONS = ["glue:CreateDatabase"]
# Spark resolves its current namespace, `default`, when a session starts (EMR's session catalog is
# the Glue Data Catalog): reading it is all the jobs do there.
DEFAULT_DATABASE = "default"


def grant_lake_access(
    role: iam.Role,
    *,
    lake_formation: bool,
    storage: LakeStorage,
    store: ConfigStore,
    databases: list[str],
    found_databases: list[str],
    raw_prefixes: list[str],
) -> None:
    """What both engines' jobs touch: raw source folders, warehouse, quarantine, tables, catalog, key.
    `found_databases`: globs of the databases the sources' found tables land in, which the jobs create
    (under the stage's database prefix, so another stage's databases stay out of reach)."""
    role.add_to_policy(
        iam.PolicyStatement(
            sid="ReadRawTablePrefixes",
            actions=["s3:GetObject", "s3:GetObjectVersion"],
            resources=[storage.raw.arn_for_objects(f"{p}*") for p in raw_prefixes],
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            sid="ListRawTablePrefixes",
            actions=["s3:ListBucket"],
            resources=[storage.raw.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in raw_prefixes]}},
        )
    )
    if not lake_formation:  # Lake Formation vends the warehouse's credentials
        grant_warehouse(role, storage.curated)
    role.add_to_policy(
        iam.PolicyStatement(
            sid="Quarantine",
            actions=["s3:PutObject", "s3:GetObject", "s3:ListBucket"],
            resources=[storage.quarantine.bucket_arn, storage.quarantine.arn_for_objects("*")],
        )
    )
    storage.grant_key_use(role)
    store.grant_config_read(role, describe=True)
    store.grant_ledger_write(role, batches=True)
    role.add_to_policy(
        iam.PolicyStatement(
            sid="IcebergTablesInGlueCatalog",
            actions=JOB_CATALOG_ACTIONS,
            resources=glue_arns(role, [*databases, *found_databases]),
        )
    )
    if found_databases:
        role.add_to_policy(
            iam.PolicyStatement(
                sid="CreateFoundTablesDatabases",
                actions=CREATE_DATABASE_ACTIONS,
                resources=glue_arns(role, found_databases, tables=False),
            )
        )
    role.add_to_policy(
        iam.PolicyStatement(
            sid="ReadDefaultDatabase",
            actions=["glue:GetDatabase"],
            resources=glue_arns(role, [DEFAULT_DATABASE], tables=False),
        )
    )
    role.add_to_policy(
        iam.PolicyStatement(
            sid="PublishMetrics",
            actions=["cloudwatch:PutMetricData"],
            resources=["*"],
            conditions={"StringEquals": {"cloudwatch:namespace": [contract.METRICS_NAMESPACE, "Glue"]}},
        )
    )
    if lake_formation:
        role.add_to_policy(
            iam.PolicyStatement(
                sid="LakeFormationDataAccess", actions=["lakeformation:GetDataAccess"], resources=["*"]
            )
        )


def lake_access_findings(
    storage: LakeStorage, catalog: Catalog, raw_prefixes: list[str], *, lake_formation: bool
) -> list[str]:
    """The cdk-nag wildcard findings `grant_lake_access` gives a role (each role acknowledges them)."""
    findings = [f"Resource::{arn_ref(storage.raw)}/{p}*" for p in raw_prefixes]
    if not lake_formation:
        findings.append(f"Resource::{arn_ref(storage.curated)}/{WAREHOUSE_PREFIX}*")
    findings += [
        f"Resource::{arn_ref(storage.quarantine)}/*",
        "Resource::*",
    ]
    findings += [
        f"Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table/{d}/*"
        for d in [*catalog.database_names, *catalog.found_databases]
    ]
    findings += [
        f"Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:database/{d}"
        for d in catalog.found_databases
    ]
    return findings
