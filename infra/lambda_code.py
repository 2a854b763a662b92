"""What a Lambda function's code asset holds, built at synth without Docker or a package index.

A bundle is the handler folder (the handler at its root), `lakeloader/__init__.py` and the whole of
`lakeloader/control/` (the Lambda side of lakeloader, which imports nothing else of it), and the wheels
of `requirements-lambda.txt` (aws-lambda-powertools) unpacked at its root. The bundle's imports are read
(with `ast`: every `import`/`from ... import`, relative ones and those inside functions included) only
to check them: the Lambda runtime has the standard library, boto3 and botocore and nothing else, so an
import of a lakeloader module outside `lakeloader/control/`, or of anything else the bundle does not
ship, fails the synth naming the module and the file that imports it, instead of failing the
function's first invocation.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from infra.packaging import (
    REPO_ROOT,
    WHEEL_CACHE,
    Entry,
    PackagingError,
    Pin,
    cached_download,
    canonical_name,
    entries_digest,
    installed_entries,
    job_pins,
    package_files,
    pip_download,
    publish,
    read_sums,
    sha256,
    wheel_cache_dir,
)

LAMBDA_REQUIREMENTS = REPO_ROOT / "requirements-lambda.txt"
# The runtime of every lakeloader function (infra.functions): Python 3.12 on arm64.
LAMBDA_PYTHON = "3.12"
LAMBDA_PLATFORM = "manylinux2014_aarch64"
# Besides the standard library, the Python runtimes ship the AWS SDK (boto3, botocore).
RUNTIME_PROVIDED = frozenset({"boto3", "botocore"})
# Never shipped to Lambda, whatever imports them: the config model (pydantic, YAML) and Spark (the jobs
# only). A bundle importing one fails the synth, saying why.
NOT_ON_LAMBDA = {
    "lakeloader.config": "the pydantic config model (validated at synth, not on Lambda)",
    "pydantic": "no pydantic on Lambda",
    "yaml": "no PyYAML on Lambda",
    "pyspark": "Spark runs in the Glue/EMR jobs only",
}
PACKAGE = "lakeloader"
# The one folder of `lakeloader` a Lambda bundle ships (docs/architecture.md, "Layers").
CONTROL = "control"


@dataclass(frozen=True)
class Import:
    """One module an import statement names, and where the statement is.

    `maybe` marks `b` of `from a import b`: a submodule if there is one, else a name in `a`.
    """

    module: str
    file: Path
    line: int
    maybe: bool = False

    def where(self) -> str:
        path = self.file.relative_to(REPO_ROOT) if self.file.is_relative_to(REPO_ROOT) else self.file
        return f"{path}:{self.line}"


def _is_type_checking(test: ast.expr) -> bool:
    """`TYPE_CHECKING` or `typing.TYPE_CHECKING`: false whenever the code runs."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, in functions too, except under `if TYPE_CHECKING:` (never run)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from _statements(ast.Module(body=[child], type_ignores=[]))
        else:
            yield from _statements(node)


