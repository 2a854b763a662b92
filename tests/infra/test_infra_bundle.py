"""The code the template ships, fetched from no package index at job start or at synth.

The jobs' bundle (the lakeloader zip and its wheels) and the Lambda bundles (the handler,
`lakeloader/control/`, and aws-lambda-powertools).
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

import infra.packaging
import infra.triggers
from infra.functions import PythonFunction
from infra.lambda_code import lambda_bundle
from infra.packaging import REPO_ROOT, PackagingError, glue_wheels_zip, package_files
from infra.packed_venv import emr_venv_archive
from tests.infra.cdk_helpers import bundle_files, import_in_bundle, join, synthesize


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


def test_emr_application_runs_on_the_packed_venv_as_aws_documents(stage_synth):
    """EMR Serverless takes Python dependencies as a packed virtual environment: `spark.archives` names
    the archive with `#environment`, and the driver's and executors' `PYSPARK_PYTHON` (and the driver's
    `PYSPARK_DRIVER_PYTHON`) are `./environment/bin/python` ("Using Python libraries with EMR
    Serverless", https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/using-python-libraries.html).
    No unpacked wheels on PYTHONPATH, no interpreter named from the image. The archive's key ends in
    .tar.gz (Spark unpacks an archive by its name's ending) and its bytes are emr_venv_archive's: a
    venv of the runtime's Python (pyvenv.cfg, bin/python, lib/python3.11/site-packages), no awsglue."""
    _, app = stage_synth.resource("AWS::EMRServerless::Application")
    conf = app["Properties"]["RuntimeConfiguration"][0]["Properties"]
    archives = conf["spark.archives"]["Fn::Join"][1]
    assert archives[1] == "#environment"
    for key in (
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON",
        "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON",
        "spark.executorEnv.PYSPARK_PYTHON",
    ):
        assert conf[key] == "./environment/bin/python", key
    assert not [k for k in conf if k.endswith("PYTHONPATH")]
    key = _object_key(_sub(archives[0]))
    assert key.endswith(".tar.gz")
    venv = emr_venv_archive()
    assert _asset(stage_synth, key)["bytes"] == venv.read_bytes()
    with tarfile.open(venv) as archive:
        members = {m.name: m for m in archive.getmembers()}
    assert members["bin/python"].issym() and members["bin/python"].linkname == "python3.11"
    assert members["bin/python3.11"].linkname == "/usr/bin/python3.11"
    assert "version = 3.11" in archive_text(venv, "pyvenv.cfg")
    assert "lib/python3.11/site-packages/pydantic/__init__.py" in members
    assert not [n for n in members if "/site-packages/awsglue/" in n]  # EMR runs no awsglue
    processing = stage_synth.stack.processing
    assert f"/{key}" in _role_policy_text(stage_synth, processing.emr_role)


def archive_text(path, name: str) -> str:
    with tarfile.open(path) as archive:
        return archive.extractfile(name).read().decode()


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


# --- Lambda bundles -----------------------------------------------------------------------------

POWERTOOLS = {"aws_lambda_powertools/__init__.py", "jmespath/__init__.py", "typing_extensions.py"}
# Modules only the jobs use (they import pyspark or the config model): no Lambda bundle holds them.
JOB_ONLY = {
    "lakeloader/jobs/main.py",
    "lakeloader/engine/merge.py",
    "lakeloader/spark/session.py",
    "lakeloader/config/lake.py",
}


def test_arrival_bundle_is_the_handler_and_the_control_folder(dev):
    bundle = dev.stack.triggers.arrival.bundle_dir
    files = bundle_files(bundle)
    loaded = import_in_bundle(bundle, "handler")  # no pydantic, yaml or pyspark to import
    assert {"handler.py", "lakeloader/__init__.py", "lakeloader/control/trigger/__init__.py"} <= loaded
    assert loaded <= files
    assert not files & JOB_ONLY
    # control.trigger logs and parses events with Powertools: the bundle's own copy is the one loaded
    assert files >= POWERTOOLS
    assert "aws_lambda_powertools/logging/logger.py" in loaded


def test_every_lambda_bundle_is_its_handler_folder_the_control_folder_and_the_wheels(dev):
    """No import closure: each function ships lakeloader/control/ whole, and nothing else of lakeloader."""
    control = {
        f"lakeloader/{p.relative_to(REPO_ROOT / 'lakeloader').as_posix()}"
        for p in package_files(REPO_ROOT / "lakeloader" / "control")
    } | {"lakeloader/__init__.py"}
    functions = [n for n in dev.stack.node.find_all() if isinstance(n, PythonFunction)]
    assert len(functions) == 2  # the dev stage's: arrival and config sync
    for function in functions:
        files = bundle_files(function.bundle_dir)
        assert {f for f in files if f.startswith("lakeloader/")} == control, function.node.path
        assert "handler.py" in files and files >= POWERTOOLS
    loaded = import_in_bundle(dev.stack.config_store.sync_function.bundle_dir, "handler")
    assert "lakeloader/control/config_store.py" in loaded
    assert not any(f.startswith(("lakeloader/control/trigger", "aws_lambda_powertools")) for f in loaded)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture
def build_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(infra.packaging, "BUILD_DIR", tmp_path / "build")
    return tmp_path / "build"


# A stand-in `lakeloader` package: a control folder with submodules, a subpackage, relative and
# function-level imports, beside modules a Lambda must not ship.
PACKAGE = {
    "__init__.py": "",
    "control/__init__.py": "",
    "control/contract.py": "from json import loads\n",
    "control/sub/__init__.py": "from . import leaf\n",
    "control/sub/leaf.py": "from ..contract import loads\n",
    "control/sub/lazy.py": "def f():\n    from .. import contract\n    return contract\n",
    "control/typed.py": "import typing\nif typing.TYPE_CHECKING:\n    from lakeloader.config import X\n",
    "config/__init__.py": "import pydantic\n",
    "engine.py": "import pyspark\n",
}


@pytest.fixture
def package(tmp_path):
    return _tree(tmp_path / "pkg", PACKAGE)


def handler_dir(tmp_path, code: str) -> Path:
    return _tree(tmp_path / "fn", {"handler.py": code, "test_handler.py": "import pytest\n"})


def test_lambda_bundle_holds_the_handler_and_the_whole_control_folder(tmp_path, build_dir, package):
    source = handler_dir(tmp_path, "def handler(event, context):\n    return 1\n")
    (source / "__pycache__").mkdir()
    (source / "__pycache__" / "handler.cpython-311.pyc").write_bytes(b"\0")
    bundle = lambda_bundle("test-fn", source, package_root=package)
    assert bundle_files(bundle) == {  # no file imports outside the runtime: no wheels
        "handler.py",
        "lakeloader/__init__.py",
        "lakeloader/control/__init__.py",
        "lakeloader/control/contract.py",
        "lakeloader/control/sub/__init__.py",
        "lakeloader/control/sub/leaf.py",
        "lakeloader/control/sub/lazy.py",
        "lakeloader/control/typed.py",  # its TYPE_CHECKING import of the config model never runs
    }
    assert lambda_bundle("test-fn", source, package_root=package) == bundle  # same content, same folder
    assert bundle.parent == build_dir


UNTYPED = "from typing import TYPE_CHECKING\nif not TYPE_CHECKING:\n    from ..config import X\n"


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            {"handler.py": "def handler(e, c):\n    from lakeloader.config import X\n"},
            r"handler.py:2: .* lakeloader.config",
        ),
        ({"handler.py": "from lakeloader import config\n"}, r"handler.py:1: imports lakeloader.config, "),
        (
            {"handler.py": "import lakeloader.engine\n"},
            r"handler.py:1: imports lakeloader.engine, outside lakeloader.control",
        ),
        (
            {"control/helper.py": "def load():\n    from ..config import X\n"},
            r"helper.py:2: imports lakeloader.config",
        ),
        (
            {"control/late.py": "def f():\n    from .. import engine\n"},
            r"late.py:2: imports lakeloader.engine, outside",
        ),
        ({"control/unused.py": "import pyspark\n"}, r"unused.py:1: imports pyspark"),
        ({"handler.py": "import yaml\n"}, r"handler.py:1: imports yaml"),
        (
            {"control/untyped.py": UNTYPED},
            r"untyped.py:3: imports lakeloader.config",  # runs at import
        ),
        (
            {"handler.py": "import lakeloader.control.missing\n"},
            r"imports lakeloader.control.missing, which does not exist",
        ),
        (
            {"handler.py": "import lakeloader.control.bare.mod\n", "control/bare/mod.py": ""},
            r"bare, a folder without __init__.py",
        ),
        (
            {"handler.py": "import requests\n"},
            r"handler.py:1: imports requests, which the Lambda runtime does not have",
        ),
    ],
)
def test_lambda_bundle_refuses_what_a_function_could_not_import(tmp_path, build_dir, package, files, message):
    code = files.get("handler.py", "def handler(e, c):\n    return 1\n")
    _tree(package, {name: text for name, text in files.items() if name != "handler.py"})
    with pytest.raises(PackagingError, match=message):
        lambda_bundle("test-fn", handler_dir(tmp_path, code), package_root=package)


