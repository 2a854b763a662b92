"""Catalog: Glue databases, the Glue security configuration, raw-zone crawlers.

* One Glue database per target database of the config, named `<database_prefix><database>`
  (default prefix `<project>_<stage>_`, so in the prod stage `crm` is `lakeloader_prod_crm`): stages and other
  stacks in one account never share one. The jobs get the prefix as an argument and address
  tables as `glue_catalog.<prefix><database>.<table>`; local runs keep the bare names.
* The Glue security configuration every job and crawler uses (KMS for S3, CloudWatch Logs
  and job bookmarks), and the log groups Glue writes to under it, owned by the stack so
  they carry the stage's retention (Glue would create them with none).
* Optional crawlers, one per source folder of the raw zone (`<source>/<schema>/<table>/`),
  from the stage's `crawlers` setting, into `<project>_<stage>_raw_<source>` databases.
* Optional Lake Formation mode (`lake_formation`): the databases give new tables no
  `IAMAllowedPrincipals` grant, so Lake Formation's grants (infra.lake_formation) are the ones
  enforced.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from aws_cdk import Aws, Stack
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.nag import acknowledge_wildcards, arn_ref
from infra.settings import SettingsError
from infra.settings_names import Retention, StageNames
from infra.storage import WAREHOUSE_PREFIX, LakeStorage, removal_policy, stage_log_group
from lakeloader.config import LakeConfig
from lakeloader.config.canary import is_canary
from lakeloader.control.discovery import database_glob

GLUE_JOB_ROLE = "glue-job"  # the Glue jobs' role: `StageNames.role_name(GLUE_JOB_ROLE)` (infra.processing)
DATABASE_TABLE_ACTIONS = [
    "glue:GetDatabase",
    "glue:GetTable",
    "glue:GetTables",
    "glue:GetTableVersion",
    "glue:GetTableVersions",
    "glue:CreateTable",
    "glue:UpdateTable",
    "glue:DeleteTable",
    "glue:GetPartition",
    "glue:GetPartitions",
    "glue:BatchGetPartition",
    "glue:BatchCreatePartition",
    "glue:CreatePartition",
    "glue:UpdatePartition",
    "glue:BatchUpdatePartition",
]


def source_of(prefix: str) -> str:
    """The source folder of a raw prefix: `crm/public/customers/` -> `crm`."""
    return prefix.strip("/").split("/", 1)[0]


def sources(lake: LakeConfig) -> dict[str, list[str]]:
    """Source folder -> the table prefixes under it, each once, both sorted (not the canaries': nothing to
    crawl)."""
    found: dict[str, list[str]] = {}
    for table in (t for t in lake.tables if not is_canary(t)):
        found.setdefault(source_of(table.source.prefix), []).append(table.source.prefix)
    return {source: sorted(set(prefixes)) for source, prefixes in sorted(found.items())}


def raw_folders(lake: LakeConfig) -> list[str]:
    """The raw zone's source folders (`crm/`) of the tables, the canaries' too: what the jobs may read.

    A folder, not each table's prefix: the grant stays one line per source however many tables lie
    under it (and a table that appears there needs no deploy), where an ARN per table prefix overflowed
    the job roles' policies past IAM's size limits at a few hundred tables (docs/scale.md). The S3
    events are per source folder too (infra.triggers.event_prefixes). A `sources:` entry's folder is one:
    its tables are found as their files arrive."""
    prefixes = [t.source.prefix for t in lake.tables] + [s.prefix for s in lake.sources]
    return sorted({f"{source_of(prefix)}/" for prefix in prefixes})


def target_databases(lake: LakeConfig) -> list[str]:
    return sorted({table.target.database for table in lake.tables})


def found_database_globs(names: StageNames, lake: LakeConfig) -> list[str]:
    """The stage's Glue databases the sources' found tables may land in, as globs under the stage's
    prefix (`lakeloader_dev_*`, `lakeloader_dev_erp_*`): the jobs create them
    (lakeloader.control.discovery)."""
    return sorted({names.glue_database(database_glob(source.as_data())) for source in lake.sources})


def glue_name(value: str) -> str:
    """A Glue database name from free text: lower case letters, digits and underscores."""
    return re.sub(r"[^a-z0-9_]", "_", value.lower())


def glue_job_log_groups(security_configuration: str, role_name: str) -> list[str]:
    """The log groups Glue jobs running as `role_name` write to under a security configuration that
    encrypts CloudWatch Logs. Continuous logs: `/aws-glue/jobs/logs-v2-<configuration>` ("Enabling
    continuous logging for AWS Glue jobs", security configuration section). The error and output logs
    move under the role and the configuration (the Glue API's JobRun.LogGroupName: "a role name and
    SecurityConfiguration name"), as `/aws-glue/jobs/<configuration>-role/<role name>/{error,output}`;
    not `/aws-glue/jobs/{error,output}-<configuration>`, which nothing writes to."""
    nested = f"/aws-glue/jobs/{security_configuration}-role/{role_name}"
    # (In this order, the continuous logs' group keeps its logical id from when the others were misnamed:
    # an update replaces only those two, and no new group takes a name an old one still holds.)
    return [f"{nested}/error", f"{nested}/output", f"/aws-glue/jobs/logs-v2-{security_configuration}"]


def glue_crawler_log_group(role_name: str, security_configuration: str) -> str:
    """The log group of a crawler running as `role_name` under an encrypting security configuration."""
    return f"/aws-glue/crawlers-role/{role_name}-{security_configuration}"


def glue_arns(scope: Construct, databases: list[str], *, tables: bool = True) -> list[str]:
    """ARNs of the catalog, the databases and (unless tables=False) every table in them."""
    stack = Stack.of(scope)
    arns = [stack.format_arn(service="glue", resource="catalog")]
    for database in databases:
        arns.append(stack.format_arn(service="glue", resource="database", resource_name=database))
        if tables:
            arns.append(stack.format_arn(service="glue", resource="table", resource_name=f"{database}/*"))
    return arns


@dataclass(frozen=True, kw_only=True)
class CatalogSettings:
    """What Catalog takes of the stage."""

    names: StageNames
    retention: Retention
    lake_formation: bool  # new tables get no IAMAllowedPrincipals grant
    crawlers: dict[str, str]  # the stage's `crawlers` setting: {source or "*": schedule}


class Catalog(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: CatalogSettings,
        lake: LakeConfig,
        storage: LakeStorage,
    ) -> None:
        super().__init__(scope, construct_id)
        self.settings = settings
        names, retention = settings.names, settings.retention
        self.security_configuration_name = names.resource_name("glue")
        self.security_configuration = glue.SecurityConfiguration(
            self,
            "SecurityConfiguration",
            security_configuration_name=self.security_configuration_name,
            s3_encryption=glue.S3Encryption.kms(storage.key),
            cloud_watch_encryption=glue.CloudWatchEncryption.kms(storage.key),
            job_bookmarks_encryption=glue.JobBookmarksEncryption.client_side_kms(storage.key),
        )
        self.job_log_groups = [
            stage_log_group(self, f"GlueJobLogs{index}", retention=retention, name=name, key=storage.key)
            for index, name in enumerate(
                glue_job_log_groups(self.security_configuration_name, names.role_name(GLUE_JOB_ROLE))
            )
        ]

        # Config database name -> the stage's Glue database (its physical name).
        self.database_prefix = names.database_prefix
        self.databases: dict[str, glue.Database] = {}
        for name in target_databases(lake):
            physical = names.glue_database(name)
            self.databases[name] = glue.Database(
                self,
                f"Database-{name}",
                database_name=physical,
                description=f"lakeloader ({names.stage}): Iceberg tables of config database {name}",
                location_uri=f"{storage.warehouse}{physical}.db",
                removal_policy=removal_policy(retention),
            )
            self._lake_formation_only(self.databases[name])
        self.database_names = sorted(names.glue_database(name) for name in self.databases)
        # Globs of the databases the jobs create for the tables the sources find (no deploy names them).
        self.found_databases = found_database_globs(names, lake)

        self.crawler_databases: dict[str, str] = {}
        self.crawlers: dict[str, glue.CfnCrawler] = {}
        self.crawler_role: iam.Role | None = None
        schedules = self._crawler_schedules(lake)
        if schedules:
            self._add_crawlers(lake, storage, schedules)

    def _lake_formation_only(self, database: glue.Database) -> None:
        """Lake Formation mode: new tables get no IAMAllowedPrincipals grant (only LF's grants count)."""
        if self.settings.lake_formation:
            cfn = database.node.default_child
            cfn.add_property_override("DatabaseInput.CreateTableDefaultPermissions", [])

    def _crawler_schedules(self, lake: LakeConfig) -> dict[str, str]:
        wanted = dict(self.settings.crawlers)
        known = sources(lake)
        every = wanted.pop("*", None)
        unknown = sorted(set(wanted) - set(known))
        if unknown:
            raise SettingsError(
                f"cdk.json context lakeloader:stages.{self.settings.names.stage}.crawlers: "
                "no table of the config lies under "
                f"{', '.join(repr(u) for u in unknown)}; sources are {', '.join(known)}"
            )
        if every is not None:
            return {source: wanted.get(source, every) for source in known}
        return {source: wanted[source] for source in known if source in wanted}

    def _add_crawlers(self, lake: LakeConfig, storage: LakeStorage, schedules: dict[str, str]) -> None:
        names, retention = self.settings.names, self.settings.retention
        by_source = sources(lake)
        role_name = names.role_name("crawler")
        role = iam.Role(
            self,
            "CrawlerRole",
            role_name=role_name,
            description=f"{names.prefix} Glue crawlers over the raw zone",
            assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
        )
        self.crawler_role = role
        prefixes = [f"{source}/" for source in schedules]  # a grant per source folder (raw_folders)
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadCrawledPrefixes",
                actions=["s3:GetObject"],
                resources=[storage.raw.arn_for_objects(f"{p}*") for p in prefixes],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ListCrawledPrefixes",
                actions=["s3:ListBucket"],
                resources=[storage.raw.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]}},
            )
        )
        # Decrypt the raw files; encrypt the crawler's logs (security configuration).
        storage.key.grant(role, "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey")
        databases = []
        for source, schedule in schedules.items():
            database = glue_name(f"{names.glue_prefix}_raw_{source}")
            databases.append(database)
            self.crawler_databases[source] = database
            db = glue.Database(
                self,
                f"RawDatabase-{source}",
                database_name=database,
                description=f"lakeloader ({names.stage}): crawled raw files of source {source}",
                removal_policy=removal_policy(retention),
            )
            self._lake_formation_only(db)
            crawler = glue.CfnCrawler(
                self,
                f"Crawler-{source}",
                name=names.resource_name(f"raw-{glue_name(source).replace('_', '-')}"),
                description=f"Crawls the raw files of source {source!r}",
                role=role.role_arn,
                database_name=database,
                targets=glue.CfnCrawler.TargetsProperty(
                    s3_targets=[
                        glue.CfnCrawler.S3TargetProperty(path=f"s3://{storage.raw.bucket_name}/{p}")
                        for p in by_source[source]
                    ]
                ),
                schedule=(
                    glue.CfnCrawler.ScheduleProperty(schedule_expression=schedule)
                    if schedule != "on-demand"
                    else None
                ),
                crawler_security_configuration=self.security_configuration.security_configuration_name,
                schema_change_policy=glue.CfnCrawler.SchemaChangePolicyProperty(
                    update_behavior="UPDATE_IN_DATABASE", delete_behavior="LOG"
                ),
                recrawl_policy=glue.CfnCrawler.RecrawlPolicyProperty(recrawl_behavior="CRAWL_EVERYTHING"),
                configuration=json.dumps(
                    {"Version": 1.0, "CrawlerOutput": {"Tables": {"AddOrUpdateBehavior": "MergeNewColumns"}}},
                    sort_keys=True,
                ),
            )
            crawler.node.add_dependency(db)
            self.crawlers[source] = crawler
        role.add_to_policy(
            iam.PolicyStatement(
                sid="CatalogCrawledTables",
                actions=DATABASE_TABLE_ACTIONS,
                resources=glue_arns(self, databases),
            )
        )
        self.crawler_log_group = stage_log_group(
            self,
            "CrawlerLogs",
            retention=retention,
            name=glue_crawler_log_group(role_name, self.security_configuration_name),
            key=storage.key,
        )
        log_groups = f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:/aws-glue/crawlers*"
        role.add_to_policy(
            iam.PolicyStatement(
                sid="CrawlerLogs",
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:PutLogEvents",
                    "logs:AssociateKmsKey",
                ],
                resources=[log_groups, f"{log_groups}:*"],
            )
        )
        acknowledge_wildcards(
            role,
            [f"Resource::{arn_ref(storage.raw)}/{p}*" for p in prefixes]
            + [
                f"Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table/{d}/*"
                for d in databases
            ]
            + [
                "Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws-glue/crawlers*",
                "Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws-glue/crawlers*:*",
            ],
            reason=(
                "Crawlers read only the source folders of the raw bucket they crawl (objects under each "
                "folder), write only tables of their own raw_<source> databases (table names come from the "
                "files), log only to Glue's crawler log groups (named by Glue per role and security "
                "configuration), and use only the stage's key."
            ),
        )


def grant_warehouse(role: iam.IRole, curated: s3.IBucket) -> None:
    """Read, write and delete Iceberg data and metadata under the warehouse prefix."""
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid="WarehouseObjects",
            actions=[
                "s3:GetObject",
                "s3:GetObjectVersion",
                "s3:PutObject",
                "s3:DeleteObject",
                "s3:AbortMultipartUpload",
                "s3:ListMultipartUploadParts",
            ],
            resources=[curated.arn_for_objects(f"{WAREHOUSE_PREFIX}*")],
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid="WarehouseList",
            actions=["s3:ListBucket"],
            resources=[curated.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [WAREHOUSE_PREFIX, f"{WAREHOUSE_PREFIX}*"]}},
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid="WarehouseBucketLocation", actions=["s3:GetBucketLocation"], resources=[curated.bucket_arn]
        )
    )
