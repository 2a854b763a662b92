"""`cdk synth` runs in a deploy pipeline that has the CDK and the Lambda-safe half of lakeloader, not
Spark: synthesizing a stage imports no pyspark and no development tooling (lakeloader_dev), also a
stage with every optional construct that reads lakeloader code at synth (S3 Tables, Lake Formation)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BLOCKED = ("pyspark", "py4j", "lakeloader_dev")
SYNTH = f"""
import importlib.abc, json, sys

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"synth imported {{name}}")

sys.meta_path.insert(0, Blocked())
from aws_cdk import App
from infra.app import build, cdk_json_context

context = cdk_json_context()
context["stage"] = sys.argv[2]
context.update(json.loads(sys.argv[3]))
app = App(context=context, outdir=sys.argv[1])
build(app, nag=False)
app.synth()
print("synthesized", sorted(m for m in sys.modules if m.split(".")[0] == "lakeloader"))
"""


# The table bucket (tests/fixtures/s3_tables: crm.customers in S3 Tables) and Lake Formation mode
S3_TABLES_AND_LAKE_FORMATION = {"config": "tests/fixtures/s3_tables/tables.yaml", "lake_formation": True}


@pytest.mark.synth  # a whole synth in a process of its own
@pytest.mark.parametrize(
    ("stage", "context"), [("prod", {}), ("dev", S3_TABLES_AND_LAKE_FORMATION)], ids=["prod", "s3-tables-lf"]
)
def test_synth_imports_neither_spark_nor_the_development_tooling(tmp_path, stage, context):
    done = subprocess.run(
        [sys.executable, "-c", SYNTH, str(tmp_path), stage, json.dumps(context)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "synthesized" in done.stdout and "lakeloader.control.contract" in done.stdout, done.stdout
