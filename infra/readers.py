"""Readers (stage setting `readers`): roles that may query the stage's tables and nothing else.

Each reader gets:

* a managed policy `<project>-<stage>-reader-<role name>`, attached to its role: the Glue catalog
  reads of its tables (the catalog, their databases, the tables by name), its own Athena workgroup,
  its own prefix of the query-results bucket, and the stage's key (the data and the results are
  encrypted with it);
* the data of its tables: in IAM mode, `s3:GetObject` under each table's folder of the warehouse
  (`warehouse/<glue database>.db/<table>/`); in Lake Formation mode, `SELECT` and `DESCRIBE` grants
  (with the columns of `exclude_columns` left out) and `lakeformation:GetDataAccess`, with no S3
  grant of its own;
* when it queries through Athena (its `engines`, default `["athena"]`), an Athena workgroup
  `<project>-<stage>-reader-<role name>` (engine version 3, which reads Iceberg; a `+`, `=`, `,` or
  `@` of the role name becomes `_`, which Athena allows in a workgroup name) whose results go,
  encrypted with the stage's key, to `s3://<results bucket>/<role name>/`, where they expire after
  `query_results_expiration_days`. The workgroup's settings override the client's, so a reader cannot
  send its results elsewhere or read another reader's. A reader that names no Athena (`engines:
  [spark]`, one that may read format-3 tables) gets no workgroup and no results prefix, and a stage
  none of whose readers queries through Athena has no results bucket.

A table is named by its config target, `<database>.<table>`; `<database>.*` and `*` select many. The
selection is resolved at synth against the config; a reader with every table of a database (and no
column hidden there) is granted the whole database, one grant however many tables. The tombstones'
side tables (`<table>__tombstones`, which hold the keys of deleted rows) are denied explicitly.

The tables of the stage's S3 Tables table bucket (`target.storage: s3_tables`) are not in the Glue
databases: a reader of them gets what infra.s3_tables_readers grants, through the account's S3
Tables integration with the Glue Data Catalog, and nothing on the table bucket otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_athena as athena
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lakeformation as lakeformation
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from infra.catalog import Catalog, glue_arns
from infra.lake_formation import grant
from infra.nag import acknowledge_wildcards, arn_ref
from infra.reader_grants import ReaderGrants
from infra.s3_tables import TableBucket
from infra.s3_tables_readers import (
    bucket_targets,
    federated_arns,
    federated_grants,
    namespaces_of,
    reader_statements,
)
from infra.settings import SettingsError
from infra.settings_access import ReaderSettings
from infra.settings_names import Retention, StageNames
from infra.storage import WAREHOUSE_PREFIX, LakeStorage
from lakeloader.config import LakeConfig
from lakeloader.config.format_versions import queries_through_athena
from lakeloader.control.contract import TOMBSTONES_SUFFIX
from lakeloader.control.reader_grants import TableGrant

CATALOG_READ_ACTIONS = [
    "glue:GetDatabase",
    "glue:GetDatabases",
    "glue:GetTable",
    "glue:GetTables",
    "glue:GetPartition",
    "glue:GetPartitions",
    "glue:BatchGetPartition",
]
ATHENA_ACTIONS = [
    "athena:GetWorkGroup",
    "athena:StartQueryExecution",
    "athena:StopQueryExecution",
    "athena:GetQueryExecution",
    "athena:BatchGetQueryExecution",
    "athena:ListQueryExecutions",
    "athena:GetQueryResults",
    "athena:GetQueryResultsStream",
]
RESULTS_OBJECT_ACTIONS = [
    "s3:GetObject",
    "s3:PutObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
]
ATHENA_ENGINE = "Athena engine version 3"
# Denied on the tombstones' side tables even where a whole database is granted: they hold the keys of
# deleted rows. (Not GetTables: listing a database's tables must keep working.)
TOMBSTONE_DENIED_ACTIONS = [
    "glue:GetTable",
    "glue:GetPartition",
    "glue:GetPartitions",
    "glue:BatchGetPartition",
    "s3:GetObject",
]


def selected_tables(stage_name: str, lake: LakeConfig, index: int, reader: ReaderSettings) -> list[str]:
    """The config targets (`database.table`, sorted) the reader's `tables` patterns select; every pattern
    and every `exclude_columns` table must select one."""
    targets = sorted(f"{t.target.database}.{t.target.table}" for t in lake.tables)
    where = f"cdk.json context lakeloader:stages.{stage_name}.readers[{index}]"
    chosen: set[str] = set()
    for pattern in reader.tables:
        matched = [t for t in targets if fnmatchcase(t, pattern)]
        if not matched:
            raise SettingsError(
                f"{where}.tables: {pattern!r} selects no table of the config; "
                f"its tables are {', '.join(targets)}"
            )
        chosen.update(matched)
    unselected = sorted(set(reader.exclude_columns) - chosen)
    if unselected:
        raise SettingsError(
            f"{where}.exclude_columns: {unselected[0]!r} is not one of the reader's tables "
            f"({', '.join(sorted(chosen))})"
        )
    return sorted(chosen)


def grant_units(
    lake: LakeConfig, tables: list[str], exclude_columns: dict[str, list[str]]
) -> dict[str, list[str]]:
    """Config database -> the Glue tables to grant by name, or ["*"] for the whole database: when the reader
    has every Glue table of it and hides no column there. A whole database is one grant however many
    tables it holds (an IAM policy has 6,144 characters), and covers its tables to come. `tables` are
    Glue tables only (the table bucket's are granted by infra.s3_tables_readers)."""
    every: dict[str, set[str]] = {}
    for table in (t for t in lake.tables if t.target.storage != "s3_tables"):
        every.setdefault(table.target.database, set()).add(table.target.table)
    chosen: dict[str, list[str]] = {}
    for target in tables:
        database, table = target.split(".", 1)
        chosen.setdefault(database, []).append(table)
    hides = {target.split(".", 1)[0] for target in exclude_columns if target in tables}
    return {
        database: ["*"] if set(names) == every[database] and database not in hides else sorted(names)
        for database, names in sorted(chosen.items())
    }


@dataclass(frozen=True, kw_only=True)
class ReadersSettings:
    """What Readers takes of the stage."""

    names: StageNames
    retention: Retention
    readers: list[ReaderSettings]
    lake_formation: bool  # grants in Lake Formation instead of S3 reads of the tables' folders
    query_results_expiration_days: int


class Readers(Construct):
    """The stage's readers: a policy, an Athena workgroup (a reader that queries through Athena) and (Lake
    Formation mode) grants each."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: ReadersSettings,
        lake: LakeConfig,
        storage: LakeStorage,
        catalog: Catalog,
        table_bucket: TableBucket | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.settings = settings
        self.table_bucket = table_bucket
        # the Athena readers' query results (none: no reader queries through Athena)
        self.results: s3.Bucket | None = None
        if any(queries_through_athena(reader.engines) for reader in settings.readers):
            self.results = storage.lake_bucket(
                "QueryResults",
                "results",
                [
                    s3.LifecycleRule(
                        id="expire-query-results",
                        expiration=Duration.days(settings.query_results_expiration_days),
                        noncurrent_version_expiration=Duration.days(1),
                        abort_incomplete_multipart_upload_after=Duration.days(1),
                    )
                ],
                scope=self,
            )
        self.workgroups: dict[str, athena.CfnWorkGroup] = {}
        # Lake Formation grants on tables by name: applied once each table exists (infra.reader_grants)
        self.table_grants: list[TableGrant] = []
        self.grant_databases: dict[str, IConstruct] = {}
        # the table bucket's tables some reader has Lake Formation grants on: namespace -> names
        self.federated_tables: dict[str, set[str]] = {}
        for index, reader in enumerate(settings.readers):
            tables = selected_tables(settings.names.stage, lake, index, reader)
            self._reader(storage, catalog, lake, reader, tables)
        self.reader_grants: ReaderGrants | None = None
        if self.table_grants:
            self.reader_grants = ReaderGrants(
                self,
                "TableGrants",
                names=settings.names,
                retention=settings.retention,
                key=storage.key,
                grants=self.table_grants,
                databases=self.grant_databases,
                federated_arns=self._federated_arns(),
            )
            if self.federated_tables and table_bucket is not None:  # the namespaces first, then their grants
                self.reader_grants.apply.node.add_dependency(*table_bucket.namespaces.values())

    def _federated_arns(self) -> list[str]:
        if not self.federated_tables or self.table_bucket is None:
            return []
        tables = {namespace: sorted(names) for namespace, names in sorted(self.federated_tables.items())}
        return federated_arns(self, self.table_bucket.name, tables)

    def _reader(
        self,
        storage: LakeStorage,
        catalog: Catalog,
        lake: LakeConfig,
        reader: ReaderSettings,
        tables: list[str],
    ) -> None:
        name, query_name = reader.role_name, reader.query_name
        stage_names, lake_formation = self.settings.names, self.settings.lake_formation
        stack = Stack.of(self)
        in_table_bucket = bucket_targets(lake)
        in_bucket = namespaces_of([t for t in tables if t in in_table_bucket])
        tables_in_glue = [t for t in tables if t not in in_table_bucket]
        units = grant_units(lake, tables_in_glue, reader.exclude_columns)
        physical = [(stage_names.glue_database(d), t) for d, names in units.items() for t in names]
        databases = sorted({database for database, _ in physical})
        results = self.results if queries_through_athena(reader.engines) else None  # its Athena results
        query_statements = self._workgroup(storage, reader, results) if results else []
        statements = [
            iam.PolicyStatement(
                sid="ReadCatalog",
                actions=CATALOG_READ_ACTIONS,
                resources=[
                    *glue_arns(self, databases, tables=False),
                    *[
                        stack.format_arn(service="glue", resource="table", resource_name=f"{d}/{t}")
                        for d, t in physical
                    ],
                ],
            ),
            *query_statements,
            iam.PolicyStatement(
                sid="BucketLocations",
                actions=["s3:GetBucketLocation"],
                resources=[
                    *([results.bucket_arn] if results else []),
                    storage.curated.bucket_arn,
                ],
            ),
            iam.PolicyStatement(
                sid="StageKey",
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=[storage.key.key_arn],
            ),
        ]
        if databases:  # (none when the reader reads only the table bucket's tables)
            statements.append(
                iam.PolicyStatement(
                    sid="NoTombstones",
                    effect=iam.Effect.DENY,
                    actions=TOMBSTONE_DENIED_ACTIONS,
                    resources=[
                        *[
                            stack.format_arn(
                                service="glue", resource="table", resource_name=f"{d}/*{TOMBSTONES_SUFFIX}"
                            )
                            for d in databases
                        ],
                        *[
                            storage.curated.arn_for_objects(
                                f"{WAREHOUSE_PREFIX}{d}.db/*{TOMBSTONES_SUFFIX}/*"
                            )
                            for d in databases
                        ],
                    ],
                )
            )
        folders = [f"{WAREHOUSE_PREFIX}{d}.db/" + ("" if t == "*" else f"{t}/") for d, t in physical]
        if lake_formation:
            statements.append(
                iam.PolicyStatement(
                    sid="LakeFormationDataAccess", actions=["lakeformation:GetDataAccess"], resources=["*"]
                )
            )
            self._lake_formation_grants(catalog, reader, units)
        elif folders:
            statements += [
                iam.PolicyStatement(
                    sid="ReadTableData",
                    actions=["s3:GetObject"],
                    resources=[storage.curated.arn_for_objects(f"{f}*") for f in folders],
                ),
                iam.PolicyStatement(
                    sid="ListTableData",
                    actions=["s3:ListBucket"],
                    resources=[storage.curated.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [f"{f}*" for f in folders]}},
                ),
            ]
        bucket_statements, findings = self._bucket_tables(reader, in_bucket)
        statements += bucket_statements
        policy = iam.ManagedPolicy(
            self,
            f"Policy-{name}",
            managed_policy_name=stage_names.resource_name(f"reader-{name}"),
            description=f"{stage_names.prefix}: SELECT on {', '.join(tables)}",
            statements=statements,
            roles=[iam.Role.from_role_arn(self, f"Role-{name}", reader.role_arn)],
        )
        if results:
            findings.append(f"Resource::{arn_ref(results)}/{query_name}/*")
        findings += [
            f"Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table/{d}/*"
            for d, t in physical
            if t == "*"
        ]
        if lake_formation:
            findings.append("Resource::*")
        else:
            findings += [f"Resource::{arn_ref(storage.curated)}/{f}*" for f in folders]
        acknowledge_wildcards(
            policy,
            findings,
            reason=(
                "A reader reads the objects of its own tables' folders (data and metadata files it cannot "
                "name in advance), the tables of a database it reads whole (the tombstones' tables denied), "
                "and its own query results; Lake Formation's GetDataAccess has no resource-level permissions "
                "(the grants decide). An S3 Tables table's ARN holds its id, not its name: its tables are "
                "named by the s3tables:namespace and s3tables:tableName conditions instead."
            ),
        )

    def _workgroup(
        self, storage: LakeStorage, reader: ReaderSettings, results: s3.Bucket
    ) -> list[iam.PolicyStatement]:
        """The reader's Athena workgroup (results under its own prefix of the results bucket, encrypted
        with the stage's key) and the statements that let it query there and nowhere else."""
        name, query_name = reader.role_name, reader.query_name
        workgroup = athena.CfnWorkGroup(
            self,
            f"Workgroup-{name}",
            name=self.settings.names.resource_name(f"reader-{query_name}"),
            description=f"{self.settings.names.prefix}: queries of {reader.role_arn}",
            state="ENABLED",
            recursive_delete_option=not self.settings.retention.retain,
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                publish_cloud_watch_metrics_enabled=True,
                engine_version=athena.CfnWorkGroup.EngineVersionProperty(
                    selected_engine_version=ATHENA_ENGINE
                ),
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=f"s3://{results.bucket_name}/{query_name}/",
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_KMS", kms_key=storage.key.key_arn
                    ),
                ),
            ),
        )
        workgroup.apply_removal_policy(
            RemovalPolicy.RETAIN if self.settings.retention.retain else RemovalPolicy.DESTROY
        )
        self.workgroups[name] = workgroup
        workgroup_arn = Stack.of(self).format_arn(
            service="athena", resource="workgroup", resource_name=workgroup.name
        )
        return [
            iam.PolicyStatement(sid="QueryInOwnWorkgroup", actions=ATHENA_ACTIONS, resources=[workgroup_arn]),
            iam.PolicyStatement(
                sid="OwnQueryResults",
                actions=RESULTS_OBJECT_ACTIONS,
                resources=[results.arn_for_objects(f"{query_name}/*")],
            ),
            iam.PolicyStatement(
                sid="ListOwnQueryResults",
                actions=["s3:ListBucket"],
                resources=[results.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{query_name}/", f"{query_name}/*"]}},
            ),
        ]

    def _bucket_tables(
        self, reader: ReaderSettings, tables: dict[str, list[str]]
    ) -> tuple[list[iam.PolicyStatement], list[str]]:
        """The reader's statements on the table bucket's `tables` (namespace -> names; none: nothing on
        the bucket) and the wildcard findings they raise; its Lake Formation grants go to the Lambda's."""
        if not tables or self.table_bucket is None:
            return [], []
        lake_formation = self.settings.lake_formation
        statements = reader_statements(
            self, bucket=self.table_bucket, tables=tables, lake_formation=lake_formation
        )
        if not lake_formation:
            return statements, [f"Resource::{arn_ref(self.table_bucket.bucket, 'TableBucketARN')}/table/*"]
        self.table_grants += federated_grants(
            reader.role_arn, self.table_bucket.name, tables, reader.exclude_columns
        )
        for namespace, names in tables.items():
            self.federated_tables.setdefault(namespace, set()).update(names)
        return statements, []

    def _lake_formation_grants(
        self, catalog: Catalog, reader: ReaderSettings, units: dict[str, list[str]]
    ) -> None:
        """DESCRIBE on the databases; SELECT and DESCRIBE on the tables (every table of a whole database),
        without the excluded columns.

        Lake Formation grants a table by name only once it exists, and the jobs create a table at its
        first run: a grant of a table by name (or of its columns) goes to the reader-grants Lambda, which
        applies it when the table is created (infra.reader_grants), so a first deploy neither fails nor
        waits. A whole database is granted with a wildcard here, at deploy."""
        principal = lakeformation.CfnPrincipalPermissions.DataLakePrincipalProperty(
            data_lake_principal_identifier=reader.role_arn
        )
        name = reader.role_name
        for database, tables in units.items():
            physical = self.settings.names.glue_database(database)
            depends = [catalog.databases[database]]
            grant(
                self,
                f"Database-{name}-{database}",
                principal,
                {"database": {"catalogId": Aws.ACCOUNT_ID, "name": physical}},
                ["DESCRIBE"],
                depends=depends,
            )
            for table in tables:
                excluded = reader.exclude_columns.get(f"{database}.{table}")
                named = {"catalogId": Aws.ACCOUNT_ID, "databaseName": physical}
                if table != "*":
                    self.table_grants.append(
                        TableGrant(
                            reader.role_arn,
                            physical,
                            table,
                            ("SELECT",) if excluded else ("SELECT", "DESCRIBE"),
                            tuple(excluded or ()),
                        )
                    )
                    self.grant_databases[physical] = catalog.databases[database]
                    continue
                grant(
                    self,
                    f"Table-{name}-{database}.{table}",
                    principal,
                    {"table": {**named, "tableWildcard": {}}},
                    ["SELECT", "DESCRIBE"],
                    depends=depends,
                )
