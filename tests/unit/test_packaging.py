"""What ships to Glue/EMR: the pinned dependency set, its wheels, and the zips built from them.

Offline once `make setup` has filled `.lakeloader/wheels/`. The install-and-import check of the
built artifacts in fresh virtual environments lives in test_packaging_bundle.py.
"""

from __future__ import annotations

import ast
import importlib.metadata
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

import infra.packaging as packaging
from infra.packaging import (
    GLUE_WHEELS_NAME,
    PackagingError,
    Pin,
    check_wheel,
    fetch_wheels,
    glue_wheels_zip,
    job_pins,
    lakeloader_zip,
)
from infra.packed_venv import GLUE_VENV_NAME, emr_venv_archive, glue_venv_archive, uses_python_venv
from lakeloader.control import runtimes
from tests.unit.job_target import unmet

ROOT = Path(__file__).resolve().parents[2]
GLUE_51, GLUE_60 = runtimes.runtime("glue-5.1"), runtimes.runtime("glue-6.0")
# AWS Glue 5.1's preinstalled modules (AWS doc "Python modules already provided in AWS Glue"), by name.
GLUE_51_PROVIDED = {
    "aiobotocore", "aiohttp", "boto3", "botocore", "certifi", "charset-normalizer", "fsspec", "idna",
    "jmespath", "numpy", "packaging", "pandas", "pyarrow", "python-dateutil", "pytz", "requests",
    "s3fs", "s3transfer", "six", "typing-extensions", "urllib3",
}  # fmt: skip


@pytest.fixture(scope="module")
def pins() -> list[Pin]:
    return job_pins()


def _pins_of(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line and not line.startswith("pyspark"):
            name, version = line.split("==", 1)
            found[packaging.canonical_name(name)] = version
    return found


def test_requirements_txt_installs_the_shipped_versions(pins):
    """Every runtime pin of requirements.txt but Spark (the runtimes provide it) ships at that version."""
    shipped = {p.key: p.version for p in pins}
    local = _pins_of(ROOT / "requirements.txt")  # pyspark, per runtime: tests/unit/test_versions.py
    assert {name: shipped.get(name) for name in local} == local
    assert "-c requirements-job.txt" in (ROOT / "requirements.txt").read_text().splitlines()


def test_local_venv_runs_the_shipped_versions(pins):
    installed = {p.name: importlib.metadata.version(p.name) for p in pins}
    assert installed == {p.name: p.version for p in pins}


@pytest.mark.parametrize("runtime", runtimes.RUNTIMES.values(), ids=runtimes.RUNTIMES)
def test_every_transitive_dependency_is_pinned_and_satisfied(pins, runtime):
    pinned = {p.key: p.version for p in pins}
    problems = []
    for pin in pins:
        problems += unmet(str(pin), importlib.metadata.requires(pin.name) or [], pinned, runtime)
    assert problems == []


def test_only_what_glue_ships_is_marked_glue_provided(pins):
    """A package marked glue-provided stays out of the Glue zip: Glue must really ship it."""
    marked = {p.key for p in pins if p.glue_provided}
    assert "boto3" in marked
    assert marked <= GLUE_51_PROVIDED


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("pydantic>=2\n", r"reqs.txt:1: 'pydantic>=2' is not an exact pin"),
        ("# deps\n\nPyYAML==6.0.3\npyyaml==6.0.3\n", r"reqs.txt:4: pyyaml is pinned twice"),
        ("# nothing\n", r"reqs.txt: no pins"),
    ],
)
def test_job_pins_names_the_bad_line(tmp_path, text, message):
    path = tmp_path / "reqs.txt"
    path.write_text(text)
    with pytest.raises(PackagingError, match=message):
        job_pins(path)


def test_job_pins_reads_the_glue_provided_mark(tmp_path):
    path = tmp_path / "reqs.txt"
    path.write_text("six==1.17.0  # glue-provided\nPyYAML==6.0.3  # a comment\n")
    assert job_pins(path) == [Pin("PyYAML", "6.0.3", False), Pin("six", "1.17.0", True)]


