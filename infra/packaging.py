"""Deterministic code packages built at synth time, without Docker.

* `lakeloader_zip()`: the `lakeloader/` package as a zip whose root holds `lakeloader/`
  (Glue `--extra-py-files`, EMR `--py-files`), without the developer CLI. Entries sorted,
  timestamps fixed, no `__pycache__`: the same sources give the same bytes, hence the same
  asset hash.
* Lambda bundles: `infra.lambda_code`, on the helpers here.
* `glue_wheels_zip()` / `glue_venv_archive()` / `emr_venv_archive()`: the jobs' third-party
  dependencies (`requirements-job.txt`) as wheels for a runtime's CPython (lakeloader.runtimes:
  cp311 for glue-5.1, cp313 for glue-6.0) and platform, fetched once per runtime into
  `.lakeloader/wheels/` (`make setup`) and checked there: Glue 5.1's "zip of wheels" (installed
  with `pip --no-index`), Glue 6.0's packed virtual environment (`--python-virtual-env`), and for
  EMR Serverless the same packed virtual environment (without awsglue), which `spark.archives` ships
  as `./environment` and whose `bin/python` runs driver and executors. None needs a package index at
  job start.

Packages are written to `build/cdk-assets/<name>-<content hash>/` and never rewritten
in place, so concurrent synths (tests, the CLI) cannot see a half-written package.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from lakeloader import runtimes

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILD_DIR = REPO_ROOT / "build" / "cdk-assets"
_EXCLUDED_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"}
_EXCLUDED_SUFFIXES = {".pyc", ".pyo"}
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
JOB_REQUIREMENTS = REPO_ROOT / "requirements-job.txt"
WHEEL_CACHE = REPO_ROOT / ".lakeloader" / "wheels"
GLUE_PROVIDED = "glue-provided"
GLUE_WHEELS_SUFFIX = ".gluewheels.zip"  # how Glue tells a zip of wheels from a single wheel's zip
GLUE_WHEELS_NAME = f"lakeloader-deps{GLUE_WHEELS_SUFFIX}"
GLUE_VENV_SUFFIX = ".tar.gz"
GLUE_VENV_NAME = f"lakeloader-venv{GLUE_VENV_SUFFIX}"
EMR_VENV_SUFFIX = ".tar.gz"  # Spark unpacks an archive by its name's ending
EMR_VENV_NAME = f"lakeloader-emr-venv{EMR_VENV_SUFFIX}"


def default_runtime() -> runtimes.Runtime:
    """The runtime a stage runs on when it names none."""
    return runtimes.runtime(runtimes.DEFAULT_RUNTIME)


class PackagingError(RuntimeError):
    """A package's sources are missing."""


def package_files(root: Path) -> list[Path]:
    """Files under `root` that go into a package, sorted, caches excluded."""
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _EXCLUDED_DIRS and not d.endswith(".egg-info"))
        for filename in sorted(filenames):
            path = Path(dirpath) / filename
            if path.suffix not in _EXCLUDED_SUFFIXES:
                files.append(path)
    return sorted(files)


def publish(name: str, digest: str, build: Callable[[Path], None]) -> Path:
    """Build into a temp dir next to the target, then rename it into place (atomic)."""
    target = BUILD_DIR / f"{name}-{digest}"
    if target.exists():
        return target
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=BUILD_DIR))
    try:
        build(tmp)
        for directory in [tmp, *(p for p in tmp.rglob("*") if p.is_dir())]:
            directory.chmod(0o755)  # Lambda runs the code as another user
        try:
            tmp.rename(target)
        except OSError:  # another process published the same content first
            if not target.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


# Not for Glue/EMR: the `lakeloader` command runs on a developer's machine (Spark jars from
# lakeloader_dev), and the trigger runs in the S3-arrival Lambda (with Powertools, which the jobs lack).
NOT_IN_JOB_ZIP = ("cli/", "trigger/")


def lakeloader_zip(source: Path = REPO_ROOT / "lakeloader") -> Path:
    """The `lakeloader` package zipped with `lakeloader/` at the zip's root, local-only modules left out."""
    if not (source / "__init__.py").is_file():
        raise PackagingError(f"{source}: not a Python package (no __init__.py)")
    entries = [
        (f"lakeloader/{p.relative_to(source).as_posix()}", p.read_bytes(), 0o644)
        for p in package_files(source)
        if not p.relative_to(source).as_posix().startswith(NOT_IN_JOB_ZIP)
    ]
    return publish_zip("lakeloader-zip", "lakeloader.zip", entries)


