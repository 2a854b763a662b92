"""The shipped bundle, installed as the runtimes install it, imports every shipped module.

Each check starts a fresh Python environment that holds only what the runtime would: Spark
(pyspark + py4j, linked from this venv, as Glue and EMR provide it), for Glue 5.1 also the packages
Glue ships (boto3 and its dependencies), then the bundle installed with no package index (Glue 5.1's
zip of wheels, Glue 6.0's packed venv, EMR's packed venv). The shipped modules are imported from the
lakeloader zip with `lakeloader_dev` out of reach. No JVM. Each runtime's check runs on a CPython of
that runtime's version (this one, or another found on this machine: `_python`).
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
import venv
import zipfile
from pathlib import Path

import py4j
import pyspark
import pytest

from infra.emr import EMR_VENV_ALIAS, emr_venv_conf
from infra.packaging import canonical_name, fetch_wheels, glue_wheels_zip, job_pins, lakeloader_zip
from infra.packed_venv import GLUE_PYTHON_HOME, emr_venv_archive, glue_venv_archive
from lakeloader.control import runtimes
from lakeloader.control.runtimes import Runtime
from tests.unit.job_target import unmet

ROOT = Path(__file__).resolve().parents[2]
GLUE_51, GLUE_60 = runtimes.runtime("glue-5.1"), runtimes.runtime("glue-6.0")
SHIM = ROOT / "lakeloader_dev" / "emulator" / "shim"

# Imports every shipped module: the zip's lakeloader modules by name, the entry points from their
# files (not as __main__); glue_jobs/* with the awsglue shim on sys.path for that import only.
IMPORT_ALL = textwrap.dedent(
    """
    import importlib, importlib.util, json, sys, zipfile
    lakeloader_zip, awsglue_dir, entry_points = sys.argv[1], sys.argv[2], sys.argv[3:]
    sys.path.insert(0, lakeloader_zip)
    assert importlib.util.find_spec("lakeloader_dev") is None, "lakeloader_dev is reachable"
    names = sorted(n[:-3].replace("/", ".") for n in zipfile.ZipFile(lakeloader_zip).namelist())
    origins = {}
    for name in names:
        origins[name] = importlib.import_module(name.removesuffix(".__init__")).__file__
    for path in entry_points:
        glue = "/glue_jobs/" in path
        if glue:
            sys.path.insert(0, awsglue_dir)
        spec = importlib.util.spec_from_file_location("entry_" + path.replace("/", "_"), path)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        if glue:
            sys.path.remove(awsglue_dir)
            for module in [m for m in sys.modules if m.split(".")[0] == "awsglue"]:
                del sys.modules[module]
        origins[path] = path
    for name in ("pydantic", "pydantic_core", "yaml", "boto3", "pyspark"):
        origins[name] = importlib.import_module(name).__file__
    print(json.dumps(origins))
    """
)


def _run(command: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        command, cwd=cwd, env={**_clean_env(), **(env or {})}, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{' '.join(map(str, command))}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _clean_env() -> dict[str, str]:
    """This process's environment without what would leak the dev venv into the fresh one."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PIP_NO_INDEX"] = "1"  # nothing may come from a package index
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _fresh_venv(root: Path, *platform_dirs: Path) -> Path:
    """A venv whose site-packages also sees `platform_dirs` (the runtime's preinstalled packages)."""
    venv.EnvBuilder(with_pip=True, symlinks=True).create(root)
    python = root / "bin" / "python"
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=root)
    (Path(site.strip()) / "runtime.pth").write_text("".join(f"{d}\n" for d in platform_dirs))
    return python


def _spark_dir(root: Path) -> Path:
    """pyspark and py4j only (not the rest of the dev venv), as the runtimes provide them."""
    root.mkdir()
    for module in (pyspark, py4j):
        (root / module.__name__).symlink_to(Path(module.__file__).parent)
    return root


def _entry_points() -> list[str]:
    return [str(p) for folder in ("glue_jobs", "emr_steps") for p in sorted((ROOT / folder).glob("*.py"))]


