"""Network (stage setting `network`): the subnets and security groups the Glue jobs, the EMR Serverless
runs and the Lambdas run in.

* `create_vpc: true`: a VPC with one isolated subnet per availability zone: no internet gateway, no
  NAT, no route beyond the VPC. Every AWS service the stage's code calls has an endpoint in it:
  gateway endpoints for S3 and DynamoDB, and interface endpoints (private DNS) for the rest
  (`INTERFACE_ENDPOINTS`). The jobs install their Python dependencies from the assets bucket with
  no index, so nothing else is needed. Flow logs go to a log group encrypted with the stage's key.
* otherwise your `vpc_id`, `subnets` and (optionally) `security_group_ids`. Your subnets must reach
  the same services: through endpoints like the ones above, or through a NAT.

The workload security group (created unless you give yours) admits its own members on every TCP
port, as Glue requires of a job's workers, and nothing else. Its egress is open, but the routes
bound it: in a created VPC, the only destinations are the VPC and its endpoints.
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra.nag import acknowledge_check
from infra.settings_names import Retention, StageNames
from infra.settings_network import NetworkSettings
from infra.storage import stage_log_group

# The services the VPC-bound code calls: boto3 clients of lakeloader/ (jobs and Lambdas), Iceberg's
# GlueCatalog and S3FileIO, and the Glue and EMR runtimes (continuous logs, metrics, the stage's key).
GATEWAY_ENDPOINTS = {
    "S3": ec2.GatewayVpcEndpointAwsService.S3,
    "DynamoDB": ec2.GatewayVpcEndpointAwsService.DYNAMODB,
}
INTERFACE_ENDPOINTS = {
    "Glue": ec2.InterfaceVpcEndpointAwsService.GLUE,
    "EmrServerless": ec2.InterfaceVpcEndpointAwsService.EMR_SERVERLESS,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "Monitoring": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    "Kms": ec2.InterfaceVpcEndpointAwsService.KMS,
}


def lake_formation_endpoints(lake_formation: bool) -> dict[str, ec2.InterfaceVpcEndpointAwsService]:
    """Lake Formation mode: the jobs' catalog asks Lake Formation for each table's credentials
    (lakeformation:GetDataAccess), so a VPC with no route out needs its endpoint too."""
    if not lake_formation:
        return {}
    return {"LakeFormation": ec2.InterfaceVpcEndpointAwsService.LAKE_FORMATION}


def s3_tables_endpoints(has_table_bucket: bool) -> dict[str, ec2.InterfaceVpcEndpointAwsService]:
    """A stage with S3 Tables tables: the jobs call S3 Tables (its Iceberg REST endpoint, on the same
    host as the API, and lakeloader.iceberg.s3_tables' maintenance settings), which AWS PrivateLink serves as
    com.amazonaws.<region>.s3tables ("Accessing S3 Tables using interface endpoints", S3 User Guide);
    the tables' data files go through the S3 endpoint."""
    return {"S3Tables": ec2.InterfaceVpcEndpointAwsService.S3_TABLES} if has_table_bucket else {}


# What a VPC-bound Glue job's or Lambda's role needs to put its network interfaces in the subnets.
ENI_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:DeleteNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
]
GLUE_NETWORK_ACTIONS = [
    *ENI_ACTIONS,
    "ec2:DescribeVpcs",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeVpcEndpoints",
    "ec2:DescribeRouteTables",
    "ec2:DescribeVpcAttribute",
    "ec2:CreateTags",
    "ec2:DeleteTags",
]