Entry = tuple[str, bytes, int]  # (name in the package, content, file mode)


def entries_digest(entries: Iterable[Entry]) -> str:
    sha = hashlib.sha256()
    for name, data, mode in sorted(entries):
        sha.update(f"{name}\0{mode:o}\0".encode() + hashlib.sha256(data).digest())
    return sha.hexdigest()[:16]


def publish_zip(name: str, filename: str, entries: list[Entry]) -> Path:
    """A deterministic zip of `entries` (sorted by name, fixed timestamps), published as `name`."""

    def build(out: Path) -> None:
        with zipfile.ZipFile(out / filename, "w") as archive:
            for entry_name, data, mode in sorted(entries):
                info = zipfile.ZipInfo(entry_name, date_time=_ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = (0o100000 | mode) << 16
                info.create_system = 3
                archive.writestr(info, data)

    return publish(name, entries_digest(entries), build) / filename


# --- third-party dependencies of the jobs ------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    """One `name==version` line of requirements-job.txt."""

    name: str
    version: str
    glue_provided: bool

    @property
    def key(self) -> str:
        """The name as PEP 503 normalises it (`PyYAML` -> `pyyaml`), wheel file names included."""
        return canonical_name(self.name)

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


def canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_PIN_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")


def job_pins(path: Path = JOB_REQUIREMENTS) -> list[Pin]:
    """The pins of `path`; any line that is not an exact `name==version` pin is an error."""
    if not path.is_file():
        raise PackagingError(f"{path}: not found (the pinned runtime dependencies)")
    pins: dict[str, Pin] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line, _, comment = raw.partition("#")
        line = line.strip()
        if not line:
            continue
        match = _PIN_LINE.match(line)
        if not match:
            raise PackagingError(f"{path}:{number}: {line!r} is not an exact pin (name==version)")
        pin = Pin(match[1], match[2], glue_provided=comment.strip() == GLUE_PROVIDED)
        if pin.key in pins:
            raise PackagingError(f"{path}:{number}: {pin.name} is pinned twice")
        pins[pin.key] = pin
    if not pins:
        raise PackagingError(f"{path}: no pins")
    return sorted(pins.values(), key=lambda p: p.key)


_WHEEL_NAME = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-(?P<python>[^-]+)-(?P<abi>[^-]+)-(?P<platform>[^-]+)\.whl$"
)


def _manylinux_glibc(tag: str) -> tuple[int, int] | None:
    """The glibc a manylinux x86_64 platform tag needs, None for any other tag."""
    legacy = {"manylinux1_x86_64": (2, 5), "manylinux2010_x86_64": (2, 12), "manylinux2014_x86_64": (2, 17)}
    if tag in legacy:
        return legacy[tag]
    match = re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", tag)
    return (int(match[1]), int(match[2])) if match else None


def check_wheel(filename: str, pin: Pin, runtime: runtimes.Runtime | None = None) -> None:
    """Fail unless `filename` is `pin`'s wheel and runs on the runtime's CPython and platform."""
    match = _WHEEL_NAME.match(filename)
    if not match:
        raise PackagingError(f"{filename}: not a wheel file name")
    if canonical_name(match["name"]) != pin.key or match["version"] != pin.version:
        raise PackagingError(f"{filename}: not the wheel of {pin}")
    python = (runtime or default_runtime()).wheel_python_tag  # cp311, cp313
    minor = int(python[3:])
    abis = match["abi"].split(".")
    pythons = match["python"].split(".")
    python_ok = any(
        tag in (python, "py3", f"py{python[2:]}")
        or ("abi3" in abis and tag.startswith("cp3") and int(tag[3:]) <= minor)
        for tag in pythons
    )
    abi_ok = any(abi in (python, "abi3", "none") for abi in abis)
    target = _manylinux_glibc(runtimes.WHEEL_PLATFORM)
    platform_ok = any(
        tag == "any" or ((glibc := _manylinux_glibc(tag)) is not None and target and glibc <= target)
        for tag in match["platform"].split(".")
    )
    if not (python_ok and abi_ok and platform_ok):
        raise PackagingError(
            f"{filename}: {pin} has no wheel for {python} on {runtimes.WHEEL_PLATFORM} "
            f"(python, abi and platform tags: {match['python']}, {match['abi']}, {match['platform']})"
        )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_sums(folder: Path) -> dict[str, str]:
    sums = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        digest, _, name = line.partition("  ")
        sums[name] = digest
    return sums