@pytest.mark.parametrize(
    ("runtime", "filename"),
    [
        (GLUE_51, "pydantic_core-2.46.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"),
        (GLUE_51, "pydantic_core-2.46.4-cp38-abi3-manylinux2014_x86_64.whl"),
        (GLUE_51, "pydantic_core-2.46.4-py3-none-any.whl"),
        (GLUE_60, "pydantic_core-2.46.4-cp313-cp313-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"),
        (GLUE_60, "pydantic_core-2.46.4-cp38-abi3-manylinux2014_x86_64.whl"),
        (GLUE_60, "pydantic_core-2.46.4-py3-none-any.whl"),
    ],
)
def test_check_wheel_accepts_the_runtimes_wheels(runtime, filename):
    check_wheel(filename, Pin("pydantic-core", "2.46.4", False), runtime)


def test_check_wheel_holds_graviton_workers_to_aarch64_wheels():
    """A Graviton stage's bundle takes aarch64 wheels (or pure ones) and refuses x86_64 ones, and the
    other way round."""
    glue_61, pin = runtimes.runtime("glue-6.1"), Pin("pydantic-core", "2.46.4", False)
    arm = "pydantic_core-2.46.4-cp314-cp314-manylinux_2_17_aarch64.manylinux2014_aarch64.whl"
    intel = "pydantic_core-2.46.4-cp314-cp314-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    check_wheel(arm, pin, glue_61, runtimes.AARCH64)
    check_wheel("pydantic_core-2.46.4-py3-none-any.whl", pin, glue_61, runtimes.AARCH64)
    check_wheel(intel, pin, glue_61, runtimes.X86_64)
    with pytest.raises(PackagingError, match="no wheel for cp314 on manylinux2014_aarch64"):
        check_wheel(intel, pin, glue_61, runtimes.AARCH64)
    with pytest.raises(PackagingError, match="no wheel for cp314 on manylinux2014_x86_64"):
        check_wheel(arm, pin, glue_61, runtimes.X86_64)
    with pytest.raises(PackagingError, match="no wheel for cp314 on manylinux2014_aarch64"):
        check_wheel(
            "pydantic_core-2.46.4-cp314-cp314-manylinux_2_34_aarch64.whl", pin, glue_61, runtimes.AARCH64
        )


@pytest.mark.parametrize(
    ("runtime", "filename", "message"),
    [
        (GLUE_51, "pydantic_core-2.46.4-cp312-cp312-manylinux2014_x86_64.whl", "no wheel for cp311"),
        (GLUE_51, "pydantic_core-2.46.4-cp313-cp313-manylinux2014_x86_64.whl", "no wheel for cp311"),
        (GLUE_51, "pydantic_core-2.46.4-cp311-cp311-macosx_11_0_arm64.whl", "no wheel for cp311"),
        (GLUE_51, "pydantic_core-2.46.4-cp311-cp311-manylinux_2_34_x86_64.whl", "no wheel for cp311"),
        (GLUE_51, "pydantic_core-2.46.4-cp311-cp311-musllinux_1_2_x86_64.whl", "no wheel for cp311"),
        (GLUE_60, "pydantic_core-2.46.4-cp311-cp311-manylinux2014_x86_64.whl", "no wheel for cp313"),
        (GLUE_60, "pydantic_core-2.46.4-cp314-cp314-manylinux2014_x86_64.whl", "no wheel for cp313"),
        (GLUE_60, "pydantic_core-2.46.4-cp313-cp313-manylinux_2_34_x86_64.whl", "no wheel for cp313"),
        (
            GLUE_51,
            "pydantic_core-2.46.3-cp311-cp311-manylinux2014_x86_64.whl",
            "not the wheel of pydantic-core==",
        ),
        (GLUE_51, "pydantic_core-2.46.4.tar.gz", "not a wheel file name"),
    ],
)
def test_check_wheel_refuses_other_platforms_and_versions(runtime, filename, message):
    with pytest.raises(PackagingError, match=message):
        check_wheel(filename, Pin("pydantic-core", "2.46.4", False), runtime)


def test_the_wheel_cache_is_keyed_by_the_runtimes_python(pins):
    """Each runtime's wheels in a folder of their own: cp311 wheels never ship to a glue-6.0 stage."""
    folders = [
        {p.parent for p in fetch_wheels(pins, runtime=row).values()} for row in runtimes.RUNTIMES.values()
    ]
    assert [folder.name.split("-")[0] for (folder,) in folders] == ["cp311", "cp313", "cp314"]
    cp313 = fetch_wheels(pins, runtime=GLUE_60)
    assert cp313["pydantic-core"].name.startswith("pydantic_core-2.46.4-cp313-cp313-manylinux")
    assert cp313["pyyaml"].name.startswith("pyyaml-6.0.3-cp313-cp313-manylinux")