class StageNetwork(Construct):
    """The stage's subnets (id, availability zone), security groups and Glue NETWORK connections."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        names: StageNames,
        retention: Retention,
        network: NetworkSettings,
        lake_formation: bool,
        key: kms.IKey,
        has_table_bucket: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.names = names
        if network.create_vpc:
            self.vpc: ec2.IVpc = self._create_vpc(network, retention, key)
            self.subnets = [(s.subnet_id, s.availability_zone) for s in self.vpc.isolated_subnets]
        else:
            self.vpc = ec2.Vpc.from_vpc_attributes(
                self,
                "Vpc",
                vpc_id=network.vpc_id,
                availability_zones=sorted({s.availability_zone for s in network.subnets}),
            )
            self.subnets = [(s.id, s.availability_zone) for s in network.subnets]
        self.security_group_ids = list(network.security_group_ids)
        self.workload_group: ec2.SecurityGroup | None = None
        if not self.security_group_ids:
            self.workload_group = self._workload_group()
            self.security_group_ids = [self.workload_group.security_group_id]
        if network.create_vpc:
            self._add_endpoints(
                INTERFACE_ENDPOINTS
                | lake_formation_endpoints(lake_formation)
                | s3_tables_endpoints(has_table_bucket)
            )
        self.glue_connections = [
            self._glue_connection(index, subnet_id, availability_zone)
            for index, (subnet_id, availability_zone) in enumerate(self.subnets)
        ]

    def _workload_group(self) -> ec2.SecurityGroup:
        """The stack's security group of the workload, when the stage names none of its own."""
        group = ec2.SecurityGroup(
            self,
            "Workload",
            vpc=self.vpc,
            security_group_name=self.names.resource_name("workload"),
            description=f"{self.names.prefix}: Glue jobs, EMR Serverless runs and Lambdas",
            allow_all_outbound=True,
        )
        group.add_ingress_rule(
            group, ec2.Port.all_tcp(), description="Glue: a job's workers talk to each other"
        )
        return group

    def _glue_connection(self, index: int, subnet_id: str, availability_zone: str) -> glue.CfnConnection:
        """The Glue NETWORK connection of one subnet."""
        return glue.CfnConnection(
            self,
            f"GlueConnection{index}",
            catalog_id=Aws.ACCOUNT_ID,
            connection_input=glue.CfnConnection.ConnectionInputProperty(
                name=self.names.resource_name(f"network-{index}"),
                description=f"{self.names.prefix}: the Glue jobs' network ({availability_zone})",
                connection_type="NETWORK",
                physical_connection_requirements=glue.CfnConnection.PhysicalConnectionRequirementsProperty(
                    subnet_id=subnet_id,
                    availability_zone=availability_zone,
                    security_group_id_list=self.security_group_ids,
                ),
            ),
        )

    @property
    def subnet_ids(self) -> list[str]:
        return [subnet_id for subnet_id, _ in self.subnets]

    @property
    def glue_connection_names(self) -> list[str]:
        return [c.connection_input.name for c in self.glue_connections]

    def vpc_config(self) -> dict[str, list[str]]:
        """A Lambda function's `VpcConfig`."""
        return {"SubnetIds": self.subnet_ids, "SecurityGroupIds": self.security_group_ids}

    def _create_vpc(self, network: NetworkSettings, retention: Retention, key: kms.IKey) -> ec2.Vpc:
        vpc = ec2.Vpc(
            self,
            "Vpc",
            vpc_name=self.names.resource_name("vpc"),
            ip_addresses=ec2.IpAddresses.cidr(network.cidr),
            max_azs=network.availability_zones,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="private",
                    subnet_type=ec2.SubnetType.PRIVATE_ISOLATED,
                    cidr_mask=_subnet_mask(network),
                )
            ],
            enable_dns_hostnames=True,  # private DNS of the interface endpoints
            enable_dns_support=True,
        )
        flow_logs = stage_log_group(
            self, "FlowLogs", retention=retention, name=f"/{self.names.prefix}/vpc-flow-logs", key=key
        )
        vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs))
        for name, service in GATEWAY_ENDPOINTS.items():
            vpc.add_gateway_endpoint(name, service=service)
        return vpc

    def _add_endpoints(self, services: dict[str, ec2.InterfaceVpcEndpointAwsService]) -> None:
        endpoints = ec2.SecurityGroup(
            self,
            "Endpoints",
            vpc=self.vpc,
            security_group_name=self.names.resource_name("endpoints"),
            description=f"{self.names.prefix}: interface endpoints of the VPC (HTTPS from the workload)",
            allow_all_outbound=False,
        )
        endpoints.add_ingress_rule(
            self.workload_group, ec2.Port.tcp(443), description="HTTPS from the workload"
        )
        for name, service in services.items():
            self.vpc.add_interface_endpoint(
                name,
                service=service,
                private_dns_enabled=True,
                open=False,  # HTTPS from the workload only, not from the whole VPC
                security_groups=[endpoints],
                subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
            )

    def grant_network_interfaces(self, role: iam.IRole, *, glue_job: bool = False) -> None:
        """What a role needs to put a Glue job's or a Lambda's interfaces in the subnets (no resource-level
        permissions for most of these calls)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="NetworkInterfaces",
                actions=GLUE_NETWORK_ACTIONS if glue_job else ENI_ACTIONS,
                resources=["*"],
            )
        )
        acknowledge_check(
            role.node.find_child("DefaultPolicy"),
            "CKV_AWS_111",
            reason=(
                "The service (Glue, Lambda) creates and deletes the network interfaces of the job or "
                "function in the stage's subnets with the role; the interfaces do not exist before, so there "
                "is no ARN to name (AWS's own VPC-access policies grant these on *)."
            ),
        )


def _subnet_mask(network: NetworkSettings) -> int:
    """Room for `availability_zones` equal subnets in the VPC's range: a quarter each (up to three zones).
    The range is /16 to /24 (NetworkSettings.cidr), so a subnet is /26 at the smallest, within AWS's /28."""
    vpc_mask = int(network.cidr.split("/")[1])
    return vpc_mask + 2
