"""Deploy the real CDK app to an AWS endpoint (the embedded emulator, or LocalStack), like `cdk deploy`.

1. synthesize the app (``app.py``'s ``build``, in this process) into a temporary cdk.out (context:
   cdk.json's, plus ``stage``);
2. bootstrap what the synthesized template expects of `cdk bootstrap` (the file-assets
   bucket ``cdk-hnb659fds-assets-<account>-<region>`` and the SSM parameter
   ``/cdk-bootstrap/hnb659fds/version``), if absent;
3. publish the file assets named by the asset manifest (folders zipped, files as-is) to
   their destinations;
4. create the stack from the unchanged template through CloudFormation, or update it when the
   stack exists (a template that has not changed is left alone), and wait for it (custom
   resources — the config sync, bucket notifications — answer asynchronously).

Only boto3 against ``AWS_ENDPOINT_URL``: nothing here is specific to moto.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from lakeloader.control import runtimes

REPO_ROOT = Path(__file__).resolve().parents[2]
QUALIFIER = "hnb659fds"
BOOTSTRAP_VERSION = "30"
CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]
# A stack whose creation failed: CloudFormation updates none of these; it must be deleted first.
NOT_UPDATABLE = ("CREATE_FAILED", "ROLLBACK_IN_PROGRESS", "ROLLBACK_FAILED", "ROLLBACK_COMPLETE")


class DeployError(RuntimeError):
    """Synth, publishing or the stack failed; the message says which step and why."""


@dataclass
class Deployment:
    """What a deployed stack offers: its outputs and physical resource ids by logical id."""

    stack_name: str
    stack_id: str
    outputs: dict[str, str]
    resources: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def output(self, name: str) -> str:
        try:
            return self.outputs[name]
        except KeyError:
            raise DeployError(f"stack {self.stack_name} has no output {name!r}") from None


def _say(progress: Callable[[str], None] | None, message: str) -> None:
    if progress:
        progress(message)


# The Node releases the docs ask for (README "Set-up"); jsii still runs on Node 20, end-of-life.
SUPPORTED_NODE = ("22", "24")


def quiet_node_banner(progress: Callable[[str], None] | None = None) -> None:
    """jsii prints Node's end-of-life banner through its stderr sink, which writes each line it cannot
    parse as a Python byte string (11 lines of b'...'): silence it for the Node on the PATH (before the
    kernel starts) and say it in one line of text instead."""
    node = os.environ.get("JSII_NODE", "node")
    try:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return  # no Node: the synth says so
    major = version.strip().lstrip("v").split(".")[0]
    if not major.isdigit() or major in SUPPORTED_NODE:
        return
    silenced = os.environ.get("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "")
    os.environ["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = ",".join(filter(None, [silenced, major]))
    supported = " and ".join(SUPPORTED_NODE)
    _say(
        progress,
        f"Node {version.strip()} is end-of-life (jsii supports Node {supported}); synthesizing on it",
    )


def synth(
    outdir: Path,
    *,
    stage: str = "dev",
    context: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Synthesize the app as ``app.py`` does (``infra.app.build``, cdk-nag included) with cdk.json's
    context (+ stage) into ``outdir``, in this process; returns outdir. A process's first synth starts
    jsii's Node kernel, and later ones reuse it: on 2 cores ``python app.py`` took 7.1-7.6 s, a second
    synth here 2.3 s (the e2e suite's update deploy, 2026-11-30)."""
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")  # before the kernel starts
    quiet_node_banner(progress)
    from aws_cdk import App

    from infra.app import build
    from infra.settings import SettingsError
    from lakeloader.config import ConfigError

    ctx = dict(json.loads((REPO_ROOT / "cdk.json").read_text())["context"])
    ctx["stage"] = stage
    ctx.update(context or {})
    outdir.mkdir(parents=True, exist_ok=True)
    app = App(context=ctx, outdir=str(outdir))
    try:
        build(app)
    except (ConfigError, SettingsError) as exc:
        raise DeployError(f"cdk synth: {exc}") from exc
    app.synth()
    return outdir


