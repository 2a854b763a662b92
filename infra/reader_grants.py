"""Readers' Lake Formation grants on tables by name (Lake Formation mode), applied once a table exists.

Lake Formation grants a table by name, or some of its columns, only once the table is in the Data
Catalog; the jobs create a table at its first run. A CloudFormation grant of such a table would fail a
first deploy and roll the stack back, so these grants go to a Lambda (`lambda/reader_grants`,
lakeloader.control.reader_grants) that applies them:

* when Glue reports the table created: an EventBridge rule on "Glue Data Catalog Database State
  Change" with `typeOfChange` `CreateTable` in the readers' databases ("AWS Glue events", EventBridge
  reference);
* at each deploy (a custom resource whose properties are the grants): the tables that exist, and it
  revokes the grants the settings dropped;
* hourly (Glue's events are delivered on a best effort basis).

The Lambda is not a data lake administrator: it holds, in each readers' database, SELECT and DESCRIBE
on every table *with grant option* (what Lake Formation asks of whoever grants them, "Granting
permissions on Data Catalog resources"), created by CloudFormation at deploy since a wildcard needs no
table; IAM lets it call `lakeformation:GrantPermissions`/`RevokePermissions` and read those tables'
catalog entries, nothing else. The job roles keep their own grants (infra.lake_formation) and gain
nothing: they grant nothing to anyone.

Grants on the tables of the stage's S3 Tables table bucket are in the federated catalog
`<account>:s3tablescatalog/<bucket>` (infra.s3_tables_readers). No Glue event announces those tables
(S3 Tables creates them through its own API), so the deploy and the hourly run apply them. The Lambda
reads their federated catalog entries (IAM), but CloudFormation cannot give it the grant option there
(AWS::LakeFormation::PrincipalPermissions takes a 12-digit catalog id only): a data lake administrator
grants it once (docs/query.md, "S3 Tables tables"); until then those grants are reported as ungranted
(the custom resource's data, the ReaderGrantsUngranted metric, `lakeloader doctor`), the others
apply, and the deploy succeeds: no grant fails it.
"""

from __future__ import annotations

from aws_cdk import Aws, CustomResource, Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lakeformation as lakeformation
from constructs import Construct, IConstruct

from infra.catalog import glue_arns
from infra.functions import PythonFunction, lambda_source
from infra.nag import acknowledge_wildcards
from infra.settings import SettingsError
from infra.settings_names import Retention, StageNames
from lakeloader.control import contract, reader_grants
from lakeloader.control.reader_grants import TableGrant

# Lambda's environment holds 4 KB in all; the grants keep to this much of it.
GRANTS_ENV_LIMIT = 3500
GRANTOR_PERMISSIONS = ["SELECT", "DESCRIBE"]


def table_created_pattern(databases: list[str]) -> dict:
    """The EventBridge pattern of Glue's "table created" events in `databases`."""
    return {
        "source": [reader_grants.GLUE_SOURCE],
        "detail-type": [reader_grants.TABLE_CREATED_DETAIL_TYPE],
        "detail": {"databaseName": sorted(databases), "typeOfChange": [reader_grants.TABLE_CREATED]},
    }


