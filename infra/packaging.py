"""Deterministic code packages built at synth time, without Docker.

* `lakeloader_zip()`: the `lakeloader/` package as a zip whose root holds `lakeloader/`
  (Glue `--extra-py-files`, EMR `--py-files`), without the developer CLI. Entries sorted,
  timestamps fixed, no `__pycache__`: the same sources give the same bytes, hence the same
  asset hash.
* Lambda bundles: `infra.lambda_code`, on the helpers here.
* `glue_wheels_zip()` / `glue_venv_archive()` / `emr_venv_archive()` (the last two in
  `infra.packed_venv`, on the wheels fetched here): the jobs' third-party
  dependencies (`requirements-job.txt`) as wheels for a runtime's CPython (lakeloader.control.runtimes:
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

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from lakeloader.control import runtimes

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


# Not for Glue/EMR: the `lakeloader` command runs on a developer's machine (Spark jars from the
# development package), and the trigger runs in the S3-arrival Lambda (with Powertools, which the jobs lack).
NOT_IN_JOB_ZIP = ("cli/", "control/trigger/")


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


def _manylinux(tag: str) -> tuple[tuple[int, int], str] | None:
    """The glibc and CPU a manylinux platform tag needs (`manylinux2014_aarch64`: (2, 17), aarch64),
    None for any other tag."""
    legacy = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
    match = re.fullmatch(
        r"(manylinux1|manylinux2010|manylinux2014|manylinux_(\d+)_(\d+))_(x86_64|aarch64)",
        tag,
    )
    if not match:
        return None
    glibc = legacy.get(match[1]) or (int(match[2]), int(match[3]))
    return glibc, match[4]


def _runs_on(tag: str, platform: str) -> bool:
    """Does a wheel of platform `tag` run where `platform` is (same CPU, no newer glibc)?"""
    found, target = _manylinux(tag), _manylinux(platform)
    return found is not None and target is not None and found[1] == target[1] and found[0] <= target[0]


def check_wheel(
    filename: str, pin: Pin, runtime: runtimes.Runtime | None = None, architecture: str = runtimes.X86_64
) -> None:
    """Fail unless `filename` is `pin`'s wheel and runs on the runtime's CPython and the workers' CPU."""
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
    platform = runtimes.WHEEL_PLATFORMS[architecture]
    platform_ok = any(tag == "any" or _runs_on(tag, platform) for tag in match["platform"].split("."))
    if not (python_ok and abi_ok and platform_ok):
        raise PackagingError(
            f"{filename}: {pin} has no wheel for {python} on {platform} "
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


def _verified_wheels(
    folder: Path, pins: list[Pin], runtime: runtimes.Runtime, architecture: str
) -> dict[str, Path]:
    """Pin key -> wheel in `folder`, each matching its pin, the runtime's and CPU's tags and its sha256."""
    sums = read_sums(folder)
    wheels: dict[str, Path] = {}
    for path in sorted(folder.glob("*.whl")):
        key = canonical_name(path.name.split("-", 1)[0])
        pin = next((p for p in pins if p.key == key), None)
        if pin is None:
            raise PackagingError(f"{path}: no pin in {JOB_REQUIREMENTS.name} asks for it")
        check_wheel(path.name, pin, runtime, architecture)
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
    pins: list[Pin] | None = None,
    cache: Path = WHEEL_CACHE,
    runtime: runtimes.Runtime | None = None,
    architecture: str = runtimes.X86_64,
    ignore_requires_python: bool = False,
) -> dict[str, Path]:
    """The pinned wheels for the runtime's CPython on the workers' CPU (x86_64, or aarch64 for Graviton),
    downloaded once per pin set, runtime and CPU, then read from the cache (keyed by the runtime's wheel
    tag and platform: cp311-manylinux2014_x86_64-..., cp314-manylinux2014_aarch64-...).

    `pip download --no-deps --platform` fetches exactly the pins (requirements-job.txt pins every
    transitive dependency) for that platform, whatever this machine's CPU: no emulation, no Docker. Each
    wheel's tags are checked. `ignore_requires_python`: a pure-Python pin whose metadata predates the
    runtime's Python (infra.packed_venv.GLUE_DATAPLANE says which).
    """
    pins = job_pins() if pins is None else pins
    runtime = runtime or default_runtime()
    wheel_platform = runtimes.WHEEL_PLATFORMS[architecture]
    platform = f"{runtime.wheel_python_tag}-{wheel_platform}"
    options = ["--no-deps", "--platform", wheel_platform, "--python-version", runtime.python]
    options += ["--ignore-requires-python"] if ignore_requires_python else []
    return cached_download(
        wheel_cache_dir(cache, platform, pins),
        lambda dest: pip_download(JOB_REQUIREMENTS, dest, options, pins),
        lambda folder: _verified_wheels(folder, pins, runtime, architecture),
    )


def glue_wheels_zip(pins: list[Pin] | None = None, runtime: runtimes.Runtime | None = None) -> Path:
    """Glue's zip of wheels: `wheels/requirements.txt` plus `wheels/*.whl`, Glue-provided pins left out.

    The layout of AWS Glue's "Creating a Zip of Wheels artifact"; Glue installs it with
    `pip install --no-index`, so the requirements name only what the zip holds. (Glue 5.x; 6.0 takes
    infra.packed_venv.glue_venv_archive.)
    """
    pins = job_pins() if pins is None else pins
    wheels = fetch_wheels(pins, runtime=runtime)
    shipped = [p for p in pins if not p.glue_provided]
    requirements = "".join(f"{p}\n" for p in shipped).encode()
    entries = [("wheels/requirements.txt", requirements, 0o644)]
    entries += [(f"wheels/{wheels[p.key].name}", wheels[p.key].read_bytes(), 0o644) for p in shipped]
    return publish_zip("glue-wheels", GLUE_WHEELS_NAME, entries)


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
