"""A glue-6.1 stage on Graviton workers: what it deploys, the architecture of the job bundle it stages,
and the worker types synth refuses.

The Graviton stage is cdk.json's dev with `"runtime": "glue-6.1"` and both jobs on G.1X.GRAVITON,
synthesized once for the module. Each native wheel installed in the staged virtual environment must be
an aarch64 one: its `.dist-info/WHEEL` tags say so, and so does the ELF header of every shared object
it brings (a test here reads both from the archive cdk.out uploads).
"""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from cfnlint.api import ManualArgs, lint

from infra.packed_venv import glue_venv_archive
from infra.settings import SettingsError, resolve_stage
from lakeloader.control import runtimes
from tests.infra.cdk_helpers import stage_settings, with_settings
from tests.infra.test_infra_bundle import _asset, _object_key, _sub
from tests.infra.test_infra_cfn_lint import IGNORED, REGIONS
from tests.infra.test_infra_nag import findings
from tests.infra.test_infra_runtimes import context, emr_without_release, glue_jobs

GLUE_61 = runtimes.runtime("glue-6.1")
# ELF e_machine (offset 18, little-endian): what CPU a shared object's code is for.
ELF_MACHINES = {0x3E: runtimes.X86_64, 0xB7: runtimes.AARCH64}


def graviton(stage: str = "dev", worker_type: str = "G.1X.GRAVITON") -> dict:
    settings = stage_settings(stage)
    return {
        "runtime": "glue-6.1",
        "emr": emr_without_release(stage),
        "ingest": {**settings["ingest"], "worker_type": worker_type},
        "maintain": {**settings["maintain"], "worker_type": worker_type},
    }


@pytest.fixture(scope="module")
def glue61(synth):
    return synth("dev", **with_settings("dev", **graviton()))


def _tag_cpu(tag: str) -> str:
    """`cp314-cp314-manylinux_2_17_aarch64` -> aarch64."""
    platform = tag.rsplit("-", 1)[-1]
    return next((cpu for cpu in ELF_MACHINES.values() if platform.endswith(cpu)), platform)


