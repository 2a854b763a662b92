"""Python Lambda functions the way every lakeloader function is built.

Code comes from a folder staged by `infra.lambda_code.lambda_bundle` (no Docker). Each
function gets its own role (no AWS managed policies: only its log group) and its own
KMS-encrypted log group with the stage's retention.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from aws_cdk import CfnResource, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.lambda_code import LAMBDA_PYTHON, lambda_bundle
from infra.nag import acknowledge, acknowledge_check, acknowledge_wildcards
from infra.network import StageNetwork
from infra.packaging import REPO_ROOT
from infra.settings_names import Retention, StageNames
from infra.storage import stage_log_group

# Python 3.12 on arm64: the version the handlers are written and tested for, and the one the bundles'
# wheels are fetched for (infra.lambda_code).
RUNTIME = lambda_.Runtime(f"python{LAMBDA_PYTHON}", lambda_.RuntimeFamily.PYTHON)
RUNTIME_REASON = (
    "Python 3.12 is the runtime lakeloader's Lambda code is written and tested for (the shared "
    "contract of lambda/); it is a supported Lambda runtime. Moving to a newer one is a deliberate change."
)

UNRESERVED_REASON = (
    "A reservation comes out of the account's concurrency quota, of which Lambda keeps 10 unreserved: on a "
    "new account (quota 10) any reservation fails the deploy. arrival_lambda.reserved_concurrency sets one "
    "for the S3-arrival Lambda; config-sync runs once per deploy."
)
NO_DLQ_REASON = (
    "CloudFormation invokes it as a custom resource and waits for its answer: a failure fails the deploy, "
    "where it is seen; a dead-letter queue would hold nothing anyone reads."
)
NO_VPC_REASON = (
    "A first deploy needs no VPC; the stage setting network puts the function in the stage's subnets "
    "(docs/deploy.md#private-networks)."
)
CDK_HANDLER_REASON = (
    "One of CDK's own deploy-time handlers (bucket notifications, auto-delete of dev buckets, the VPC's "
    "default security group): CloudFormation invokes it during deploys only and waits for its answer."
)


class PythonFunction(Construct):
    """A Python 3.12 arm64 Lambda, its role and its log group."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        names: StageNames,
        retention: Retention,
        name: str,
        description: str,
        source_dir: Path,
        key: kms.IKey,
        environment: Mapping[str, str],
        timeout: Duration,
        memory_mb: int = 256,
        reserved_concurrency: int | None = None,
        dead_letter_queue: sqs.IQueue | None = None,
        retry_attempts: int | None = None,
        max_event_age: Duration | None = None,
        network: StageNetwork | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        function_name = names.resource_name(name)
        self.bundle_dir = bundle = lambda_bundle(function_name, source_dir)

        self.log_group = stage_log_group(
            self, "Logs", retention=retention, name=f"/aws/lambda/{function_name}", key=key
        )
        self.role = self._role(names.role_name(name), function_name)
        self.function = lambda_.Function(
            self,
            "Function",
            function_name=function_name,
            description=description,
            runtime=RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(bundle)),
            role=self.role,
            timeout=timeout,
            memory_size=memory_mb,
            environment=dict(environment),
            environment_encryption=key,
            log_group=self.log_group,
            reserved_concurrent_executions=reserved_concurrency,
            dead_letter_queue=dead_letter_queue,
            retry_attempts=retry_attempts,
            max_event_age=max_event_age,
        )
        self._acknowledge_and_place(reserved_concurrency, dead_letter_queue, network)

    def _role(self, role_name: str, function_name: str) -> iam.Role:
        """The function's own role: its log group's streams, nothing managed."""
        role = iam.Role(
            self,
            "Role",
            role_name=role_name,
            description=f"{function_name} Lambda",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],  # "<group>:*": its streams
            )
        )
        return role

    def _acknowledge_and_place(
        self,
        reserved_concurrency: int | None,
        dead_letter_queue: sqs.IQueue | None,
        network: StageNetwork | None,
    ) -> None:
        """The checks the function's settings answer, and its place in the stage's subnets if any."""
        acknowledge(self.function, "L1", reason=RUNTIME_REASON)
        if reserved_concurrency is None:
            acknowledge_check(self.function, "CKV_AWS_115", reason=UNRESERVED_REASON)
        if dead_letter_queue is None:
            acknowledge_check(self.function, "CKV_AWS_116", reason=NO_DLQ_REASON)
        if network is None:
            acknowledge_check(self.function, "CKV_AWS_117", reason=NO_VPC_REASON)
        else:
            # VpcConfig set directly: CDK's `vpc=` would attach the AWS managed VPC-access policy.
            self.function.node.default_child.add_property_override("VpcConfig", network.vpc_config())
            network.grant_network_interfaces(self.role)
            acknowledge_wildcards(
                self.role,
                ["Resource::*"],
                reason=(
                    "Lambda creates and deletes the function's network interfaces in the stage's subnets; "
                    "these EC2 calls have no resource-level permissions to scope them by."
                ),
            )


def lambda_source(name: str) -> Path:
    return REPO_ROOT / "lambda" / name


def own_cdk_function_logs(
    stack: Stack, *, names: StageNames, retention: Retention, key: kms.IKey
) -> list[str]:
    """Give each Lambda that CDK adds by itself a stage log group (and acknowledge the checkov findings of a
    deploy-time handler); returns their logical ids.

    CDK's singleton handlers (S3 bucket notifications, auto-deleting objects, custom-resource
    providers) log to `/aws/lambda/<name>`, which Lambda creates on first invocation and keeps
    forever. Pointing their LoggingConfig at a stack-owned group gives them the stage's
    retention and key, and the group goes with the stack. Call it once every construct exists.
    """
    found = []
    for construct in stack.node.find_all():
        if not isinstance(construct, CfnResource) or construct.cfn_resource_type != "AWS::Lambda::Function":
            continue
        if isinstance(construct, lambda_.CfnFunction) and construct.logging_config is not None:
            continue  # a PythonFunction: it has its own group
        logical_id = stack.resolve(construct.logical_id)
        log_group = stage_log_group(
            stack,
            f"LogsOf{logical_id}",
            retention=retention,
            name=f"/aws/lambda/{names.prefix}-cdk/{logical_id}",
            key=key,
        )
        construct.add_property_override("LoggingConfig.LogGroup", log_group.log_group_name)
        for check_id in ("CKV_AWS_115", "CKV_AWS_116", "CKV_AWS_117"):
            acknowledge_check(construct, check_id, reason=CDK_HANDLER_REASON)
        found.append(logical_id)
    return found
