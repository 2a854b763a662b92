"""Scanner acknowledgements (cdk-nag's and checkov's), written next to the resources they concern.

cdk-nag 3 reads CDK's native `Validations.of(construct).acknowledge(...)` metadata; a
finding of a rule that reports several (IAM5) is acknowledged one by one as
``AwsSolutions-IAM5[<finding>]``. `iam5_findings` spells those findings the way cdk-nag
does, from the constructs themselves, so acknowledgements follow renames.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, CfnElement, CfnResource, Stack, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule: str, *, reason: str) -> None:
    """Acknowledge one cdk-nag rule (or `Rule[finding]`) on `scope` and everything under it."""
    rule_id = rule if rule.startswith("AwsSolutions-") else f"AwsSolutions-{rule}"
    Validations.of(scope).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def acknowledge_check(scope: IConstruct, check_id: str, *, reason: str) -> None:
    """Acknowledge one checkov finding on `scope`'s CloudFormation resource (checkov reads the resource's
    `Metadata.checkov.skip` and reports the finding as skipped, with the reason)."""
    cfn = scope if isinstance(scope, CfnResource) else scope.node.default_child
    metadata = cfn.get_metadata("checkov") or {"skip": []}
    metadata["skip"].append({"id": check_id, "comment": reason})
    cfn.add_metadata("checkov", metadata)


def acknowledge_wildcards(scope: IConstruct, findings: list[str], *, reason: str) -> None:
    """Acknowledge IAM5 findings (``Action::glue:GetTable*``, ``Resource::<Bucket.Arn>/raw/*``)."""
    for finding in findings:
        acknowledge(scope, f"IAM5[{finding}]", reason=reason)


def logical_id(element: IConstruct) -> str:
    """The logical id of a CfnElement, or of a construct's default child."""
    cfn = element if isinstance(element, CfnElement) else element.node.default_child
    if not isinstance(cfn, CfnElement):
        raise TypeError(f"{element.node.path} has no CloudFormation element")
    return Stack.of(cfn).resolve(cfn.logical_id)


def arn_ref(element: IConstruct, attribute: str = "Arn") -> str:
    """How cdk-nag prints `Fn::GetAtt [X, Arn]` in a finding: ``<X.Arn>``."""
    return f"<{logical_id(element)}.{attribute}>"
