"""Where a stage's jobs and functions run: a VPC the stack creates, or subnets of yours."""

from __future__ import annotations

from pydantic import Field, model_validator

from infra.settings_base import SettingsModel


class SubnetSettings(SettingsModel):
    id: str = Field(pattern=r"^subnet-[0-9a-f]{8,17}$")
    availability_zone: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d[a-z]$", description="e.g. eu-west-1a")


class NetworkSettings(SettingsModel):
    """Where the Glue jobs, EMR Serverless runs and Lambdas run: a VPC the stack creates (private
    subnets, VPC endpoints, no NAT, no internet gateway), or subnets of a VPC you have."""

    create_vpc: bool = Field(
        default=False,
        description="true: the stack creates the VPC, its isolated subnets and the endpoints of every "
        "service the stage calls",
    )
    cidr: str = Field(
        default="10.64.0.0/16",
        pattern=r"^\d{1,3}(\.\d{1,3}){3}/(1[6-9]|2[0-4])$",
        description="create_vpc: the VPC's range (/16 to /24)",
    )
    availability_zones: int = Field(default=2, ge=2, le=3, description="create_vpc: AZs, one subnet each")
    vpc_id: str | None = Field(default=None, pattern=r"^vpc-[0-9a-f]{8,17}$", description="your VPC")
    subnets: list[SubnetSettings] = Field(
        default_factory=list, description="your private subnets (id and availability zone)"
    )
    security_group_ids: list[str] = Field(
        default_factory=list,
        description="your security groups; default: the stack creates one (self-referencing, as Glue needs)",
    )

    @model_validator(mode="after")
    def _one_way(self) -> NetworkSettings:
        if self.create_vpc and (self.vpc_id or self.subnets or self.security_group_ids):
            raise ValueError("network: create_vpc: true takes no vpc_id, subnets or security_group_ids")
        if not self.create_vpc and not (self.vpc_id and self.subnets):
            raise ValueError("network: give vpc_id and subnets (your VPC), or create_vpc: true")
        for group in self.security_group_ids:
            if not group.startswith("sg-"):
                raise ValueError(f"network.security_group_ids: {group!r} is not a security group id (sg-...)")
        return self
