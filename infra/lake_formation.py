"""Lake Formation mode (stage setting `lake_formation`): the warehouse registered with Lake Formation
and the job roles granted on the stage's databases and tables.

The catalog's databases give new tables no `IAMAllowedPrincipals` grant in this mode, so these
grants are the ones enforced.
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lakeformation as lakeformation
from constructs import Construct, IConstruct

from infra.catalog import Catalog, grant_warehouse
from infra.nag import acknowledge_wildcards, arn_ref
from infra.settings_names import StageNames
from infra.storage import WAREHOUSE_PREFIX, LakeStorage


class LakeFormationAccess(Construct):
    """Lake Formation mode: register the warehouse and grant the roles on databases and tables.

    The deploying role must be a Lake Formation data lake administrator. The warehouse is
    registered with a dedicated data-access role (not the service-linked role), which can
    use the stage's KMS key.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        names: StageNames,
        storage: LakeStorage,
        catalog: Catalog,
        job_roles: list[iam.IRole],
    ) -> None:
        super().__init__(scope, construct_id)
        self.names = names
        warehouse_arn = storage.curated.arn_for_objects(WAREHOUSE_PREFIX.rstrip("/"))
        self.data_access_role = self._data_access_role(storage)
        self.location = lakeformation.CfnResource(
            self,
            "Warehouse",
            resource_arn=warehouse_arn,
            use_service_linked_role=False,
            role_arn=self.data_access_role.role_arn,
        )
        self.location.node.add_dependency(self.data_access_role)
        self._grant_job_roles(job_roles, catalog, warehouse_arn)
        self._grant_crawler(catalog)

    def _data_access_role(self, storage: LakeStorage) -> iam.Role:
        """The role Lake Formation reads and writes the registered warehouse as."""
        role = iam.Role(
            self,
            "DataAccessRole",
            role_name=self.names.role_name("lf-data-access"),
            description=f"{self.names.prefix}: Lake Formation's access to the Iceberg warehouse",
            assumed_by=iam.ServicePrincipal("lakeformation.amazonaws.com"),
        )
        grant_warehouse(role, storage.curated)
        storage.key.grant_encrypt_decrypt(role)
        acknowledge_wildcards(
            role,
            [
                f"Resource::{arn_ref(storage.curated)}/{WAREHOUSE_PREFIX}*",
                "Action::kms:ReEncrypt*",
                "Action::kms:GenerateDataKey*",
            ],
            reason=(
                "Lake Formation vends access to the objects of the registered warehouse prefix only, with "
                "the stage's key only."
            ),
        )
        return role

    def _grant_job_roles(self, job_roles: list[iam.IRole], catalog: Catalog, warehouse_arn: str) -> None:
        """Each job role: the warehouse location, and its databases and their tables."""
        for index, role in enumerate(job_roles):
            principal = lakeformation.CfnPrincipalPermissions.DataLakePrincipalProperty(
                data_lake_principal_identifier=role.role_arn
            )
            grant(
                self,
                f"Location{index}",
                principal,
                {"dataLocation": {"catalogId": Aws.ACCOUNT_ID, "resourceArn": warehouse_arn}},
                ["DATA_LOCATION_ACCESS"],
                depends=[self.location],
            )
            for name, database in catalog.databases.items():
                physical = self.names.glue_database(name)
                grant(
                    self,
                    f"Database{index}-{name}",
                    principal,
                    {"database": {"catalogId": Aws.ACCOUNT_ID, "name": physical}},
                    ["DESCRIBE", "CREATE_TABLE", "ALTER"],
                    depends=[database],
                )
                grant(
                    self,
                    f"Tables{index}-{name}",
                    principal,
                    {"table": {"catalogId": Aws.ACCOUNT_ID, "databaseName": physical, "tableWildcard": {}}},
                    ["ALL"],  # full table access: Glue/EMR jobs that write need ALL
                    depends=[database],
                )

    def _grant_crawler(self, catalog: Catalog) -> None:
        """The crawler role, if any: its raw databases and their tables."""
        if catalog.crawler_role is not None:
            principal = lakeformation.CfnPrincipalPermissions.DataLakePrincipalProperty(
                data_lake_principal_identifier=catalog.crawler_role.role_arn
            )
            for source, name in catalog.crawler_databases.items():
                database = catalog.node.find_child(f"RawDatabase-{source}")
                grant(
                    self,
                    f"CrawlerDatabase-{source}",
                    principal,
                    {"database": {"catalogId": Aws.ACCOUNT_ID, "name": name}},
                    ["DESCRIBE", "CREATE_TABLE", "ALTER"],
                    depends=[database],
                )
                grant(
                    self,
                    f"CrawlerTables-{source}",
                    principal,
                    {"table": {"catalogId": Aws.ACCOUNT_ID, "databaseName": name, "tableWildcard": {}}},
                    ["SELECT", "DESCRIBE", "ALTER", "DROP", "INSERT"],
                    depends=[database],
                )


def grant(
    scope: Construct,
    construct_id: str,
    principal: lakeformation.CfnPrincipalPermissions.DataLakePrincipalProperty,
    resource: dict,
    permissions: list[str],
    depends: list[IConstruct],
) -> None:
    """One Lake Formation grant (no grant option), created after `depends`."""
    permission = lakeformation.CfnPrincipalPermissions(
        scope,
        construct_id,
        catalog=Aws.ACCOUNT_ID,
        principal=principal,
        resource=resource,
        permissions=permissions,
        permissions_with_grant_option=[],
    )
    for dependency in depends:
        permission.node.add_dependency(dependency)
