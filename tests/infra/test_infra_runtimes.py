"""A stage's `runtime` (cdk.json): what a glue-6.0 stage deploys, and what synth refuses.

The glue-6.0 stage is cdk.json's dev with `"runtime": "glue-6.0"` and no emr.release_label (it
follows the runtime), synthesized once for the module. The default stage: test_infra_versions.py.
"""

from __future__ import annotations

import copy
import tarfile

import pytest
from cfnlint.api import ManualArgs, lint

from infra.app import cdk_json_context
from infra.packed_venv import GLUE_VENV_SUFFIX, emr_venv_archive, glue_venv_archive
from infra.settings import SettingsError, resolve_stage
from lakeloader.control import runtimes
from tests.infra.cdk_helpers import join, stage_settings, with_settings
from tests.infra.test_infra_bundle import _asset, _object_key, _role_policy_text, _sub
from tests.infra.test_infra_cfn_lint import IGNORED, REGIONS
from tests.infra.test_infra_nag import findings

GLUE_6 = runtimes.runtime("glue-6.0")


def emr_without_release(stage: str = "dev") -> dict:
    return {k: v for k, v in stage_settings(stage)["emr"].items() if k != "release_label"}


def context(stage: str = "dev", **settings) -> dict:
    """cdk.json's context with `settings` replacing the stage's own."""
    found = copy.deepcopy(cdk_json_context())
    found["stage"] = stage
    found["lakeloader:stages"][stage].update(settings)
    return found


@pytest.fixture(scope="module")
def glue6(synth):
    return synth("dev", **with_settings("dev", runtime="glue-6.0", emr=emr_without_release()))


def glue_jobs(synth) -> dict[str, dict]:
    return {
        resource["Properties"]["Name"]: resource["Properties"]
        for resource in synth.resources("AWS::Glue::Job").values()
    }


def test_glue_jobs_run_glue_6(glue6):
    jobs = glue_jobs(glue6)
    assert sorted(jobs) == ["lakeloader-dev-ingest", "lakeloader-dev-maintain"]
    assert {props["GlueVersion"] for props in jobs.values()} == {"6.0"}


def test_glue_jobs_tell_s3a_their_region(glue6):
    """Glue 6.0 has no EMRFS: S3A reads every s3:// path, and without the region a VPC whose only
    route to S3 is its gateway endpoint cannot reach it (AWS's 6.0 migration page: keep setting it)."""
    for props in glue_jobs(glue6).values():
        conf = join(props["DefaultArguments"]["--conf"]).split(" --conf ")
        assert "spark.hadoop.fs.s3a.endpoint.region=${AWS::Region}" in conf


def test_emr_application_runs_the_release_and_python_of_glue_6(glue6):
    _, app = glue6.resource("AWS::EMRServerless::Application")
    assert app["Properties"]["ReleaseLabel"] == "emr-spark-8.1.0"
    conf = app["Properties"]["RuntimeConfiguration"][0]["Properties"]
    for key in (
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON",
        "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON",
        "spark.executorEnv.PYSPARK_PYTHON",
    ):
        assert conf[key] == "./environment/bin/python", key
    assert join(conf["spark.hadoop.fs.s3a.endpoint.region"]) == "${AWS::Region}"


def test_glue_jobs_take_the_packed_venv_of_cp313_wheels(glue6):
    """Glue 6.0 deprecates --additional-python-modules: the jobs get a virtual environment instead, the
    "manually built virtual environment" of AWS's "Using Python virtual environments with AWS Glue"
    (https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-python-virtual-environments.html):
    built ahead (here at synth, in CI/CD terms), uploaded to S3 and named by `--python-virtual-env`,
    the approach that page gives for "complex dependency trees, full reproducibility". Not its
    service-generated one (`--python-virtual-env-storage-prefix`): Glue would run pip at the first run,
    which a job in private subnets without NAT cannot reach PyPI for (docs/deploy.md, "Glue 6.0's
    Python environment")."""
    keys = set()
    for props in glue_jobs(glue6).values():
        args = props["DefaultArguments"]
        assert "--additional-python-modules" not in args
        assert "--python-modules-installer-option" not in args
        assert "--python-virtual-env-storage-prefix" not in args
        keys.add(_object_key(_sub(args["--python-virtual-env"])))
    (key,) = keys
    assert key.endswith(GLUE_VENV_SUFFIX)  # Spark unpacks an archive by its name's ending
    venv = glue_venv_archive(runtime=GLUE_6)
    assert _asset(glue6, key)["bytes"] == venv.read_bytes()
    with tarfile.open(venv) as archive:
        names = archive.getnames()
    assert "lib/python3.13/site-packages/awsglue/utils.py" in names
    assert [
        n
        for n in names
        if n.startswith("lib/python3.13/site-packages/pydantic_core/_pydantic_core.cpython-313")
    ]
    processing = glue6.stack.processing
    assert f"/{key}" in _role_policy_text(glue6, processing.glue_role)
    assert f"/{key}" not in _role_policy_text(glue6, processing.emr_role)


