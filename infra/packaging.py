"""Deterministic code packages built at synth time, without Docker.

* `lakeloader_zip()`: the `lakeloader/` package as a zip whose root holds `lakeloader/`
  (Glue `--extra-py-files`, EMR `--py-files`). Entries sorted, timestamps fixed, no
  `__pycache__`: the same sources give the same bytes, hence the same asset hash.
* `lambda_bundle()`: a Lambda folder (the handler at its root) plus copies of the named
  pure-Python `lakeloader` modules under `lakeloader/`.

Packages are written to `build/cdk-assets/<name>-<content hash>/` and never rewritten
in place, so concurrent synths (tests, the CLI) cannot see a half-written package.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILD_DIR = REPO_ROOT / "build" / "cdk-assets"
_EXCLUDED_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"}
_EXCLUDED_SUFFIXES = {".pyc", ".pyo"}
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


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


def _digest(entries: Iterable[tuple[str, Path]]) -> str:
    sha = hashlib.sha256()
    for name, path in entries:
        sha.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return sha.hexdigest()[:16]


def _publish(name: str, digest: str, build: Callable[[Path], None]) -> Path:
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


def lakeloader_zip(source: Path = REPO_ROOT / "lakeloader") -> Path:
    """The `lakeloader` package zipped with `lakeloader/` at the zip's root."""
    if not (source / "__init__.py").is_file():
        raise PackagingError(f"{source}: not a Python package (no __init__.py)")
    entries = [(f"lakeloader/{p.relative_to(source).as_posix()}", p) for p in package_files(source)]

    def build(out: Path) -> None:
        with zipfile.ZipFile(out / "lakeloader.zip", "w") as archive:
            for name, path in entries:
                info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o100644 << 16
                info.create_system = 3
                archive.writestr(info, path.read_bytes())

    return _publish("lakeloader-zip", _digest(entries), build) / "lakeloader.zip"


def lambda_bundle(
    name: str,
    handler_dir: Path,
    modules: Iterable[str],
    *,
    package_root: Path = REPO_ROOT / "lakeloader",
) -> tuple[Path, list[str]]:
    """A folder holding `handler_dir`'s files plus `lakeloader/<module>` for each module.

    Returns the folder and the modules that do not exist (left out; the caller warns).
    """
    if not handler_dir.is_dir():
        raise PackagingError(f"{handler_dir}: Lambda source folder not found")
    entries = [(p.relative_to(handler_dir).as_posix(), p) for p in package_files(handler_dir)]
    entries = [(n, p) for n, p in entries if not n.startswith(("tests/", "test_"))]
    missing = []
    for module in modules:
        path = package_root / module
        if path.is_file():
            entries.append((f"lakeloader/{module}", path))
        else:
            missing.append(module)
    entries.sort()

    def build(out: Path) -> None:
        for rel, path in entries:
            dest = out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(path.read_bytes())
            dest.chmod(0o644)

    return _publish(name, _digest(entries), build), missing


GLUE_EXTRA_REQUIREMENTS = ("pydantic", "PyYAML")


def pinned_requirements(names: Iterable[str], path: Path = REPO_ROOT / "requirements.txt") -> str:
    """`name==version,...` for the named packages, as pinned in requirements.txt (Glue's format)."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = (part.strip() for part in line.split("==", 1))
            pins[name.lower()] = f"{name}=={version}"
    missing = [n for n in names if n.lower() not in pins]
    if missing:
        raise PackagingError(f"{path}: no exact pin (name==version) for {', '.join(missing)}")
    return ",".join(pins[n.lower()] for n in names)
