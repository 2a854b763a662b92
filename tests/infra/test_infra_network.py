"""Network (`network:`): in a VPC the stack creates, nothing has a path to the internet, and every AWS
service the VPC-bound code calls has an endpoint; with your VPC, your subnets and groups are used."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from infra.app import cdk_json_context
from infra.network import StageNetwork
from infra.settings import SettingsError, resolve_stage
from tests.infra.cdk_helpers import CREATED_VPC, join, logical_ids, synthesize, with_settings

ROOT = Path(__file__).resolve().parents[2]
# Clients of the shipped code that only the operator's CLI makes, outside the VPC.
CLI_ONLY = {
    "lambda": "cli/operate.py: the CLI invokes the sweep",
    "cloudformation": "stage.py: the stack's outputs",
}
# Clients of code that runs outside the VPC, or only where the stage has what it serves.
NOT_VPC_BOUND = {
    "lakeformation": "lambda/reader_grants: the reader-grants Lambda has no VpcConfig (only the arrival "
    "and config-sync functions run in the subnets); the jobs' Lake Formation endpoint is a mode's "
    "(test_infra_first_deploy)",
}
ONLY_WITH_A_TABLE_BUCKET = {"s3tables"}  # lakeloader/iceberg/s3_tables.py: see the S3 Tables test below
# Beyond lakeloader's boto3 clients: Iceberg's GlueCatalog/S3FileIO (glue, s3), the Glue and EMR
# runtimes' continuous logs and metrics (logs, monitoring), the jobs' KMS-encrypted bookmarks and logs.
RUNTIME_SERVICES = {"glue", "s3", "logs", "monitoring", "kms"}
BOTO3_TO_ENDPOINT = {"cloudwatch": "monitoring"}
NO_PATH_OUT = {
    "AWS::EC2::InternetGateway",
    "AWS::EC2::EgressOnlyInternetGateway",
    "AWS::EC2::NatGateway",
    "AWS::EC2::VPNGateway",
    "AWS::EC2::TransitGatewayAttachment",
    "AWS::EC2::VPCPeeringConnection",
    "AWS::EC2::EIP",
}
EXISTING = {
    "vpc_id": "vpc-0123456789abcdef0",
    "subnets": [
        {"id": "subnet-0aaaaaaaaaaaaaaa1", "availability_zone": "eu-west-1a"},
        {"id": "subnet-0bbbbbbbbbbbbbbb2", "availability_zone": "eu-west-1b"},
    ],
}


@pytest.fixture(scope="module")
def created(synth):
    return synth("dev", **with_settings("dev", network=CREATED_VPC))


@pytest.fixture(scope="module")
def existing(synth):
    return synth(
        "prod", **with_settings("prod", network={**EXISTING, "security_group_ids": ["sg-0123456789abcdef0"]})
    )


def services_the_code_calls() -> set[str]:
    found = set()
    for folder in ("lakeloader", "lambda", "glue_jobs", "emr_steps"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.is_relative_to(ROOT / "lakeloader" / "cli"):
                continue  # the operator's command line, outside the VPC
            found |= set(re.findall(r"client\(\s*\"([a-z0-9-]+)\"", path.read_text()))
    return {
        BOTO3_TO_ENDPOINT.get(s, s) for s in found - set(CLI_ONLY) - set(NOT_VPC_BOUND)
    } | RUNTIME_SERVICES


def endpoint_services(built) -> set[str]:
    return {
        join(props["Properties"]["ServiceName"]).rsplit(".", 1)[1]
        for props in built.resources("AWS::EC2::VPCEndpoint").values()
    }


def test_a_created_vpc_has_no_path_to_the_internet(created):
    kinds = {r["Type"] for r in created.template_json["Resources"].values()}
    assert kinds & NO_PATH_OUT == set()
    assert created.resources("AWS::EC2::Route") == {}, "no route beyond the VPC and its gateway endpoints"
    for subnet in created.resources("AWS::EC2::Subnet").values():
        assert subnet["Properties"]["MapPublicIpOnLaunch"] is False


def test_every_service_the_vpc_bound_code_calls_has_an_endpoint(created):
    needed = services_the_code_calls()
    assert {"dynamodb", "s3", "glue", "emr-serverless", "monitoring"} <= needed, (
        needed
    )  # the scan finds clients
    assert needed - ONLY_WITH_A_TABLE_BUCKET - endpoint_services(created) == set()
    assert "s3tables" not in endpoint_services(created)  # no S3 Tables table in this config


def test_a_stage_with_s3_tables_tables_reaches_the_s3_tables_api_in_its_vpc(synth):
    """The jobs call the S3 Tables API (the catalog's metadata location, the maintenance settings): AWS
    serves it over PrivateLink as com.amazonaws.<region>.s3tables (S3 User Guide, "Accessing S3 Tables
    using interface endpoints"); a VPC with no route out needs that endpoint."""
    built = synth(
        "dev", config="tests/fixtures/s3_tables/tables.yaml", **with_settings("dev", network=CREATED_VPC)
    )
    assert services_the_code_calls() - endpoint_services(built) == set()


def test_jobs_runs_and_functions_run_in_the_subnets(created):
    subnets = sorted(created.resources("AWS::EC2::Subnet"))
    connections = {
        props["Properties"]["ConnectionInput"]["Name"]: props["Properties"]["ConnectionInput"]
        for props in created.resources("AWS::Glue::Connection").values()
    }
    assert (
        sorted(c["PhysicalConnectionRequirements"]["SubnetId"]["Ref"] for c in connections.values())
        == subnets
    )
    assert {c["ConnectionType"] for c in connections.values()} == {"NETWORK"}
    for job in created.resources("AWS::Glue::Job").values():
        assert sorted(job["Properties"]["Connections"]["Connections"]) == sorted(connections)
    (app,) = created.resources("AWS::EMRServerless::Application").values()
    assert sorted(s["Ref"] for s in app["Properties"]["NetworkConfiguration"]["SubnetIds"]) == subnets
    ours = [
        f for f in created.resources("AWS::Lambda::Function").values() if "LoggingConfig" in f["Properties"]
    ]
    for function in created.resources("AWS::Lambda::Function").values():
        if "lakeloader-dev" in str(function["Properties"].get("FunctionName", "")):
            assert sorted(s["Ref"] for s in function["Properties"]["VpcConfig"]["SubnetIds"]) == subnets
    assert len([f for f in ours if "VpcConfig" in f["Properties"]]) == 2  # arrival and config-sync


def test_the_workload_group_admits_only_itself(created):
    groups = {k: v["Properties"] for k, v in created.resources("AWS::EC2::SecurityGroup").items()}
    ingress = [r["Properties"] for r in created.resources("AWS::EC2::SecurityGroupIngress").values()]
    for group in groups.values():
        assert not group.get("SecurityGroupIngress"), "no inline ingress (0.0.0.0/0 or otherwise)"
    assert all("CidrIp" not in rule and "CidrIpv6" not in rule for rule in ingress)
    (workload,) = [k for k, g in groups.items() if g["GroupName"] == "lakeloader-dev-workload"]
    (endpoints,) = [k for k, g in groups.items() if g["GroupName"] == "lakeloader-dev-endpoints"]
    by_target = {rule["GroupId"]["Fn::GetAtt"][0]: rule for rule in ingress}
    assert by_target[workload]["SourceSecurityGroupId"]["Fn::GetAtt"][0] == workload
    assert by_target[endpoints]["SourceSecurityGroupId"]["Fn::GetAtt"][0] == workload
    assert (by_target[endpoints]["FromPort"], by_target[endpoints]["ToPort"]) == (443, 443)
    # Glue asks a job's group for an outbound rule to all traffic; with no route out of the VPC that
    # reaches the endpoints and the job's own workers
    assert [(r["CidrIp"], r["IpProtocol"]) for r in groups[workload]["SecurityGroupEgress"]] == [
        ("0.0.0.0/0", "-1")
    ]


def test_your_vpc_your_subnets_and_your_groups(existing):
    assert existing.resources("AWS::EC2::VPC") == {}
    assert existing.resources("AWS::EC2::SecurityGroup") == {}
    requirements = sorted(
        (c["Properties"]["ConnectionInput"]["PhysicalConnectionRequirements"]["SubnetId"],
         c["Properties"]["ConnectionInput"]["PhysicalConnectionRequirements"]["AvailabilityZone"],
         tuple(c["Properties"]["ConnectionInput"]["PhysicalConnectionRequirements"]["SecurityGroupIdList"]))
        for c in existing.resources("AWS::Glue::Connection").values()
    )  # fmt: skip
    assert requirements == [
        ("subnet-0aaaaaaaaaaaaaaa1", "eu-west-1a", ("sg-0123456789abcdef0",)),
        ("subnet-0bbbbbbbbbbbbbbb2", "eu-west-1b", ("sg-0123456789abcdef0",)),
    ]
    (app,) = existing.resources("AWS::EMRServerless::Application").values()
    assert app["Properties"]["NetworkConfiguration"] == {
        "SubnetIds": ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0bbbbbbbbbbbbbbb2"],
        "SecurityGroupIds": ["sg-0123456789abcdef0"],
    }


def test_a_glue_job_may_describe_the_network_and_a_lambda_only_manage_its_interfaces(created):
    """Glue checks the connection's VPC, subnets, groups, endpoints and routes before a run starts; a
    Lambda only creates and deletes its interfaces. Neither gets the other's list."""
    interfaces = [
        "ec2:CreateNetworkInterface",
        "ec2:DeleteNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
    ]
    describe = ["ec2:DescribeVpcs", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups"]
    describe += ["ec2:DescribeVpcEndpoints", "ec2:DescribeRouteTables", "ec2:DescribeVpcAttribute"]
    glue_job = interfaces + describe + ["ec2:CreateTags", "ec2:DeleteTags"]
    roles = created.resources("AWS::IAM::Role")
    granted = {}
    for policy in created.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement.get("Sid") == "NetworkInterfaces":
                for role in policy["Properties"]["Roles"]:
                    trust = roles[role["Ref"]]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
                    service = trust[0]["Principal"]["Service"]
                    granted.setdefault(service, []).append(statement["Action"])
    assert granted["glue.amazonaws.com"] and granted["lambda.amazonaws.com"]
    assert all(actions == sorted(glue_job) for actions in granted["glue.amazonaws.com"])
    assert all(actions == sorted(interfaces) for actions in granted["lambda.amazonaws.com"])


def test_your_vpc_without_groups_gets_the_workload_group_in_it(synth):
    """No `security_group_ids`: the stack makes the self-referencing group Glue needs, in your VPC."""
    built = synth("prod", **with_settings("prod", network=EXISTING))
    ((group_id, group),) = built.resources("AWS::EC2::SecurityGroup").items()
    assert group["Properties"]["VpcId"] == EXISTING["vpc_id"]
    assert group["Properties"]["GroupName"] == "lakeloader-prod-workload"
    for connection in built.resources("AWS::Glue::Connection").values():
        requirements = connection["Properties"]["ConnectionInput"]["PhysicalConnectionRequirements"]
        assert requirements["SecurityGroupIdList"] == [{"Fn::GetAtt": [group_id, "GroupId"]}]


def test_no_network_setting_no_vpc(dev):
    assert dev.resources("AWS::EC2::VPC") == {}
    assert dev.resources("AWS::Glue::Connection") == {}
    assert all("VpcConfig" not in f["Properties"] for f in dev.resources("AWS::Lambda::Function").values())


@pytest.mark.parametrize(
    "network, message",
    [
        ({"create_vpc": True, "vpc_id": "vpc-0123456789abcdef0"}, "create_vpc: true takes no vpc_id"),
        ({"vpc_id": "vpc-0123456789abcdef0"}, "give vpc_id and subnets"),
        ({**EXISTING, "security_group_ids": ["0123"]}, "'0123' is not a security group id"),
        ({"subnets": [{"id": "subnet-1", "availability_zone": "eu-west-1a"}]}, r"network\.subnets\.0\.id"),
    ],
)
def test_inconsistent_network_settings_fail_synth_with_one_line(tmp_path, network, message):
    with pytest.raises(SettingsError, match=message) as raised:
        synthesize(tmp_path, "dev", **with_settings("dev", network=network))
    assert "\n" not in str(raised.value)


def test_interface_endpoints_answer_the_sdks_default_names_inside_the_subnets(created):
    """Private DNS makes `glue.<region>.amazonaws.com` (what the SDKs call) resolve to the endpoint in the
    VPC; the endpoints sit in every subnet, behind the group that admits HTTPS from the workload only.
    The gateway endpoints (S3, DynamoDB) route from every subnet's route table."""
    endpoints_answer_inside_the_subnets(created.resources)


def test_the_network_alone_gives_its_endpoints_the_same_properties():
    """The same checks on the network construct alone in an empty stack: seconds instead of a
    stage's synth, so `make check` guards the endpoints' private DNS too."""
    endpoints_answer_inside_the_subnets(network_alone(CREATED_VPC).find_resources)


def test_a_created_vpc_takes_the_stage_range_split_between_its_subnets():
    """The stage's `cidr` is the VPC's (CDK's own default, 10.0.0.0/16, is the range most likely to
    overlap a peered VPC or an on-premises network), split into a subnet of a quarter each, in as many
    zones as the stage asks (two by default) of a region that has three (CDK's stand-ins without lookups)."""
    created = {"create_vpc": True, "cidr": "10.20.0.0/20"}
    template = network_alone(created, env=Environment(account="123456789012", region="eu-west-1"))
    (vpc,) = template.find_resources("AWS::EC2::VPC").values()
    assert vpc["Properties"]["CidrBlock"] == "10.20.0.0/20"
    assert {"Key": "Name", "Value": "lakeloader-dev-vpc"} in vpc["Properties"]["Tags"]  # a stage apiece
    subnets = template.find_resources("AWS::EC2::Subnet").values()
    assert sorted(s["Properties"]["CidrBlock"] for s in subnets) == ["10.20.0.0/22", "10.20.4.0/22"]


def network_alone(network: dict, *, env: Environment | None = None) -> Template:
    """The dev stage's network construct with `network` as its setting, alone in an empty stack."""
    stack = Stack(App(), "Network", env=env)
    stage = resolve_stage({**cdk_json_context(), **with_settings("dev", network=network), "stage": "dev"})
    settings, key = stage.settings.network, kms.Key(stack, "Key")
    StageNetwork(
        stack,
        "Network",
        names=stage.names,
        retention=stage.retention,
        network=settings,
        lake_formation=stage.settings.lake_formation,
        key=key,
        has_table_bucket=False,
    )
    return Template.from_stack(stack)


def endpoints_answer_inside_the_subnets(resources: Callable[[str], dict[str, dict]]) -> None:
    (vpc_id, vpc) = next(iter(resources("AWS::EC2::VPC").items()))
    assert vpc["Properties"]["EnableDnsSupport"] is True and vpc["Properties"]["EnableDnsHostnames"] is True
    subnets = sorted(resources("AWS::EC2::Subnet"))
    groups = {k: v["Properties"] for k, v in resources("AWS::EC2::SecurityGroup").items()}
    (endpoints_group,) = [k for k, g in groups.items() if g["GroupName"] == "lakeloader-dev-endpoints"]
    assert groups[endpoints_group]["SecurityGroupEgress"][0]["CidrIp"] == "255.255.255.255/32"  # none out
    route_tables = sorted(resources("AWS::EC2::RouteTable"))
    interface, gateway = [], []
    for endpoint in resources("AWS::EC2::VPCEndpoint").values():
        props = endpoint["Properties"]
        assert props["VpcId"] == {"Ref": vpc_id}
        (interface if props["VpcEndpointType"] == "Interface" else gateway).append(props)
    assert len(interface) >= 5 and len(gateway) == 2
    for props in interface:
        assert props["PrivateDnsEnabled"] is True, props["ServiceName"]
        assert sorted(s["Ref"] for s in props["SubnetIds"]) == subnets, props["ServiceName"]
        assert [g["Fn::GetAtt"] for g in props["SecurityGroupIds"]] == [[endpoints_group, "GroupId"]]
    for props in gateway:
        assert props["VpcEndpointType"] == "Gateway"
        assert sorted(r["Ref"] for r in props["RouteTableIds"]) == route_tables


def test_the_network_keeps_its_logical_ids(synth):
    """A logical id is a deployed resource's identity: rename a construct and CloudFormation replaces
    the resource on the next deploy (a new VPC, new endpoints and connections under running jobs). The
    template snapshots cover no stage with a network, so the ids of the fullest one are pinned here."""
    built = synth(
        "dev",
        lake_formation="true",
        config="tests/fixtures/s3_tables/tables.yaml",
        **with_settings("dev", network=CREATED_VPC),
    )
    assert logical_ids(built, "Network") == [
        "NetworkEndpointsF8B8492F",
        "NetworkEndpointsfromlakeloaderdevNetworkWorkloadF9C4B41D443F62E8440",
        "NetworkFlowLogs2BEC3212",
        "NetworkGlueConnection044A5D0F0",
        "NetworkGlueConnection177B4257F",
        "NetworkVpc7FB7348F",
        "NetworkVpcDynamoDBE0771429",
        "NetworkVpcEmrServerless5A85661C",
        "NetworkVpcFlowLog9B71FB8D",
        "NetworkVpcFlowLogIAMRole654CF7A1",
        "NetworkVpcFlowLogIAMRoleDefaultPolicy65C62FE2",
        "NetworkVpcGlueFF6E4924",
        "NetworkVpcKms275858BF",
        "NetworkVpcLakeFormation1F0D6640",
        "NetworkVpcLogs87827AD6",
        "NetworkVpcMonitoringF24493EA",
        "NetworkVpcRestrictDefaultSecurityGroupCustomResource491E144D",
        "NetworkVpcS334FC449B",
        "NetworkVpcS3TablesB83FB072",
        "NetworkVpcSts4055B77B",
        "NetworkVpcprivateSubnet1RouteTableABBAAF01",
        "NetworkVpcprivateSubnet1RouteTableAssociation4A0BC0F2",
        "NetworkVpcprivateSubnet1Subnet9EC58498",
        "NetworkVpcprivateSubnet2RouteTable53A5479A",
        "NetworkVpcprivateSubnet2RouteTableAssociation22F8344A",
        "NetworkVpcprivateSubnet2Subnet6E5E8804",
        "NetworkWorkloadFF24E283",
        "NetworkWorkloadfromlakeloaderdevNetworkWorkloadF9C4B41DALLPORTS74CEEE54",
    ]


def test_a_created_vpc_records_all_its_traffic_in_the_stages_own_encrypted_log_group():
    """The VPC's flow logs are where an auditor looks for what reached the subnets: every packet's
    record, in a log group named for the stage (two stages in one account keep theirs apart), encrypted
    with the stage's key."""
    template = network_alone(CREATED_VPC)
    (flow_log,) = template.find_resources("AWS::EC2::FlowLog").values()
    (vpc_id,) = template.find_resources("AWS::EC2::VPC")
    (key_id,) = template.find_resources("AWS::KMS::Key")
    ((group_id, group),) = template.find_resources("AWS::Logs::LogGroup").items()
    assert flow_log["Properties"]["ResourceId"] == {"Ref": vpc_id}
    assert (flow_log["Properties"]["ResourceType"], flow_log["Properties"]["TrafficType"]) == ("VPC", "ALL")
    assert flow_log["Properties"]["LogGroupName"] == {"Ref": group_id}
    assert group["Properties"]["LogGroupName"] == "/lakeloader-dev/vpc-flow-logs"
    assert group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
