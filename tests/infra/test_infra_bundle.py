"""The synthesized template ships the job bundle: nothing fetched from a package index at job start."""

from __future__ import annotations

import json

import pytest

from infra.packaging import emr_deps_archive, glue_wheels_zip
from tests.infra.cdk_helpers import join


def _asset(synth, object_key: str) -> dict:
    """The asset manifest entry that uploads `object_key`, with its staged file's bytes."""
    for manifest in synth.outdir.glob("*.assets.json"):
        for asset in json.loads(manifest.read_text())["files"].values():
            if any(d["objectKey"] == object_key for d in asset["destinations"].values()):
                return {**asset, "bytes": (synth.outdir / asset["source"]["path"]).read_bytes()}
    raise AssertionError(f"no asset uploads {object_key}")


def _object_key(url: str) -> str:
    prefix = "s3://cdk-hnb659fds-assets-${AWS::AccountId}-${AWS::Region}/"
    assert url.startswith(prefix), url
    return url.removeprefix(prefix)


def _role_policy_text(synth, role) -> str:
    role_ref = {"Ref": synth.logical_id(role)}
    policies = [
        p["Properties"]["PolicyDocument"]
        for p in synth.resources("AWS::IAM::Policy").values()
        if role_ref in p["Properties"]["Roles"]
    ]
    return json.dumps(policies)


def _sub(value) -> str:
    return value["Fn::Sub"] if isinstance(value, dict) and "Fn::Sub" in value else join(value)


@pytest.mark.parametrize("job", ["ingest", "maintain"])
def test_glue_installs_the_zip_of_wheels_from_s3_with_no_index(stage_synth, job):
    _, resource = stage_synth.resource(
        "AWS::Glue::Job", lambda p: p["Name"] == f"lakeloader-{stage_synth.stage}-{job}"
    )
    args = resource["Properties"]["DefaultArguments"]
    modules = _sub(args["--additional-python-modules"]).split(",")
    assert modules and all(m.startswith("s3://") for m in modules), modules  # no package names
    assert "--no-index" in args["--python-modules-installer-option"].split()
    (url,) = modules
    key = _object_key(url)
    assert key.endswith(".gluewheels.zip")  # Glue needs the suffix for a zip of wheels
    assert _asset(stage_synth, key)["bytes"] == glue_wheels_zip().read_bytes()


def test_emr_application_ships_the_dependency_archive_on_pythonpath(stage_synth):
    _, app = stage_synth.resource("AWS::EMRServerless::Application")
    conf = app["Properties"]["RuntimeConfiguration"][0]["Properties"]
    archives = conf["spark.archives"]["Fn::Join"][1]
    assert archives[1] == "#deps"
    key = _object_key(_sub(archives[0]))
    assert _asset(stage_synth, key)["bytes"] == emr_deps_archive().read_bytes()
    assert conf["spark.emr-serverless.driverEnv.PYTHONPATH"] == "./deps"
    assert conf["spark.executorEnv.PYTHONPATH"] == "./deps"


def test_each_role_reads_its_engine_bundle_only(dev):
    processing = dev.stack.processing
    _, glue_job = dev.resource("AWS::Glue::Job", lambda p: p["Name"] == "lakeloader-dev-ingest")
    glue_key = _object_key(_sub(glue_job["Properties"]["DefaultArguments"]["--additional-python-modules"]))
    _, app = dev.resource("AWS::EMRServerless::Application")
    archives = app["Properties"]["RuntimeConfiguration"][0]["Properties"]["spark.archives"]
    emr_key = _object_key(_sub(archives["Fn::Join"][1][0]))
    glue_policy = _role_policy_text(dev, processing.glue_role)
    emr_policy = _role_policy_text(dev, processing.emr_role)
    assert f"/{glue_key}" in glue_policy and f"/{glue_key}" not in emr_policy
    assert f"/{emr_key}" in emr_policy and f"/{emr_key}" not in glue_policy