def _verified_wheels(folder: Path, pins: list[Pin], runtime: runtimes.Runtime) -> dict[str, Path]:
    """Pin key -> wheel in `folder`, each matching its pin, the runtime's tags and its recorded sha256."""
    sums = read_sums(folder)
    wheels: dict[str, Path] = {}
    for path in sorted(folder.glob("*.whl")):
        key = canonical_name(path.name.split("-", 1)[0])
        pin = next((p for p in pins if p.key == key), None)
        if pin is None:
            raise PackagingError(f"{path}: no pin in {JOB_REQUIREMENTS.name} asks for it")
        check_wheel(path.name, pin, runtime)
        if sums.get(path.name) != sha256(path):
            raise PackagingError(f"{path}: sha256 differs from {folder / 'SHA256SUMS'}; delete {folder}")
        wheels[key] = path
    missing = [str(p) for p in pins if p.key not in wheels]
    if missing:
        raise PackagingError(f"{folder}: no wheel for {', '.join(missing)}")
    return wheels


def wheel_cache_dir(cache: Path, platform: str, pins: list[Pin]) -> Path:
    """Where the wheels of one pin set for one platform are cached."""
    key = hashlib.sha256("\n".join([platform, *map(str, pins)]).encode()).hexdigest()[:16]
    return cache / f"{platform}-{key}"


def pip_download(requirements: Path, dest: Path, options: list[str], pins: list[Pin]) -> None:
    """`pip download` binary wheels of `pins` (from `requirements`) into `dest`, with `options`."""
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
        "--only-binary=:all:", "--implementation", "cp", *options, "--dest", str(dest), *map(str, pins),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = done.stderr.splitlines()
        errors = [line for line in lines if "ERROR" in line] or lines
        raise PackagingError(
            f"{requirements.name}: pip could not fetch the wheels ({' '.join(options)}; "
            f"`make setup` fetches them while PyPI is reachable): " + " ".join(errors[-3:])
        )


def cached_download(target: Path, download: Callable[[Path], None], verify: Callable[[Path], T]) -> T:
    """`verify(target)`; the first time, `download` into a temp dir that becomes `target` once verified.

    Each wheel's sha256 is recorded in `SHA256SUMS` and checked on every use.
    """
    if (target / "SHA256SUMS").is_file():
        return verify(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".download-", dir=target.parent))
    try:
        download(tmp)
        sums = "".join(f"{sha256(p)}  {p.name}\n" for p in sorted(tmp.glob("*.whl")))
        (tmp / "SHA256SUMS").write_text(sums)
        verify(tmp)
        try:
            tmp.rename(target)
        except OSError:  # another process cached the same pins first
            if not (target / "SHA256SUMS").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return verify(target)


def fetch_wheels(
    pins: list[Pin] | None = None, cache: Path = WHEEL_CACHE, runtime: runtimes.Runtime | None = None
) -> dict[str, Path]:
    """The pinned wheels for the runtime's CPython, downloaded once per pin set and runtime, then read
    from the cache (keyed by the runtime's wheel tag and platform: cp311-..., cp313-...).

    `pip download --no-deps` fetches exactly the pins (requirements-job.txt pins every transitive
    dependency); each wheel's tags are checked.
    """
    pins = job_pins() if pins is None else pins
    runtime = runtime or default_runtime()
    platform = f"{runtime.wheel_python_tag}-{runtimes.WHEEL_PLATFORM}"
    options = ["--no-deps", "--platform", runtimes.WHEEL_PLATFORM, "--python-version", runtime.python]
    return cached_download(
        wheel_cache_dir(cache, platform, pins),
        lambda dest: pip_download(JOB_REQUIREMENTS, dest, options, pins),
        lambda folder: _verified_wheels(folder, pins, runtime),
    )


def glue_wheels_zip(pins: list[Pin] | None = None, runtime: runtimes.Runtime | None = None) -> Path:
    """Glue's zip of wheels: `wheels/requirements.txt` plus `wheels/*.whl`, Glue-provided pins left out.

    The layout of AWS Glue's "Creating a Zip of Wheels artifact"; Glue installs it with
    `pip install --no-index`, so the requirements name only what the zip holds. (Glue 5.x; 6.0 takes
    glue_venv_archive.)
    """
    pins = job_pins() if pins is None else pins
    wheels = fetch_wheels(pins, runtime=runtime)
    shipped = [p for p in pins if not p.glue_provided]
    requirements = "".join(f"{p}\n" for p in shipped).encode()
    entries = [("wheels/requirements.txt", requirements, 0o644)]
    entries += [(f"wheels/{wheels[p.key].name}", wheels[p.key].read_bytes(), 0o644) for p in shipped]
    return publish_zip("glue-wheels", GLUE_WHEELS_NAME, entries)


