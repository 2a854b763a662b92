"""What the template deploys runs the matrix of lakeloader.runtimes.

(The local side, requirements.txt and the Iceberg jar: tests/unit/test_versions.py.)
"""

from __future__ import annotations

from lakeloader import runtimes


def test_glue_jobs_run_the_matrix_glue_version(stage_synth):
    jobs = stage_synth.resources("AWS::Glue::Job").values()
    assert {job["Properties"]["GlueVersion"] for job in jobs} == {runtimes.GLUE_VERSION}


def test_emr_application_runs_the_matrix_release_with_its_iceberg_jar_and_python(stage_synth):
    _, app = stage_synth.resource("AWS::EMRServerless::Application")
    assert app["Properties"]["ReleaseLabel"] == runtimes.EMR_RELEASE_LABEL
    conf = app["Properties"]["RuntimeConfiguration"][0]["Properties"]
    assert conf["spark.jars"] == runtimes.EMR_ICEBERG_JAR
    assert conf["spark.executorEnv.PYSPARK_PYTHON"] == runtimes.EMR_PYTHON