def stack_artifacts(outdir: Path) -> list[dict[str, Any]]:
    """The stack artifacts of a cloud assembly: [{id, stackName, templateFile, assets}]."""
    manifest = json.loads((outdir / "manifest.json").read_text())
    stacks = []
    for artifact_id, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        props = artifact.get("properties", {})
        assets = [
            manifest["artifacts"][dep]["properties"]["file"]
            for dep in artifact.get("dependencies", [])
            if manifest["artifacts"].get(dep, {}).get("type") == "cdk:asset-manifest"
        ]
        stacks.append(
            {
                "id": artifact_id,
                "stackName": props.get("stackName", artifact_id),
                "templateFile": props["templateFile"],
                "assets": assets,
            }
        )
    return stacks


def _zip_dir(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                info = zipfile.ZipInfo(path.relative_to(folder).as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o100644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def _substitute(text: str, account: str, region: str) -> str:
    return (
        text.replace("${AWS::AccountId}", account)
        .replace("${AWS::Region}", region)
        .replace("${AWS::Partition}", "aws")
    )


def bootstrap(session: boto3.Session, account: str, region: str) -> str:
    """The `cdk bootstrap` pieces the template needs; returns the assets bucket name."""
    s3, ssm = session.client("s3"), session.client("ssm")
    bucket = f"cdk-{QUALIFIER}-assets-{account}-{region}"
    try:
        s3.head_bucket(Bucket=bucket)
    except s3.exceptions.ClientError:
        kwargs: dict[str, Any] = {"Bucket": bucket}
        if region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
        s3.create_bucket(**kwargs)
    ssm.put_parameter(
        Name=f"/cdk-bootstrap/{QUALIFIER}/version", Value=BOOTSTRAP_VERSION, Type="String", Overwrite=True
    )
    return bucket


def publish_assets(
    session: boto3.Session, outdir: Path, asset_manifest: str, account: str, region: str
) -> int:
    """Upload every file asset of one asset manifest; returns how many."""
    s3 = session.client("s3")
    manifest = json.loads((outdir / asset_manifest).read_text())
    count = 0
    for asset in manifest.get("files", {}).values():
        source = outdir / asset["source"]["path"]
        body = (
            _zip_dir(source)
            if asset["source"].get("packaging") == "zip" and source.is_dir()
            else source.read_bytes()
        )
        for destination in asset["destinations"].values():
            s3.put_object(
                Bucket=_substitute(destination["bucketName"], account, region),
                Key=_substitute(destination["objectKey"], account, region),
                Body=body,
            )
            count += 1
    if manifest.get("dockerImages"):
        raise DeployError("the app has Docker image assets; the emulator cannot publish them")
    return count


def deployed_stack(cfn: Any, stack_name: str) -> dict | None:
    """The stack as described, or None when no stack of that name exists (a first deploy)."""
    try:
        return cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    except cfn.exceptions.ClientError as exc:
        if "does not exist" in str(exc):
            return None
        raise


def _submit(cfn: Any, action: str, stack_name: str, template: str) -> str:
    """create_stack or update_stack (not a change set: moto's come back without Outputs); the stack id."""
    try:
        submit = getattr(cfn, action)
        response = submit(StackName=stack_name, TemplateBody=template, Capabilities=CAPABILITIES)
    except cfn.exceptions.ClientError as exc:
        raise DeployError(f"{action} {stack_name}: {exc.response['Error'].get('Message', exc)}") from None
    return response["StackId"]


def _template_of(cfn: Any, stack_name: str) -> Any:
    body = cfn.get_template(StackName=stack_name)["TemplateBody"]
    return json.loads(body) if isinstance(body, str) else body


def wait_for_stack(
    cfn: Any, stack_name: str, timeout: float, failures: Callable[[str], str | None] | None
) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        stack = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
        status = stack["StackStatus"]
        if status.endswith("_COMPLETE") and "ROLLBACK" not in status and "DELETE" not in status:
            return stack
        if status.endswith("FAILED") or "ROLLBACK" in status:
            reason = (
                (failures(stack["StackId"]) if failures else None) or stack.get("StackStatusReason") or ""
            )
            if not reason:
                events = cfn.describe_stack_events(StackName=stack_name).get("StackEvents", [])
                reasons = [
                    e.get("ResourceStatusReason") for e in events if "FAILED" in e.get("ResourceStatus", "")
                ]
                reason = "; ".join(r for r in reasons if r)
            raise DeployError(f"stack {stack_name}: {status} {reason}".strip())
        if time.monotonic() > deadline:
            raise DeployError(
                f"stack {stack_name} still {status} after {timeout:.0f} s (a custom resource never answered?)"
            )
        time.sleep(0.5)


def deploy(
    *,
    endpoint: str | None = None,
    stage: str = "dev",
    context: dict[str, Any] | None = None,
    region: str = "us-east-1",
    progress: Callable[[str], None] | None = None,
    timeout: float = 300.0,
    failures: Callable[[str], str | None] | None = None,
) -> Deployment:
    """Synthesize and deploy the app's stack for ``stage`` to ``endpoint`` (default AWS_ENDPOINT_URL),
    on the laptop's runtime unless ``context`` names one: the emulator runs jobs on this venv's Spark only."""
    started = time.monotonic()
    context = {"runtime": runtimes.local().name, **(context or {})}
    endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        raise DeployError(
            "no endpoint: start the emulator (`python -m lakeloader_dev.local up`) or set AWS_ENDPOINT_URL"
        )
    session = boto3.Session(region_name=region)
    sts = session.client("sts", endpoint_url=endpoint)
    account = sts.get_caller_identity()["Account"]
    os.environ["AWS_ENDPOINT_URL"] = endpoint

    with tempfile.TemporaryDirectory(prefix="lakeloader-cdk-out-") as tmp:
        outdir = Path(tmp)
        _say(progress, f"synthesizing the CDK app (stage {stage})")
        synth(outdir, stage=stage, context=context, progress=progress)
        stacks = stack_artifacts(outdir)
        if len(stacks) != 1:
            raise DeployError(f"expected one stack in the app, found {[s['id'] for s in stacks]}")
        (stack,) = stacks
        _say(progress, f"bootstrapping account {account} in {region} (assets bucket, bootstrap version)")
        bootstrap(session, account, region)
        published = sum(publish_assets(session, outdir, m, account, region) for m in stack["assets"])
        _say(progress, f"published {published} file asset(s)")
        template = (outdir / stack["templateFile"]).read_text()

    cfn = session.client("cloudformation")
    name = stack["stackName"]
    existing = deployed_stack(cfn, name)
    if existing is None:
        _say(progress, f"creating stack {name} through CloudFormation")
        stack_id = _submit(cfn, "create_stack", name, template)
        described = wait_for_stack(cfn, name, timeout, failures)
    elif existing["StackStatus"] in NOT_UPDATABLE:
        raise DeployError(
            f"stack {name} is {existing['StackStatus']} (an earlier deploy failed) and cannot be updated: "
            "delete it first (on the emulator: `python -m lakeloader_dev.local down`, then `up`)"
        )
    elif json.loads(template) == _template_of(cfn, name):
        _say(progress, f"stack {name} is up to date: the template has not changed")
        stack_id, described = existing["StackId"], existing
    else:
        _say(progress, f"updating stack {name} through CloudFormation")
        stack_id = _submit(cfn, "update_stack", name, template)
        described = wait_for_stack(cfn, name, timeout, failures)
    outputs = {o["OutputKey"]: o.get("OutputValue", "") for o in described.get("Outputs", [])}
    resources = {
        r["LogicalResourceId"]: r.get("PhysicalResourceId", "")
        for r in cfn.describe_stack_resources(StackName=name)["StackResources"]
        if "LogicalResourceId" in r  # moto lists a resource type it does not model without one
    }
    deployment = Deployment(name, stack_id, outputs, resources, time.monotonic() - started)
    _say(progress, f"stack {name} is {described['StackStatus']} ({deployment.seconds:.0f} s)")
    return deployment