def _awsglue_dir() -> Path:
    (init,) = SHIM.glob("**/awsglue/__init__.py")
    return init.parent.parent


def _import_all(python: Path, cwd: Path, env: dict[str, str] | None = None, *flags: str) -> dict[str, str]:
    script = cwd / "import_all.py"
    script.write_text(IMPORT_ALL)
    command = [str(python), *flags, str(script), str(lakeloader_zip()), str(_awsglue_dir()), *_entry_points()]
    return json.loads(_run(command, cwd=cwd, env=env).splitlines()[-1])


def _assert_shipped(origins: dict[str, str], deps: Path) -> None:
    lakeloader = str(lakeloader_zip())
    assert len([n for n in origins if n.startswith("lakeloader.")]) > 15
    assert all(v.startswith(lakeloader) for n, v in origins.items() if n.startswith("lakeloader."))
    for name in ("pydantic", "pydantic_core", "yaml"):
        assert origins[name].startswith(str(deps)), (name, origins[name])


@functools.cache
def _find_python(version: str) -> str | None:
    """A CPython `version` (3.11, 3.13) interpreter: this one, one on PATH, or one of pyenv's. The
    interpreter's own path, as it reports it: a pyenv shim on PATH is a script, and a venv linked to
    it would start the base interpreter outside the venv."""
    candidates = [sys._base_executable, shutil.which(f"python{version}")]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates += sorted(map(str, pyenv.glob(f"versions/{version}.*/bin/python{version}")))
    ask = "import sys; print('%d.%d' % sys.version_info[:2], sys.implementation.name, sys.executable)"
    for candidate in filter(None, candidates):
        done = subprocess.run(
            [candidate, "-c", ask], capture_output=True, text=True, check=False, env=_clean_env()
        )
        found = done.stdout.strip().split(maxsplit=2) if done.returncode == 0 else []
        if found[:2] == [version, "cpython"]:
            return str(Path(found[2]).resolve())
    return None


def _python(runtime: Runtime) -> str:
    """The runtime's Python on this machine, or skip: its wheels load in no other."""
    found = _find_python(runtime.python)
    if found is None:
        pytest.skip(f"no CPython {runtime.python} here for {runtime.name}'s cp{runtime.python} wheels")
    return found


@pytest.fixture(scope="module")
def spark_dir(tmp_path_factory) -> Path:
    return _spark_dir(tmp_path_factory.mktemp("platform") / "spark")


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="glue-5.1's zip of cp311 wheels: run under 3.11")
def test_glue_zip_of_wheels_installs_with_no_index_and_runs_every_entry_point(tmp_path, spark_dir):
    """As Glue 5.1: its image has Spark and boto3 & co.; pip --no-index installs the zip of wheels."""
    wheels = fetch_wheels()
    provided = [p for p in job_pins() if p.glue_provided]
    glue_image = tmp_path / "glue-provided"
    _run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target",
         str(glue_image), *(str(wheels[p.key]) for p in provided)],
        cwd=tmp_path,
    )  # fmt: skip
    python = _fresh_venv(tmp_path / "venv", spark_dir, glue_image)
    unzipped = tmp_path / "gluewheels"
    with zipfile.ZipFile(glue_wheels_zip()) as archive:
        archive.extractall(unzipped)
    _run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
         str(unzipped / "wheels"), "-r", str(unzipped / "wheels" / "requirements.txt")],
        cwd=tmp_path,
    )  # fmt: skip
    _run([str(python), "-m", "pip", "check"], cwd=tmp_path)
    origins = _import_all(python, tmp_path)
    _assert_shipped(origins, tmp_path / "venv")
    assert origins["boto3"].startswith(str(glue_image))


def _unmet_requirements(site: Path, runtime: Runtime) -> list[str]:
    """`pip check` for a directory: each distribution's requirements on the runtime, met inside `site`?"""
    found_in_site = importlib.metadata.distributions(path=[str(site)])
    dists = {canonical_name(d.metadata["Name"]): d for d in found_in_site}
    found = {name: dist.version for name, dist in dists.items()}
    problems = []
    for name, dist in sorted(dists.items()):
        problems += unmet(name, dist.requires or [], found, runtime)
    return problems