def test_cached_wheels_are_checked_against_their_recorded_sha256(tmp_path, pins):
    wheels = fetch_wheels(pins)
    cached = next(iter(wheels.values())).parent
    copy = tmp_path / "cache" / cached.name
    shutil.copytree(cached, copy)
    assert fetch_wheels(pins, cache=tmp_path / "cache") == {k: copy / p.name for k, p in wheels.items()}
    tampered = copy / wheels["pyyaml"].name
    tampered.write_bytes(tampered.read_bytes() + b"\0")
    with pytest.raises(PackagingError, match=r"pyyaml-6\.0\.3-.*\.whl: sha256 differs"):
        fetch_wheels(pins, cache=tmp_path / "cache")


def test_glue_zip_of_wheels_has_the_documented_layout(pins):
    wheels = fetch_wheels(pins)
    shipped = [p for p in pins if not p.glue_provided]
    path = glue_wheels_zip()
    assert path.name == GLUE_WHEELS_NAME and path.name.endswith(".gluewheels.zip")
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        requirements = archive.read("wheels/requirements.txt").decode()
        assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    assert names == sorted(["wheels/requirements.txt", *(f"wheels/{wheels[p.key].name}" for p in shipped)])
    assert requirements.splitlines() == [str(p) for p in shipped]
    assert "boto3" not in requirements and "pydantic==2.13.4" in requirements


@pytest.mark.parametrize("runtime", runtimes.RUNTIMES.values(), ids=runtimes.RUNTIMES)
def test_emr_venv_is_a_packed_venv_of_the_runtimes_python(runtime):
    """EMR Serverless gets a packed virtual environment ("Using Python libraries with EMR Serverless",
    https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/using-python-libraries.html:
    venv-pack's archive, run as ./environment/bin/python): Glue 6.0's venv layout, every pin installed
    into lib/python3.x/site-packages, bin/python linked to the image's interpreter, no awsglue."""
    python = f"python{runtime.python}"
    with tarfile.open(emr_venv_archive(runtime=runtime)) as archive:
        members = {m.name: m for m in archive.getmembers()}
        config = archive.extractfile("pyvenv.cfg").read().decode()
    names = sorted(members)
    assert list(members) == names
    site = f"lib/{python}/site-packages/"
    for expected in ("pydantic/__init__.py", "yaml/__init__.py", "boto3/__init__.py", "six.py"):
        assert site + expected in names
    abi = f"cpython-{runtime.wheel_python_tag.removeprefix('cp')}-x86_64"  # cpython-311-x86_64, -313-
    assert [n for n in names if n.startswith(f"{site}pydantic_core/_pydantic_core.{abi}")]
    assert f"{site}pydantic-2.13.4.dist-info/METADATA" in names
    assert not [n for n in names if n.startswith(f"{site}awsglue/")]  # EMR runs no awsglue
    assert members[f"bin/{python}"].linkname == f"/usr/bin/{python}" == runtime.emr_python
    assert members["bin/python"].linkname == python
    assert f"version = {runtime.python}" in config and "include-system-site-packages = false" in config


def test_glue_takes_a_venv_from_6_0_and_the_zip_of_wheels_before():
    assert [name for name, row in runtimes.RUNTIMES.items() if uses_python_venv(row)] == [
        "glue-6.0",
        "glue-6.1",
    ]