def native_architectures(archive_bytes: bytes) -> dict[str, set[str]]:
    """Each native distribution installed in a packed venv -> the CPUs its wheel tags and its shared
    objects are for (a pure-Python one is left out)."""
    found: dict[str, set[str]] = {}
    with tarfile.open(fileobj=io.BytesIO(archive_bytes)) as archive:
        for member in archive.getmembers():
            name = member.name
            if name.endswith(".dist-info/WHEEL"):
                text = archive.extractfile(member).read().decode()
                if "Root-Is-Purelib: false" in text:
                    tags = [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Tag: ")]
                    dist = name.rsplit("/", 2)[-2]
                    found.setdefault(dist, set()).update(map(_tag_cpu, tags))
            elif name.endswith(".so") or ".so." in name.rsplit("/", 1)[-1]:
                header = archive.extractfile(member).read(20)
                assert header[:4] == b"\x7fELF", name
                found.setdefault(name, set()).add(ELF_MACHINES[int.from_bytes(header[18:20], "little")])
    return found


def test_glue_jobs_run_glue_6_1_on_the_graviton_worker_type(glue61):
    jobs = glue_jobs(glue61)
    assert sorted(jobs) == ["lakeloader-dev-ingest", "lakeloader-dev-maintain"]
    assert {props["GlueVersion"] for props in jobs.values()} == {"6.1"}
    assert {props["WorkerType"] for props in jobs.values()} == {"G.1X.GRAVITON"}
    _, app = glue61.resource("AWS::EMRServerless::Application")
    assert app["Properties"]["ReleaseLabel"] == "emr-spark-8.2.0"


def test_the_staged_venv_holds_aarch64_wheels_for_python_3_14(glue61):
    (key,) = {
        _object_key(_sub(p["DefaultArguments"]["--python-virtual-env"])) for p in glue_jobs(glue61).values()
    }
    staged = _asset(glue61, key)["bytes"]
    native = native_architectures(staged)
    assert any(dist.startswith("pydantic_core-") for dist in native)  # the bundle has native code to check
    assert {dist: cpus for dist, cpus in native.items() if cpus != {runtimes.AARCH64}} == {}
    with tarfile.open(fileobj=io.BytesIO(staged)) as archive:
        names = archive.getnames()
    assert "lib/python3.14/site-packages/awsglue/utils.py" in names
    assert [n for n in names if ".cpython-314-aarch64-linux-gnu.so" in n]


def test_an_x86_64_stage_of_the_same_runtime_stages_x86_64_wheels():
    """The same check on the x86_64 venv (what a glue-6.1 stage on G.1X stages) finds x86_64 alone:
    the check tells the two apart."""
    native = native_architectures(glue_venv_archive(runtime=GLUE_61).read_bytes())
    assert native and all(cpus == {runtimes.X86_64} for cpus in native.values())


# --- what synth refuses, in one line naming the stage and the key ------------------------------


def test_a_graviton_worker_type_is_refused_where_the_runtime_offers_none():
    settings = {**graviton(), "runtime": "glue-6.0"}
    with pytest.raises(SettingsError) as caught:
        resolve_stage(context(**settings))
    assert str(caught.value) == (
        "cdk.json context lakeloader:stages.dev.ingest.worker_type: G.1X.GRAVITON is a Graviton worker "
        "type, which runtime glue-6.0 does not offer (Glue 6.0); use glue-6.1 or a type without .GRAVITON"
    )


def test_both_jobs_run_one_architecture():
    settings = graviton()
    settings["maintain"] = {**settings["maintain"], "worker_type": "G.2X"}
    with pytest.raises(SettingsError) as caught:
        resolve_stage(context(**settings))
    assert str(caught.value) == (
        "cdk.json context lakeloader:stages.dev.maintain.worker_type: G.2X runs on x86_64 and "
        "ingest.worker_type G.1X.GRAVITON on aarch64: both jobs share one job bundle built for one CPU; "
        "give both Graviton types or neither"
    )


def test_flex_is_refused_on_graviton_workers():
    """Glue's Flex runs G.1X and G.2X only; no Graviton type."""
    with pytest.raises(SettingsError) as caught:
        resolve_stage(context(**graviton(), batching={"execution_class": "FLEX"}))
    assert str(caught.value) == (
        "cdk.json context lakeloader:stages.dev: batching.execution_class FLEX runs on the ingest job, whose "
        "worker_type is G.1X.GRAVITON: Glue runs FLEX only on G.1X or G.2X (set ingest.worker_type to one "
        "of them, or use STANDARD)"
    )


def test_an_x86_64_stage_of_glue_6_1_resolves():
    stage = resolve_stage(context(runtime="glue-6.1", emr=emr_without_release()))
    assert stage.runtime is GLUE_61
    assert stage.settings.emr.release_label == "emr-spark-8.2.0"
    assert stage.settings.ingest.architecture == runtimes.X86_64


def test_the_graviton_stage_is_clean_for_cdk_nag_and_cfn_lint(glue61):
    """Clean but for what cfn-lint 1.51.0's data predates: Glue 6.1's Graviton worker types (its
    WorkerType enum ends at R.8X), flagged on each job's WorkerType, and the lineage action
    `glue:PostLineageEvent` that glue-6.1's job roles hold (not in its IAM action list), flagged on
    that one statement of each role; nothing else."""
    assert findings(glue61.app) == []
    config = ManualArgs(regions=REGIONS, ignore_checks=IGNORED)
    matches = [
        f"{m.rule.id} {'/'.join(str(p) for p in m.path)}"
        for m in lint(json.dumps(glue61.template_json), config=config)
    ]
    resources = glue61.template_json["Resources"]
    jobs = [k for k, v in resources.items() if v["Type"] == "AWS::Glue::Job"]
    lineage = [
        f"W3037 Resources/{name}/Properties/PolicyDocument/Statement/{index}/Action"
        for name, resource in resources.items()
        if resource["Type"] == "AWS::IAM::Policy"
        for index, statement in enumerate(resource["Properties"]["PolicyDocument"]["Statement"])
        if statement["Action"] == "glue:PostLineageEvent"
    ]
    assert len(lineage) == 2  # the Glue and the EMR job roles
    worker_types = [f"E3030 Resources/{job}/Properties/WorkerType" for job in jobs]
    assert sorted(matches) == sorted(worker_types + lineage)