@pytest.mark.slow
def test_glue_venv_runs_every_entry_point_on_its_python(tmp_path, spark_dir):
    """As Glue 6.0: the packed venv unpacked, its Python the runtime's (this machine's CPython 3.13
    linked where Glue has /usr/bin/python3.13, as venv-pack's --python-prefix relinks it), Spark's
    own paths on PYTHONPATH. No pip, nothing from any other site-packages."""
    python = Path(_python(GLUE_60))
    root = tmp_path / "venv"
    with tarfile.open(glue_venv_archive(runtime=GLUE_60)) as archive:
        archive.extractall(root, filter="fully_trusted")  # our archive; it links outside on purpose
    interpreter = root / "bin" / "python3.13"
    assert os.readlink(interpreter) == f"{GLUE_PYTHON_HOME}/python3.13"
    interpreter.unlink()
    interpreter.symlink_to(python)
    config = root / "pyvenv.cfg"
    config.write_text(config.read_text().replace(GLUE_PYTHON_HOME, str(python.parent)))
    site = root / "lib" / "python3.13" / "site-packages"
    assert _unmet_requirements(site, GLUE_60) == []
    where = _run([str(root / "bin" / "python"), "-c", "import sys; print(sys.prefix)"], cwd=tmp_path)
    assert where.strip() == str(root)  # pyvenv.cfg makes it a venv
    origins = _import_all(root / "bin" / "python", tmp_path, {"PYTHONPATH": str(spark_dir)})
    _assert_shipped(origins, site)
    assert origins["boto3"].startswith(str(site))  # the venv's own: Glue's image gives it none


@pytest.mark.slow
@pytest.mark.parametrize("runtime", runtimes.RUNTIMES.values(), ids=runtimes.RUNTIMES)
def test_emr_venv_runs_every_entry_point(tmp_path, spark_dir, runtime):
    """As EMR Serverless ("Using Python libraries with EMR Serverless",
    https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/using-python-libraries.html): the
    packed venv unpacked as ./environment in the working directory, driver and executors on
    ./environment/bin/python (its link relinked from the image's /usr/bin/python3.x to a CPython of the
    runtime here), Spark's own paths on PYTHONPATH. No pip, nothing from any other site-packages."""
    python = Path(_python(runtime))
    workdir = tmp_path / "work"
    root = workdir / EMR_VENV_ALIAS
    with tarfile.open(emr_venv_archive(runtime=runtime)) as archive:
        archive.extractall(root, filter="fully_trusted")  # our archive; it links outside on purpose
    conf = emr_venv_conf("s3://assets/venv.tar.gz")
    assert conf["spark.archives"] == f"s3://assets/venv.tar.gz#{EMR_VENV_ALIAS}"
    assert conf["spark.executorEnv.PYSPARK_PYTHON"] == f"./{EMR_VENV_ALIAS}/bin/python"
    interpreter = root / "bin" / f"python{runtime.python}"
    assert os.readlink(interpreter) == runtime.emr_python
    interpreter.unlink()
    interpreter.symlink_to(python)
    config = root / "pyvenv.cfg"
    config.write_text(config.read_text().replace(GLUE_PYTHON_HOME, str(python.parent)))
    site = root / "lib" / f"python{runtime.python}" / "site-packages"
    assert _unmet_requirements(site, runtime) == []
    venv_python = workdir / conf["spark.executorEnv.PYSPARK_PYTHON"]
    where = _run([str(venv_python), "-c", "import sys; print(sys.prefix)"], cwd=workdir)
    assert where.strip() == str(root)  # pyvenv.cfg makes it a venv
    origins = _import_all(venv_python, workdir, {"PYTHONPATH": str(spark_dir)})
    _assert_shipped(origins, site)
    assert origins["boto3"].startswith(str(site))
