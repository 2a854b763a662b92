"""What ships to Glue/EMR: the pinned dependency set, its wheels, and the zips built from them.

Offline once `make setup` has filled `.lakeloader/wheels/`. The install-and-import check of the
built artifacts in fresh virtual environments lives in test_packaging_bundle.py.
"""

from __future__ import annotations

import ast
import importlib.metadata
import shutil
import zipfile
from pathlib import Path

import pytest

import infra.packaging as packaging
from infra.packaging import (
    GLUE_WHEELS_NAME,
    PackagingError,
    Pin,
    check_wheel,
    emr_deps_archive,
    fetch_wheels,
    glue_wheels_zip,
    job_pins,
    lakeloader_zip,
)
from tests.unit.job_target import unmet

ROOT = Path(__file__).resolve().parents[2]
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
        if "==" in line:
            name, version = line.split("==", 1)
            found[packaging.canonical_name(name)] = version
    return found


def test_requirements_txt_installs_the_shipped_versions(pins):
    """Every runtime pin of requirements.txt but Spark (the runtimes provide it) ships at that version."""
    shipped = {p.key: p.version for p in pins}
    local = _pins_of(ROOT / "requirements.txt")
    local.pop("pyspark")
    assert {name: shipped.get(name) for name in local} == local
    assert "-c requirements-job.txt" in (ROOT / "requirements.txt").read_text().splitlines()


def test_local_venv_runs_the_shipped_versions(pins):
    installed = {p.name: importlib.metadata.version(p.name) for p in pins}
    assert installed == {p.name: p.version for p in pins}


def test_every_transitive_dependency_is_pinned_and_satisfied(pins):
    pinned = {p.key: p.version for p in pins}
    problems = []
    for pin in pins:
        problems += unmet(str(pin), importlib.metadata.requires(pin.name) or [], pinned)
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
    "filename",
    [
        "pydantic_core-2.46.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "pydantic_core-2.46.4-cp38-abi3-manylinux2014_x86_64.whl",
        "pydantic_core-2.46.4-py3-none-any.whl",
    ],
)
def test_check_wheel_accepts_the_runtimes_wheels(filename):
    check_wheel(filename, Pin("pydantic-core", "2.46.4", False))


@pytest.mark.parametrize(
    ("filename", "message"),
    [
        ("pydantic_core-2.46.4-cp312-cp312-manylinux2014_x86_64.whl", "no wheel for cp311"),
        ("pydantic_core-2.46.4-cp311-cp311-macosx_11_0_arm64.whl", "no wheel for cp311"),
        ("pydantic_core-2.46.4-cp311-cp311-manylinux_2_34_x86_64.whl", "no wheel for cp311"),
        ("pydantic_core-2.46.4-cp311-cp311-musllinux_1_2_x86_64.whl", "no wheel for cp311"),
        ("pydantic_core-2.46.3-cp311-cp311-manylinux2014_x86_64.whl", "not the wheel of pydantic-core=="),
        ("pydantic_core-2.46.4.tar.gz", "not a wheel file name"),
    ],
)
def test_check_wheel_refuses_other_platforms_and_versions(filename, message):
    with pytest.raises(PackagingError, match=message):
        check_wheel(filename, Pin("pydantic-core", "2.46.4", False))


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


def test_emr_archive_is_an_installed_site_packages_tree():
    with zipfile.ZipFile(emr_deps_archive()) as archive:
        names = archive.namelist()
    assert names == sorted(names)
    for expected in ("pydantic/__init__.py", "yaml/__init__.py", "boto3/__init__.py", "six.py"):
        assert expected in names
    assert [n for n in names if n.startswith("pydantic_core/_pydantic_core.cpython-311-x86_64")]
    assert "pydantic-2.13.4.dist-info/METADATA" in names
    assert not [n for n in names if ".data/" in n or n.startswith("bin/") or n.endswith(".pyc")]


@pytest.mark.slow
def test_artifacts_are_byte_identical_across_builds(tmp_path, monkeypatch):
    """Same inputs, same bytes: the CDK asset hash (and so the deployment) changes only with content."""
    built = []
    for run in ("one", "two"):
        monkeypatch.setattr(packaging, "BUILD_DIR", tmp_path / run)
        built.append([glue_wheels_zip(), emr_deps_archive(), lakeloader_zip()])
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
    runtime = sorted(f"lakeloader/{m}" for m in modules if not m.startswith(("cli/", "trigger/")))
    assert "lakeloader/jobs/main.py" in names and "lakeloader/runtimes.py" in names
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
