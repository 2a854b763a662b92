"""IAM identity-policy evaluation over a synthesized template, for the "is it sufficient" tests.

Intrinsics are resolved to the placeholder ARNs the stack's resources would have in account
123456789012, region us-east-1 (names from the template where it sets them, the logical id
otherwise). Actions match case-insensitively, resources case-sensitively, `*` and `?` as IAM
evaluates them; a statement with a condition applies only when the request context satisfies
it. An explicit Deny wins. Anything this evaluator does not understand raises instead of
guessing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

ACCOUNT, REGION, PARTITION = "123456789012", "us-east-1", "aws"
PSEUDO = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::Partition": PARTITION,
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::NoValue": "",
}


class Resolver:
    """Turns template values (strings, Ref, Fn::GetAtt, Fn::Join, Fn::Sub, ...) into strings."""

    def __init__(self, template: dict[str, Any]) -> None:
        self.resources: dict[str, dict[str, Any]] = template["Resources"]

    def __call__(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Ref":
                return self.ref(arg)
            if fn == "Fn::GetAtt":
                logical, attr = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.get_att(logical, attr)
            if fn == "Fn::Join":
                sep, parts = arg
                return sep.join(self(p) for p in parts)
            if fn == "Fn::Sub":
                text, variables = (arg, {}) if isinstance(arg, str) else arg
                return re.sub(r"\$\{([^}!]+)\}", lambda m: self._sub(m.group(1), variables), text)
            if fn == "Fn::Select":
                index, items = arg
                return self._list(items)[int(self(index))]
        raise ValueError(f"cannot resolve template value {value!r}")

    def _list(self, value: Any) -> list[str]:
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, dict) and "Fn::Split" in value:
            sep, text = value["Fn::Split"]
            return self(text).split(sep)
        raise ValueError(f"cannot resolve template list {value!r}")

    def _sub(self, name: str, variables: dict[str, Any]) -> str:
        if name in variables:
            return self(variables[name])
        if "." in name and name.split(".", 1)[0] in self.resources:
            return self.get_att(*name.split(".", 1))
        return self.ref(name)

    def _props(self, logical: str) -> dict[str, Any]:
        return self.resources[logical].get("Properties", {})

    def _name(self, logical: str, prop: str) -> str:
        value = self._props(logical).get(prop)
        return self(value) if value is not None else logical.lower()

    def ref(self, logical: str) -> str:
        if logical in PSEUDO:
            return PSEUDO[logical]
        kind = self.resources[logical]["Type"]
        refs = {
            "AWS::S3::Bucket": lambda: self._name(logical, "BucketName"),
            "AWS::DynamoDB::Table": lambda: self._name(logical, "TableName"),
            "AWS::Glue::Job": lambda: self._name(logical, "Name"),
            "AWS::Glue::Database": lambda: self(self._props(logical)["DatabaseInput"]["Name"]),
            "AWS::IAM::Role": lambda: self._name(logical, "RoleName"),
            "AWS::KMS::Key": lambda: logical.lower(),
            "AWS::Lambda::Function": lambda: self._name(logical, "FunctionName"),
            "AWS::Logs::LogGroup": lambda: self._name(logical, "LogGroupName"),
            "AWS::SNS::Topic": lambda: self.get_att(logical, "TopicArn"),
            "AWS::SQS::Queue": lambda: (
                f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{self._name(logical, 'QueueName')}"
            ),
            "AWS::StepFunctions::StateMachine": lambda: self.get_att(logical, "Arn"),
            "AWS::EMRServerless::Application": lambda: self.get_att(logical, "ApplicationId"),
            "AWS::S3Tables::TableBucket": lambda: self.get_att(logical, "TableBucketARN"),
        }
        if kind not in refs:
            raise ValueError(f"no placeholder for Ref of {kind} ({logical})")
        return refs[kind]()

    def get_att(self, logical: str, attr: str) -> str:
        kind = self.resources[logical]["Type"]
        region = f"{REGION}:{ACCOUNT}"
        arns = {
            ("AWS::S3::Bucket", "Arn"): lambda: f"arn:aws:s3:::{self.ref(logical)}",
            ("AWS::DynamoDB::Table", "Arn"): lambda: f"arn:aws:dynamodb:{region}:table/{self.ref(logical)}",
            ("AWS::KMS::Key", "Arn"): lambda: f"arn:aws:kms:{region}:key/{self.ref(logical)}",
            ("AWS::IAM::Role", "Arn"): lambda: f"arn:aws:iam::{ACCOUNT}:role/{self.ref(logical)}",
            ("AWS::Lambda::Function", "Arn"): lambda: f"arn:aws:lambda:{region}:function:{self.ref(logical)}",
            ("AWS::Logs::LogGroup", "Arn"): lambda: f"arn:aws:logs:{region}:log-group:{self.ref(logical)}:*",
            ("AWS::SNS::Topic", "TopicArn"): lambda: (
                f"arn:aws:sns:{region}:{self._name(logical, 'TopicName')}"
            ),
            ("AWS::SQS::Queue", "Arn"): lambda: f"arn:aws:sqs:{region}:{self._name(logical, 'QueueName')}",
            ("AWS::StepFunctions::StateMachine", "Arn"): lambda: (
                f"arn:aws:states:{region}:stateMachine:{self._name(logical, 'StateMachineName')}"
            ),
            ("AWS::EMRServerless::Application", "ApplicationId"): lambda: f"app-{logical.lower()}",
            ("AWS::S3Tables::TableBucket", "TableBucketARN"): lambda: (
                f"arn:aws:s3tables:{region}:bucket/{self._name(logical, 'TableBucketName')}"
            ),
            ("AWS::EMRServerless::Application", "Arn"): lambda: (
                f"arn:aws:emr-serverless:{region}:/applications/{self.get_att(logical, 'ApplicationId')}"
            ),
        }
        if (kind, attr) not in arns:
            raise ValueError(f"no placeholder for Fn::GetAtt {kind}.{attr} ({logical})")
        return arns[kind, attr]()


@cache
def _pattern(glob: str, ignore_case: bool) -> re.Pattern[str]:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.compile(regex, re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL)


def matches(glob: str, value: str, *, ignore_case: bool = False) -> bool:
    """IAM wildcard matching: `*` any run of characters, `?` exactly one."""
    return _pattern(glob, ignore_case).fullmatch(value) is not None


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _condition_holds(condition: dict[str, Any], context: dict[str, str]) -> bool:
    for operator, clauses in condition.items():
        for key, expected in clauses.items():
            actual = context.get(key)
            wanted = [str(v) for v in _as_list(expected)]
            if operator in ("StringEquals", "ArnEquals"):
                ok = actual is not None and actual in wanted
            elif operator in ("StringLike", "ArnLike"):
                ok = actual is not None and any(matches(w, actual) for w in wanted)
            elif operator in ("ForAllValues:StringEquals", "ForAllValues:StringLike"):
                # each value of a multivalued key (one here) must match; a request without it matches
                like = operator.endswith("Like")
                ok = actual is None or any(matches(w, actual) if like else w == actual for w in wanted)
            elif operator == "Bool":
                ok = actual is not None and actual.lower() in [w.lower() for w in wanted]
            else:
                raise ValueError(f"condition operator {operator} is not evaluated here")
            if not ok:
                return False
    return True


@dataclass(frozen=True)
class Statement:
    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    condition: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def applies(self, action: str, resource: str, context: dict[str, str]) -> bool:
        return (
            any(matches(a, action, ignore_case=True) for a in self.actions)
            and any(matches(r, resource) for r in self.resources)
            and _condition_holds(self.condition, context)
        )


def role_statements(template: dict[str, Any], role_logical_id: str) -> list[Statement]:
    """Every statement of a role's inline policies and of the AWS::IAM::Policy resources attached to it."""
    resolve = Resolver(template)
    resources = template["Resources"]
    role = resources[role_logical_id]["Properties"]
    if role.get("ManagedPolicyArns"):
        raise ValueError(f"{role_logical_id}: managed policies are not evaluated here")
    documents = [p["PolicyDocument"] for p in role.get("Policies", [])]
    # its AWS::IAM::Policy resources, and the managed policies attached to it by their `Roles` (CDK moves
    # what overflows a role's inline policy size into such policies)
    documents += [
        r["Properties"]["PolicyDocument"]
        for r in resources.values()
        if r["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
        and {"Ref": role_logical_id} in r["Properties"].get("Roles", [])
    ]
    return [s for document in documents for s in _statements(role_logical_id, document, resolve)]


def _resolved(resolve: Resolver, value: Any) -> Any:
    """A condition value: intrinsics resolved, plain values (strings, booleans) as they are."""
    return resolve(value) if isinstance(value, dict) else value


def _statements(owner: str, document: dict[str, Any], resolve: Resolver) -> list[Statement]:
    found = []
    for raw in document["Statement"]:
        unsupported = {"NotAction", "NotResource", "NotPrincipal"} & set(raw)
        if unsupported:
            raise ValueError(f"{owner}: {sorted(unsupported)} is not evaluated here")
        found.append(
            Statement(
                effect=raw["Effect"],
                actions=tuple(_as_list(raw["Action"])),
                resources=tuple(resolve(r) for r in _as_list(raw["Resource"])),
                condition={
                    operator: {k: [_resolved(resolve, v) for v in _as_list(vs)] for k, vs in clause.items()}
                    for operator, clause in raw.get("Condition", {}).items()
                },
            )
        )
    return found


def managed_policies(template: dict[str, Any]) -> dict[str, tuple[dict[str, Any], list[Statement]]]:
    """Every named AWS::IAM::ManagedPolicy of the template: its name -> (properties, statements) (CDK's
    unnamed overflow policies belong to their roles: role_statements)."""
    resolve = Resolver(template)
    return {
        resolve(r["Properties"]["ManagedPolicyName"]): (
            r["Properties"],
            _statements(logical, r["Properties"]["PolicyDocument"], resolve),
        )
        for logical, r in template["Resources"].items()
        if r["Type"] == "AWS::IAM::ManagedPolicy" and "ManagedPolicyName" in r["Properties"]
    }


def allowed(
    statements: list[Statement], action: str, resource: str, context: dict[str, str] | None = None
) -> bool:
    """Whether the identity policies allow the request (an explicit Deny wins)."""
    context = context or {}
    applying = [s for s in statements if s.applies(action, resource, context)]
    return any(s.effect == "Allow" for s in applying) and not any(s.effect == "Deny" for s in applying)