POWERTOOLS_HANDLER = (
    "import boto3\nfrom aws_lambda_powertools import Logger\n"
    "from lakeloader.control.contract import loads\n\n"
    "logger = Logger(service='test')\n\ndef handler(event, context):\n    return loads(event)\n"
)


def test_a_handler_importing_powertools_gets_it_vendored(tmp_path, build_dir, package):
    bundle = lambda_bundle("test-fn", handler_dir(tmp_path, POWERTOOLS_HANDLER), package_root=package)
    files = bundle_files(bundle)
    assert files >= POWERTOOLS
    assert {"handler.py", "lakeloader/__init__.py", "lakeloader/control/contract.py"} <= files
    assert not any(f.startswith(("boto3/", "botocore/")) for f in files)  # the runtime has them
    loaded = import_in_bundle(bundle, "handler")
    assert "aws_lambda_powertools/logging/logger.py" in loaded


def test_missing_lambda_wheels_ask_for_make_setup(tmp_path, build_dir, package):
    source = handler_dir(tmp_path, POWERTOOLS_HANDLER)
    with pytest.raises(PackagingError, match=r"requirements-lambda.txt: .*run `make setup`"):
        lambda_bundle("test-fn", source, package_root=package, wheel_cache=tmp_path / "no-wheels")


def test_a_lambda_importing_the_config_model_fails_the_synth(tmp_path, monkeypatch):
    source = _tree(tmp_path / "fn", {"handler.py": "from lakeloader.config import load_config\n"})
    monkeypatch.setattr(infra.triggers, "lambda_source", lambda name: source)
    with pytest.raises(PackagingError, match=r"handler.py:1: imports lakeloader.config"):
        synthesize(tmp_path / "out", "dev")