def test_emr_venv_holds_the_cp313_wheels(glue6):
    """The EMR venv of glue-6.0's runtime (emr-spark-8.1.0) links bin/python to the image's Python 3.13."""
    _, app = glue6.resource("AWS::EMRServerless::Application")
    archives = app["Properties"]["RuntimeConfiguration"][0]["Properties"]["spark.archives"]
    key = _object_key(_sub(archives["Fn::Join"][1][0]))
    venv = emr_venv_archive(runtime=GLUE_6)
    assert _asset(glue6, key)["bytes"] == venv.read_bytes()
    with tarfile.open(venv) as archive:
        assert archive.getmember("bin/python3.13").linkname == "/usr/bin/python3.13"
        assert [n for n in archive.getnames() if n.startswith("lib/python3.13/site-packages/pydantic_core/")]


# --- what synth refuses, in one line naming the stage and the key ------------------------------


def test_an_unknown_runtime_is_refused_with_the_choices():
    with pytest.raises(SettingsError) as caught:
        resolve_stage(context(runtime="glue-7.0"))
    assert str(caught.value) == (
        "cdk.json context lakeloader:stages.dev.runtime: 'glue-7.0' is not a runtime lakeloader runs on; "
        "choose one of glue-5.1, glue-6.0, glue-6.1"
    )


@pytest.mark.parametrize(
    ("runtime", "label", "message"),
    [
        (
            "glue-6.0",
            "emr-7.12.0",
            "emr-7.12.0 is not on runtime glue-6.0's line (Spark 4.1, Iceberg 1.11, as emr-spark-8.1.0): "
            "use emr-spark-8.1.0 or leave release_label out, or set runtime to glue-5.1",
        ),
        (
            "glue-5.1",
            "emr-spark-8.1.0",
            "emr-spark-8.1.0 is not on runtime glue-5.1's line (Spark 3.5, Iceberg 1.10, as emr-7.12.0): "
            "use emr-7.12.0 or leave release_label out, or set runtime to glue-6.0",
        ),
        (  # Spark 4.0.2 and Iceberg 1.10.1: the emr-spark-8 minors are Spark lines of their own
            "glue-6.0",
            "emr-spark-8.0.0",
            "emr-spark-8.0.0 is not on runtime glue-6.0's line (Spark 4.1, Iceberg 1.11, as "
            "emr-spark-8.1.0): use emr-spark-8.1.0 or leave release_label out",
        ),
        (
            "glue-5.1",
            "emr-6.15.0",
            "emr-6.15.0 is not on runtime glue-5.1's line (Spark 3.5, Iceberg 1.10, as emr-7.12.0): "
            "use emr-7.12.0 or leave release_label out",
        ),
    ],
)
def test_a_release_off_the_runtime_line_is_refused_in_one_line(runtime, label, message):
    emr = {**emr_without_release(), "release_label": label}
    with pytest.raises(SettingsError) as caught:
        resolve_stage(context(runtime=runtime, emr=emr))
    assert str(caught.value) == f"cdk.json context lakeloader:stages.dev.emr.release_label: {message}"


def test_the_release_follows_the_runtime_unless_the_stage_names_one():
    assert resolve_stage(context(emr=emr_without_release())).settings.emr.release_label == "emr-7.12.0"
    glue6 = resolve_stage(context(runtime="glue-6.0", emr=emr_without_release()))
    assert glue6.settings.emr.release_label == "emr-spark-8.1.0"
    assert glue6.runtime is GLUE_6
    later = {**emr_without_release(), "release_label": "emr-spark-8.1.2"}  # a patch of the same line
    assert (
        resolve_stage(context(runtime="glue-6.0", emr=later)).settings.emr.release_label == "emr-spark-8.1.2"
    )


def test_context_runtime_overrides_the_stage_and_meets_the_same_checks():
    """`-c runtime=glue-6.0`, as -c lake_formation: over cdk.json's stage, whose EMR release then follows
    it; a stage that pins glue-5.1's emr-7.12.0 is refused the override in one line."""
    shipped = context()
    assert resolve_stage(shipped).runtime.name == runtimes.DEFAULT_RUNTIME
    assert resolve_stage({**shipped, "runtime": "glue-6.0"}).settings.emr.release_label == "emr-spark-8.1.0"
    pinned = context(emr={**emr_without_release(), "release_label": "emr-7.12.0"})
    with pytest.raises(SettingsError) as caught:
        resolve_stage({**pinned, "runtime": "glue-6.0"})
    where = "cdk.json context lakeloader:stages.dev.emr.release_label: "
    assert str(caught.value).startswith(f"{where}emr-7.12.0 is not on runtime glue-6.0's line")


def test_the_glue_6_stage_is_clean_for_cdk_nag_and_cfn_lint(glue6):
    assert findings(glue6.app) == []
    matches = lint(glue6.template_path.read_text(), config=ManualArgs(regions=REGIONS, ignore_checks=IGNORED))
    assert [f"{m.rule.id} {m.message} ({'/'.join(str(p) for p in m.path)})" for m in matches] == []