# The first Glue version whose jobs take a packed virtual environment (--python-virtual-env) in place
# of --additional-python-modules, deprecated there ("Migrating AWS Glue for Spark jobs to AWS Glue
# version 6.0"). 5.x keeps the zip of wheels: it works there, on top of Glue's own boto3.
GLUE_VENV_VERSION = (6, 0)


def uses_python_venv(runtime: runtimes.Runtime) -> bool:
    """Does the runtime's Glue get the jobs' dependencies as a virtual environment (6.0+)?"""
    return tuple(int(part) for part in runtime.glue_version.split(".")) >= GLUE_VENV_VERSION


# AWS Glue's own Python library (awsglue: getResolvedOptions, which glue_jobs/*.py use) as a wheel, per
# Glue version: a venv replaces Glue's Python environment, so it must carry it ("Using Python virtual
# environments with AWS Glue", step 1).
GLUE_DATAPLANE = {"5.0": "5.0.0", "5.1": "5.1.0", "6.0": "6.0.0"}
# Where the Glue venv's interpreter links to: AWS builds the venv on Amazon Linux 2023 with
# `dnf install python3.13` and `python3.13 -m venv` (same guide, steps 2 and 5), so its bin/python3.13
# is a link to /usr/bin/python3.13, the interpreter Glue 6.0 runs the venv with.
GLUE_PYTHON_HOME = "/usr/bin"


def glue_dataplane_pin(runtime: runtimes.Runtime) -> Pin:
    if runtime.glue_version not in GLUE_DATAPLANE:
        raise PackagingError(
            f"runtime {runtime.name}: no AWSGlueDataplanePython version for Glue {runtime.glue_version} "
            "in infra.packaging.GLUE_DATAPLANE (AWS's venv guide lists them)"
        )
    return Pin("AWSGlueDataplanePython", GLUE_DATAPLANE[runtime.glue_version], glue_provided=False)


# A relocatable `activate` (as venv-pack writes one): the environment is the folder above bin/.
_ACTIVATE = """\
# Source this file from bash or zsh: puts this packed environment's bin/ first on PATH.
_lakeloader_here="${BASH_SOURCE[0]:-${(%):-%x}}"
VIRTUAL_ENV="$(cd "$(dirname "$_lakeloader_here")/.." && pwd)"
export VIRTUAL_ENV
PATH="$VIRTUAL_ENV/bin:$PATH"
export PATH
unset PYTHONHOME _lakeloader_here
"""


def glue_venv_archive(pins: list[Pin] | None = None, runtime: runtimes.Runtime | None = None) -> Path:
    """Glue 6.0's `--python-virtual-env`: a virtual environment of every pin plus AWSGlueDataplanePython,
    packed as `venv-pack` packs one (a .tar.gz of the venv's folder), built here without Docker.

    AWS's guide builds it in an Amazon Linux 2023 container with `python3.13 -m venv`, `pip install`
    and `venv-pack`. What that produces is the venv's files: `pyvenv.cfg` (home /usr/bin),
    `bin/python3.13` a link to /usr/bin/python3.13 (venv-pack keeps it: Python is not packed, the
    target has it), `bin/python`, `bin/python3` links to it, `lib64` a link to `lib`, and every wheel
    installed into `lib/python3.13/site-packages`. Installing a wheel into site-packages is unpacking
    it (`.data/purelib|platlib` merged into the root; scripts are not needed): the wheels are the
    runtime's cp313 manylinux2014_x86_64 ones, the platform AWS's guide asks for, so nothing is built
    and the container adds nothing. Nothing is inherited from Glue's image (no boto3): the pins
    marked glue-provided are packed too, as the guide requires.
    """
    runtime = runtime or default_runtime()
    return packed_venv("glue-venv", GLUE_VENV_NAME, pins, runtime, extra=[glue_dataplane_pin(runtime)])