class ReaderGrants(Construct):
    """The grants Lambda, its Lake Formation grantor permissions, its rules and its custom resource."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        names: StageNames,
        retention: Retention,
        key: kms.IKey,
        grants: list[TableGrant],
        databases: dict[str, IConstruct],
        federated_arns: list[str],
    ) -> None:
        """`databases`: the Glue databases (physical name -> construct) of the grants on Glue tables;
        `federated_arns`: the Glue ARNs of the table bucket's catalog entries the other grants name."""
        super().__init__(scope, construct_id)
        encoded = reader_grants.encode(grants)
        if len(encoded) > GRANTS_ENV_LIMIT:
            raise SettingsError(
                f"cdk.json context lakeloader:stages.{names.stage}.readers: {len(grants)} grants on tables "
                f"by name take {len(encoded)} characters, more than the {GRANTS_ENV_LIMIT} the reader-grants "
                "Lambda's environment holds; give readers whole databases (`<database>.*`, one grant each)"
            )
        self.function = PythonFunction(
            self,
            "Function",
            names=names,
            retention=retention,
            name=reader_grants.FUNCTION_NAME,
            description="Applies readers' Lake Formation grants on tables by name once each table exists",
            source_dir=lambda_source("reader_grants"),
            key=key,
            environment={
                reader_grants.ENV_GRANTS: encoded,
                reader_grants.ENV_CATALOG_ID: Aws.ACCOUNT_ID,
                contract.ENV_LOG_LEVEL: "INFO",
            },
            timeout=Duration.minutes(2),
        )
        self._grant_function(databases, federated_arns)
        self._grantor_permissions(databases)
        self._rules(names, databases)
        self.apply = CustomResource(
            self,
            "Apply",
            service_token=self.function.function.function_arn,
            resource_type="Custom::LakeloaderReaderGrants",
            properties={reader_grants.PROPERTY_GRANTS: encoded},
            service_timeout=Duration.minutes(5),
        )
        self.apply.node.add_dependency(self.function.role, *self.grantor_permissions)

    def _grant_function(self, databases: dict[str, IConstruct], federated_arns: list[str]) -> None:
        """The function grants and revokes in Lake Formation and reads the readers' tables' entries."""
        role = self.function.role
        role.add_to_policy(
            iam.PolicyStatement(
                sid="GrantReaders",
                actions=["lakeformation:GrantPermissions", "lakeformation:RevokePermissions"],
                resources=["*"],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="SeeReaderTables",
                actions=["glue:GetTable"],
                resources=glue_arns(self, sorted(databases)),
            )
        )
        if federated_arns:
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="SeeReaderS3Tables",
                    actions=["glue:GetCatalog", "glue:GetDatabase", "glue:GetTable"],
                    resources=federated_arns,
                )
            )
        acknowledge_wildcards(
            role,
            ["Resource::*"]
            + [
                f"Resource::arn:<AWS::Partition>:glue:<AWS::Region>:<AWS::AccountId>:table/{d}/*"
                for d in sorted(databases)
            ],
            reason=(
                "Lake Formation's GrantPermissions and RevokePermissions have no resource-level permissions "
                "(its grant options decide what the function may grant); it reads the catalog entries of the "
                "readers' databases' tables, whose names come with the tables."
            ),
        )

    def _grantor_permissions(self, databases: dict[str, IConstruct]) -> None:
        """The function may grant what it grants (SELECT, DESCRIBE) on the databases' tables."""
        role = self.function.role
        principal = lakeformation.CfnPrincipalPermissions.DataLakePrincipalProperty(
            data_lake_principal_identifier=role.role_arn
        )
        self.grantor_permissions = []
        for physical, database in sorted(databases.items()):
            permission = lakeformation.CfnPrincipalPermissions(
                self,
                f"Grantor-{physical}",
                catalog=Aws.ACCOUNT_ID,
                principal=principal,
                resource={
                    "table": {"catalogId": Aws.ACCOUNT_ID, "databaseName": physical, "tableWildcard": {}}
                },
                permissions=GRANTOR_PERMISSIONS,
                permissions_with_grant_option=GRANTOR_PERMISSIONS,
            )
            permission.node.add_dependency(database)
            self.grantor_permissions.append(permission)

    def _rules(self, names: StageNames, databases: dict[str, IConstruct]) -> None:
        """A table created in a readers' database invokes the function; so does an hourly sweep."""
        function = self.function.function
        if databases:
            events.Rule(
                self,
                "TableCreated",
                description=f"{names.prefix}: a table of a readers' database is created: grant its readers",
                event_pattern=events.EventPattern(
                    source=[reader_grants.GLUE_SOURCE],
                    detail_type=[reader_grants.TABLE_CREATED_DETAIL_TYPE],
                    detail=table_created_pattern(list(databases))["detail"],
                ),
                targets=[targets.LambdaFunction(function, retry_attempts=4)],
            )
        events.Rule(
            self,
            "Hourly",
            description=f"{names.prefix}: grant readers the tables whose creation event was missed",
            schedule=events.Schedule.rate(Duration.hours(1)),
            targets=[targets.LambdaFunction(function, retry_attempts=2)],
        )
