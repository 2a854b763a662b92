"""The emulator's EMR Serverless runner with the packed venv the stack ships.

AWS documents EMR Serverless Python dependencies as a packed virtual environment in `spark.archives`
with `#environment`, and `PYSPARK_PYTHON` / `PYSPARK_DRIVER_PYTHON` at `./environment/bin/python`
("Using Python libraries with EMR Serverless",
https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/using-python-libraries.html). The
emulator unpacks the archive as Spark does (the venv's `bin/python` links to the image's
/usr/bin/python3.x, outside the folder) and runs the entry point on this machine's Python of the
runtime with the venv's site-packages; a venv of another Python is refused, naming it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.emr import emr_venv_conf
from infra.packed_venv import emr_venv_archive
from lakeloader.control import runtimes
from lakeloader_dev.emulator.emr_runner import DRIVER_ENV, _archive_python_path, _unpack_archive
from lakeloader_dev.emulator.stand_in import distributions

URL = "s3://assets/venv.tar.gz"


def unpacked(tmp_path, runtime: runtimes.Runtime):
    archive = emr_venv_archive(runtime=runtime).read_bytes()
    conf = emr_venv_conf(URL)
    _unpack_archive(lambda uri: archive, conf["spark.archives"], tmp_path)
    return {k.removeprefix(DRIVER_ENV): v for k, v in conf.items() if k.startswith(DRIVER_ENV)}


@pytest.mark.slow  # packs a whole virtualenv of the runtime's wheels
def test_the_stacks_venv_puts_its_site_packages_on_the_drivers_path(tmp_path):
    """The archive unpacks as ./environment with its links kept, and the driver imports from the
    venv's lib/python3.x/site-packages; PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON are taken over."""
    runtime = runtimes.local()
    env = unpacked(tmp_path, runtime)
    path = _archive_python_path(env, tmp_path)
    site = tmp_path / "environment" / "lib" / f"python{runtime.python}" / "site-packages"
    if runtime.local_python:  # glue-6.1 on the 3.13 standing in for 3.14: the same venv built for it
        [stand_in] = map(Path, path)
        assert stand_in.parent.name == f"python{runtime.laptop_python}"
        assert distributions(stand_in) == distributions(site)
    else:
        assert path == [str(site)]
    assert (site / "pydantic" / "__init__.py").is_file() and (site / "boto3" / "__init__.py").is_file()
    assert (tmp_path / "environment" / "bin" / "python").is_symlink()
    assert "PYSPARK_PYTHON" not in env and "PYSPARK_DRIVER_PYTHON" not in env


@pytest.mark.slow  # packs a whole virtualenv of the runtime's wheels
def test_a_venv_of_the_other_runtimes_python_is_refused(tmp_path):
    """An application of the other runtime ships wheels this Python cannot load: the run fails naming
    both Pythons instead of failing on an import."""
    local = runtimes.local()
    other = next(r for r in runtimes.RUNTIMES.values() if r.python != local.python)
    env = unpacked(tmp_path, other)
    with pytest.raises(ValueError, match=rf"Python {other.python}.*runtime {local.name}.*{local.python}"):
        _archive_python_path(env, tmp_path)