def imports_of(path: Path, package_root: Path) -> list[Import]:
    """The modules `path` imports, relative imports resolved against its place in the package."""
    here = None  # the package a relative import starts from
    if path.is_relative_to(package_root):
        parts = [PACKAGE, *path.relative_to(package_root).with_suffix("").parts]
        here = parts[:-1]  # `pkg/mod.py` and `pkg/__init__.py` both resolve from `pkg`
    found = []
    for node in _statements(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [Import(alias.name, path, node.lineno) for alias in node.names]
            continue
        base = node.module or ""
        if node.level:
            if here is None or node.level > len(here):
                raise PackagingError(f"{path}:{node.lineno}: relative import outside the {PACKAGE} package")
            base = ".".join([*here[: len(here) - node.level + 1], *([base] if base else [])])
        found.append(Import(base, path, node.lineno))
        found += [
            Import(f"{base}.{a.name}", path, node.lineno, maybe=True) for a in node.names if a.name != "*"
        ]
    return found


def _source(module: str, package_root: Path) -> Path | None:
    """The file of a `lakeloader` module or package, None if there is none."""
    relative = module.split(".")[1:]
    package = package_root.joinpath(*relative, "__init__.py")
    if package.is_file():
        return package
    if relative and (file := package_root.joinpath(*relative[:-1], f"{relative[-1]}.py")).is_file():
        return file
    return None


def _refuse(found: Import) -> None:
    for banned, why in NOT_ON_LAMBDA.items():
        if found.module == banned or found.module.startswith(banned + "."):
            raise PackagingError(
                f"{found.where()}: imports {found.module}, which a Lambda bundle must not ship ({why})"
            )


def external_imports(files: list[Path], handler_dir: Path, package_root: Path) -> list[Import]:
    """The modules that `files` (the handler folder's and the control folder's) import from outside
    `lakeloader` and the handler folder.

    Raises PackagingError naming the importing file for a `lakeloader` module outside
    `lakeloader.control`, one that does not exist, or one that must not ship (NOT_ON_LAMBDA).
    """
    local = {p.stem for p in handler_dir.iterdir()}  # the folder's own modules and packages
    control = f"{PACKAGE}.{CONTROL}"
    external: list[Import] = []
    for path in files:
        for found in imports_of(path, package_root):
            _refuse(found)
            parts = found.module.split(".")
            if parts[0] != PACKAGE:
                if parts[0] not in local and not found.maybe:
                    external.append(found)
                continue
            if found.module == PACKAGE or (found.maybe and _source(found.module, package_root) is None):
                continue  # the package itself, or a name imported from a module
            if not (found.module == control or found.module.startswith(control + ".")):
                raise PackagingError(
                    f"{found.where()}: imports {found.module}, outside {control}, the one folder of "
                    f"{PACKAGE} a Lambda bundle ships"
                )
            for depth in range(2, len(parts) + 1):
                if _source(".".join(parts[:depth]), package_root) is None:
                    missing = (
                        "a folder without __init__.py"
                        if package_root.joinpath(*parts[1:depth]).is_dir()
                        else "which does not exist"
                    )
                    raise PackagingError(f"{found.where()}: imports {'.'.join(parts[:depth])}, {missing}")
    return external


# --- the wheels of requirements-lambda.txt -----------------------------------------------------


def _cache_dir(cache: Path, pins: list[Pin]) -> Path:
    return wheel_cache_dir(cache, f"lambda-cp{LAMBDA_PYTHON.replace('.', '')}-{LAMBDA_PLATFORM}", pins)


def _pure_wheels(folder: Path, pins: list[Pin]) -> list[Path]:
    """The wheels in `folder`, each pure Python and as recorded in SHA256SUMS, every pin among them."""
    sums = read_sums(folder)
    wheels = sorted(folder.glob("*.whl"))
    if sorted(sums) != [w.name for w in wheels]:
        raise PackagingError(
            f"{folder}: the wheels differ from SHA256SUMS; delete {folder} and run `make setup`"
        )
    for wheel in wheels:
        if not wheel.name.endswith("-none-any.whl"):
            raise PackagingError(
                f"{wheel.name}: not a pure-Python wheel; Lambda bundles are built without Docker, so "
                f"{LAMBDA_REQUIREMENTS.name} can only hold pure-Python packages"
            )
        if sums[wheel.name] != sha256(wheel):
            raise PackagingError(
                f"{wheel}: sha256 differs from SHA256SUMS; delete {folder} and run `make setup`"
            )
    versions = {canonical_name(w.name.split("-")[0]): w.name.split("-")[1] for w in wheels}
    for pin in pins:
        if versions.get(pin.key) != pin.version:
            raise PackagingError(f"{folder}: no wheel of {pin}; delete {folder} and run `make setup`")
    return wheels


def fetch_lambda_wheels(cache: Path = WHEEL_CACHE) -> list[Path]:
    """Download the pins of requirements-lambda.txt and their dependencies once (`make setup`).

    Pure-Python wheels for the functions' runtime; pip resolves what the pins leave open, and
    the cache keeps that resolution until the pins change.
    """
    pins = job_pins(LAMBDA_REQUIREMENTS)
    options = ["--platform", LAMBDA_PLATFORM, "--python-version", LAMBDA_PYTHON]
    return cached_download(
        _cache_dir(cache, pins),
        lambda dest: pip_download(LAMBDA_REQUIREMENTS, dest, options, pins),
        lambda folder: _pure_wheels(folder, pins),
    )


def lambda_wheels(cache: Path = WHEEL_CACHE) -> list[Path]:
    """The wheels `fetch_lambda_wheels` cached; synth never downloads them."""
    pins = job_pins(LAMBDA_REQUIREMENTS)
    folder = _cache_dir(cache, pins)
    if not (folder / "SHA256SUMS").is_file():
        raise PackagingError(
            f"{LAMBDA_REQUIREMENTS.name}: its wheels are not in {folder}; run `make setup` "
            "(or `python -m infra.prefetch`) once while PyPI is reachable"
        )
    return _pure_wheels(folder, pins)


def _top_level(name: str) -> str | None:
    """The importable name an installed file belongs to (None for metadata)."""
    top = name.split("/")[0]
    if top.endswith((".dist-info", ".data")):
        return None
    return top.removesuffix(".py")


# --- the bundle ---------------------------------------------------------------------------------


def lambda_bundle(
    name: str,
    handler_dir: Path,
    *,
    package_root: Path = REPO_ROOT / PACKAGE,
    wheel_cache: Path = WHEEL_CACHE,
) -> Path:
    """A folder holding `handler_dir`'s files, `lakeloader/__init__.py` and `lakeloader/control/`, and
    the wheels of requirements-lambda.txt if they import any; fails on an import the function could
    not run."""
    if not handler_dir.is_dir():
        raise PackagingError(f"{handler_dir}: Lambda source folder not found")
    if not (package_root / CONTROL / "__init__.py").is_file():
        raise PackagingError(f"{package_root / CONTROL}: not a Python package (no __init__.py)")
    files = [
        p
        for p in package_files(handler_dir)
        if not p.relative_to(handler_dir).as_posix().startswith(("tests/", "test_"))
    ]
    shipped = [package_root / "__init__.py", *package_files(package_root / CONTROL)]
    code = [p for p in [*files, *shipped] if p.suffix == ".py"]
    external = external_imports(code, handler_dir, package_root)
    entries: dict[str, Entry] = {}

    def add(entry_name: str, data: bytes) -> None:
        if entry_name in entries:
            raise PackagingError(f"{name}: two files for {entry_name} in the Lambda bundle")
        entries[entry_name] = (entry_name, data, 0o644)

    for path in files:
        add(path.relative_to(handler_dir).as_posix(), path.read_bytes())
    for path in shipped:
        add(f"{PACKAGE}/{path.relative_to(package_root).as_posix()}", path.read_bytes())
    available = sys.stdlib_module_names | RUNTIME_PROVIDED
    wanted = [found for found in external if found.module.split(".")[0] not in available]
    if wanted:
        wheels = lambda_wheels(wheel_cache)
        unpacked = [entry for wheel in wheels for entry in installed_entries(wheel)]
        provided = {_top_level(entry_name) for entry_name, _, _ in unpacked}
        for found in wanted:
            if found.module.split(".")[0] not in provided:
                raise PackagingError(
                    f"{found.where()}: imports {found.module}, which the Lambda runtime does not have "
                    f"and {LAMBDA_REQUIREMENTS.name} does not ship"
                )
        for entry_name, data, _ in unpacked:
            add(entry_name, data)
    files_out = sorted(entries.values())

    def build(out: Path) -> None:
        for rel, data, mode in files_out:
            dest = out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            dest.chmod(mode)

    return publish(name, entries_digest(files_out), build)