def test_glue_venv_is_a_packed_virtual_environment_of_every_pin(pins):
    """As venv-pack packs `python3.13 -m venv` on Amazon Linux 2023 (AWS's venv guide): the venv's
    files, Python linked not packed, every pin and awsglue installed in its site-packages."""
    path = glue_venv_archive(runtime=GLUE_60)
    assert path.name == GLUE_VENV_NAME and path.name.endswith(".tar.gz")
    assert path.read_bytes()[4:8] == b"\0\0\0\0"  # no time in the gzip header: same bytes, same asset
    with tarfile.open(path) as archive:
        members = archive.getmembers()
        config = archive.extractfile("pyvenv.cfg").read().decode()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(315532800, 0, 0, "", "")}
    links = {m.name: m.linkname for m in members if m.issym()}
    assert links == {
        "bin/python3.13": "/usr/bin/python3.13",
        "bin/python": "python3.13",
        "bin/python3": "python3.13",
        "lib64": "lib",
    }
    assert config.splitlines() == [
        "home = /usr/bin",
        "include-system-site-packages = false",
        "version = 3.13",
        "executable = /usr/bin/python3.13",
    ]
    site = "lib/python3.13/site-packages/"
    assert all(
        n.startswith(site) for n in names if n not in links and n not in ("pyvenv.cfg", "bin/activate")
    )
    installed = {n.removeprefix(site).split("/")[0] for n in names if n.startswith(site)}
    dists = {d.split("-")[0] for d in installed if d.endswith(".dist-info")}
    # every pin, the glue-provided ones too (a venv inherits nothing from Glue's image), and awsglue
    assert dists == {p.key.replace("-", "_") for p in pins} | {"awsgluedataplanepython"}
    assert "awsgluedataplanepython-6.0.0.dist-info" in installed and "awsglue" in installed
    assert [n for n in names if n.startswith(f"{site}pydantic_core/_pydantic_core.cpython-313-x86_64")]
    assert not [n for n in names if "pyspark" in n or "py4j" in n]  # Glue's Spark provides them
    assert not [n for n in names if ".data/" in n or n.endswith(".pyc")]


@pytest.mark.slow
def test_artifacts_are_byte_identical_across_builds(tmp_path, monkeypatch):
    """Same inputs, same bytes: the CDK asset hash (and so the deployment) changes only with content."""
    built = []
    for run in ("one", "two"):
        monkeypatch.setattr(packaging, "BUILD_DIR", tmp_path / run)
        built.append(
            [
                glue_wheels_zip(),
                emr_venv_archive(),
                glue_venv_archive(runtime=GLUE_60),
                emr_venv_archive(runtime=GLUE_60),
                lakeloader_zip(),
            ]
        )
    for first, second in zip(*built, strict=True):
        assert first != second and first.read_bytes() == second.read_bytes()


# --- the lakeloader zip: runtime modules only ------------------------------------------------

DEV_ONLY = ("lakeloader_dev", "emulator", "jars.py", "local.py", "demo.py", "tests", "test_", "__pycache__")


def test_lakeloader_zip_holds_only_runtime_modules():
    with zipfile.ZipFile(lakeloader_zip()) as archive:
        names = archive.namelist()
    package = ROOT / "lakeloader"
    modules = [p.relative_to(package).as_posix() for p in package.rglob("*.py")]
    modules = [m for m in modules if "__pycache__/" not in m]
    runtime = sorted(f"lakeloader/{m}" for m in modules if not m.startswith(("cli/", "control/trigger/")))
    assert "lakeloader/jobs/main.py" in names and "lakeloader/control/runtimes.py" in names
    offending = [n for n in names if any(part in n for part in DEV_ONLY) or not n.endswith(".py")]
    assert offending == []
    assert names == runtime


def _imported_modules(source: str, filename: str) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)  # a submodule, maybe
    return modules


def test_no_shipped_module_imports_the_dev_package():
    sources = {}
    with zipfile.ZipFile(lakeloader_zip()) as archive:
        sources.update({n: archive.read(n).decode() for n in archive.namelist() if n.endswith(".py")})
    for folder in ("glue_jobs", "emr_steps"):
        sources.update({f"{folder}/{p.name}": p.read_text() for p in (ROOT / folder).glob("*.py")})
    offending = {
        name: sorted(m for m in _imported_modules(source, name) if m.split(".")[0] == "lakeloader_dev")
        for name, source in sources.items()
    }
    assert {name: mods for name, mods in offending.items() if mods} == {}
    # the developer CLI (left out of the zip) is no job's dependency
    imports = {name: _imported_modules(source, name) for name, source in sources.items()}
    cli = [
        name
        for name, modules in imports.items()
        if any(m.split(".")[:2] == ["lakeloader", "cli"] for m in modules)
    ]
    assert cli == []
    assert len(sources) > 20
