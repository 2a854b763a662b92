"""Helpers shared by the infra tests: synthesizing a stage and reading its template."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import App
from aws_cdk.assertions import Template

from infra.app import build, cdk_json_context
from infra.nag import logical_id
from infra.stack import LakeloaderStack


@dataclass
class Synth:
    """One synthesized stage: the app, its stack, the template (assertions and raw JSON)."""

    stage: str
    app: App
    stack: LakeloaderStack
    outdir: Path
    template_path: Path
    template_json: dict[str, Any]
    template: Template

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template_json["Resources"].items() if v["Type"] == resource_type}

    def resource(self, resource_type: str, predicate=lambda props: True) -> tuple[str, dict[str, Any]]:
        """The one resource of a type whose properties satisfy `predicate`."""
        found = [
            (k, v) for k, v in self.resources(resource_type).items() if predicate(v.get("Properties", {}))
        ]
        assert len(found) == 1, f"expected one {resource_type}, found {[k for k, _ in found]}"
        return found[0]

    def logical_id(self, construct) -> str:
        return logical_id(construct)


def synthesize(outdir: Path, stage: str, **overrides: Any) -> Synth:
    context = cdk_json_context()
    context["stage"] = stage
    context.update(overrides)
    app = App(context=context, outdir=str(outdir))
    stack = build(app, nag=False)  # the nag test runs the checks itself, to list every finding
    assembly = app.synth()
    artifact = assembly.get_stack_by_name(stack.stack_name)
    template_path = Path(assembly.directory) / artifact.template_file
    template_json = json.loads(template_path.read_text())
    return Synth(
        stage=stage,
        app=app,
        stack=stack,
        outdir=outdir,
        template_path=template_path,
        template_json=template_json,
        template=Template.from_json(template_json),
    )


def config_items(built: Synth) -> list[dict[str, Any]]:
    """The items the config sync writes, as deployed: the file asset its ItemsKey names, read from the
    cloud assembly (the stack's asset manifest maps the S3 key to the staged file)."""
    _, sync = built.resource("Custom::LakeloaderConfigSync")
    key = sync["Properties"]["ItemsKey"]
    assembly = built.template_path.parent
    manifest = json.loads((assembly / f"{built.stack.artifact_id}.assets.json").read_text())
    [source] = [
        asset["source"]["path"]
        for asset in manifest["files"].values()
        if any(d["objectKey"] == key for d in asset["destinations"].values())
    ]
    return json.loads((assembly / source).read_text())


def logical_ids(built: Synth, construct: str) -> list[str]:
    """The logical ids of the resources under one of the stack's constructs (`Network`, `Storage`):
    a deployed resource's identity, which a renamed construct changes (CloudFormation then replaces
    the resource)."""
    return sorted(k for k in built.template_json["Resources"] if k.startswith(construct))


def stage_settings(stage: str) -> dict[str, Any]:
    return cdk_json_context()["lakeloader:stages"][stage]


def with_settings(stage: str, **settings: Any) -> dict[str, Any]:
    """Context overrides that give `stage` these settings on top of cdk.json's."""
    stages = copy.deepcopy(cdk_json_context()["lakeloader:stages"])
    stages[stage].update(settings)
    return {"lakeloader:stages": stages}


# Two readers of the dev stage: one of a database, one (with a path in its ARN) of every table.
READERS = [
    {"role_arn": "arn:aws:iam::123456789012:role/analyst", "tables": ["crm.*"]},
    {"role_arn": "arn:aws:iam::123456789012:role/team/bi"},
]


# Two writers of the raw bucket: a DMS endpoint's role, and a sink connector's (with a path in its ARN).
WRITERS = [
    {"role_arn": "arn:aws:iam::123456789012:role/dms-s3-target", "prefixes": ["crm/", "sales/"]},
    {"role_arn": "arn:aws:iam::123456789012:role/service-role/msk-s3-sink", "prefixes": ["shop/events/"]},
]


def join(value: Any) -> str:
    """A template value (string or Fn::Join of strings and refs) as one readable string."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(join(p) for p in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"${{{value['Ref']}}}"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return f"${{{'.'.join(value['Fn::GetAtt'])}}}"
    if isinstance(value, dict) and "Fn::Sub" in value:
        return value["Fn::Sub"] if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"][0]
    return json.dumps(value, sort_keys=True)


def statements(synth: Synth, role_logical_id: str) -> list[dict[str, Any]]:
    """Every policy statement attached to a role (inline policies and AWS::IAM::Policy resources)."""
    found = []
    role = synth.template_json["Resources"][role_logical_id]
    for policy in role["Properties"].get("Policies", []):
        found.extend(policy["PolicyDocument"]["Statement"])
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role_logical_id} in policy["Properties"].get("Roles", []):
            found.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return found


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def bundle_files(bundle: Path) -> set[str]:
    return {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()}


def import_in_bundle(bundle: Path, module: str) -> set[str]:
    """Import `module` from a Lambda bundle with only boto3 besides it (no pydantic, yaml, pyspark);
    returns the bundle's files that Python loaded."""
    code = (
        "import json, sys\n"
        f"sys.path[:0] = [{str(bundle)!r}]\n"
        f"sys.path.append({sysconfig.get_paths()['purelib']!r})\n"
        "for banned in ('pydantic', 'yaml', 'pyspark'):\n"
        "    sys.modules[banned] = None\n"
        f"import {module}\n"
        "print(json.dumps([getattr(m, '__file__', None) or '' for m in list(sys.modules.values())]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60, cwd=bundle
    )
    assert result.returncode == 0, result.stderr
    root = f"{bundle}/"
    return {f.removeprefix(root) for f in json.loads(result.stdout) if f.startswith(root)}


CREATED_VPC = {"create_vpc": True}