def emr_venv_archive(pins: list[Pin] | None = None, runtime: runtimes.Runtime | None = None) -> Path:
    """EMR Serverless's Python dependencies: the same packed virtual environment as Glue 6.0's, without
    AWS Glue's own library (EMR runs no awsglue), for either runtime (cp311 for emr-7.12.0, cp313 for
    emr-spark-8.1.0).

    AWS's "Using Python libraries with EMR Serverless" packs a venv with `venv-pack` on Amazon Linux
    and ships it as `spark.archives=s3://...#environment`, with the driver's and the executors'
    `PYSPARK_PYTHON` at `./environment/bin/python` (infra.emr.emr_venv_conf). Its `bin/python` links
    to the image's interpreter of the runtime's Python (/usr/bin/python3.11, /usr/bin/python3.13), as
    `python3.x -m venv` on the image's Amazon Linux makes it.
    """
    runtime = runtime or default_runtime()
    return packed_venv("emr-venv", EMR_VENV_NAME, pins, runtime, extra=[])


def packed_venv(
    name: str, filename: str, pins: list[Pin] | None, runtime: runtimes.Runtime, extra: list[Pin]
) -> Path:
    """A virtual environment of `pins` and `extra` for `runtime`'s CPython, packed as venv-pack packs one."""
    pins = job_pins() if pins is None else pins
    wheels = fetch_wheels(pins, runtime=runtime)
    if extra:
        wheels |= fetch_wheels(extra, runtime=runtime)
    python = f"python{runtime.python}"
    site = f"lib/{python}/site-packages/"
    installed = installed_tree([*pins, *extra], wheels)
    entries = [(f"{site}{entry}", data, mode) for entry, data, mode in installed]
    config = (
        f"home = {GLUE_PYTHON_HOME}\ninclude-system-site-packages = false\nversion = {runtime.python}\n"
        f"executable = {GLUE_PYTHON_HOME}/{python}\n"
    )
    entries += [("pyvenv.cfg", config.encode(), 0o644), ("bin/activate", _ACTIVATE.encode(), 0o644)]
    links = [
        (f"bin/{python}", f"{GLUE_PYTHON_HOME}/{python}"),
        ("bin/python", python),
        ("bin/python3", python),
        ("lib64", "lib"),
    ]
    return publish_tar_gz(name, filename, entries, links)


def publish_tar_gz(name: str, filename: str, entries: list[Entry], links: list[tuple[str, str]]) -> Path:
    """A deterministic .tar.gz of `entries` and symbolic `links` (name, target): sorted, fixed
    timestamps and owners, no name or time in the gzip header; published as `name`."""
    digest = entries_digest([*entries, *((n, f"-> {t}".encode(), 0o777) for n, t in links)])

    def build(out: Path) -> None:
        members: list[tuple[tarfile.TarInfo, bytes | None]] = []
        for entry_name, data, mode in entries:
            info = tarfile.TarInfo(entry_name)
            info.size, info.mode = len(data), mode
            members.append((info, data))
        for link_name, target in links:
            info = tarfile.TarInfo(link_name)
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
            members.append((info, None))
        with (
            open(out / filename, "wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as packed,
            tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as archive,
        ):
            for info, data in sorted(members, key=lambda member: member[0].name):
                info.mtime = _TAR_DATE
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                archive.addfile(info, io.BytesIO(data) if data is not None else None)

    return publish(name, digest, build) / filename


_TAR_DATE = 315532800  # 1980-01-01, as the zips' entries


def installed_entries(wheel: Path) -> Iterable[Entry]:
    """What installing `wheel` into a site-packages directory writes there (scripts, headers left out)."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            name = info.filename
            top, _, rest = name.partition("/")
            if top.endswith(".data"):
                scheme, _, rest = rest.partition("/")
                if scheme not in ("purelib", "platlib"):
                    continue  # console scripts and headers: nothing on PYTHONPATH uses them
                name = rest
            mode = (info.external_attr >> 16) & 0o777 or 0o644
            yield name, archive.read(info), mode


def installed_tree(pins: list[Pin], wheels: dict[str, Path]) -> list[Entry]:
    """Every pin's wheel installed into one site-packages directory, as entries relative to it."""
    entries: dict[str, Entry] = {}
    owners: dict[str, str] = {}
    for pin in pins:
        for name, data, mode in installed_entries(wheels[pin.key]):
            if name in owners:
                raise PackagingError(f"{name}: shipped by both {owners[name]} and {pin}")
            owners[name] = str(pin)
            entries[name] = (name, data, mode)
    return list(entries.values())
