"""What the template deploys runs its stage's row of lakeloader.control.runtimes (cdk.json's stages name no
runtime: the default one). The glue-6.0 stage: tests/infra/test_infra_runtimes.py.

(The local side, requirements.txt and the Iceberg jar: tests/unit/test_versions.py.)
"""

from __future__ import annotations

from lakeloader.control import runtimes

DEFAULT = runtimes.runtime(runtimes.DEFAULT_RUNTIME)


def test_glue_jobs_run_the_runtime_glue_version(stage_synth):
    jobs = stage_synth.resources("AWS::Glue::Job").values()
    assert {job["Properties"]["GlueVersion"] for job in jobs} == {DEFAULT.glue_version} == {"5.1"}


def test_emr_application_runs_the_runtime_release_with_its_iceberg_jar_and_python(stage_synth):
    _, app = stage_synth.resource("AWS::EMRServerless::Application")
    assert app["Properties"]["ReleaseLabel"] == DEFAULT.emr_release_label == "emr-7.12.0"
    conf = app["Properties"]["RuntimeConfiguration"][0]["Properties"]
    assert conf["spark.jars"] == runtimes.EMR_ICEBERG_JAR
    assert conf["spark.executorEnv.PYSPARK_PYTHON"] == "./environment/bin/python"  # the packed venv's,
    assert DEFAULT.emr_python == "/usr/bin/python3.11"  # which links to the image's Python of the runtime
