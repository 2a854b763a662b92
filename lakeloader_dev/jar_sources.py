"""Where the inputs of the local Spark jars come from.

Three PyPI archives, pinned by version and SHA-256 and fetched with ``pip download`` (so pip's
index and proxy settings apply), and the Jackson jars of the installed PySpark.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pathlib
import subprocess
import sys
from dataclasses import dataclass

CHUNK = 1 << 20


def log(msg: str) -> None:
    print(f"[lakeloader_dev.jars] {msg}", file=sys.stderr, flush=True)


def mb(path: pathlib.Path) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB"


def sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------- PyPI archives


@dataclass(frozen=True)
class Dist:
    name: str
    version: str
    filename: str
    sha256: str
    approx_mb: int


ICEBERG_DIST = Dist(
    "snowpark-connect-deps-iceberg",
    "1.0.3",
    "snowpark_connect_deps_iceberg-1.0.3-py3-none-any.whl",
    "4f280e3677ab8d3a89f16647fc392ab2a3d48369f0c48873fe07bc1e74e06ffc",
    77,
)
SMFS_DIST = Dist(
    "sagemaker-feature-store-pyspark",
    "2.2.2",
    "sagemaker_feature_store_pyspark-2.2.2-py3-none-any.whl",
    "5e5da72967812a0cc92399682da0d8fab3d0ec9e038eb82fe79b645c35fbf8e9",
    361,
)
SAGEMAKER_PYSPARK_DIST = Dist(
    "sagemaker-pyspark",
    "1.4.5",
    "sagemaker_pyspark-1.4.5.tar.gz",
    "05ca2d5081d7138ce29a8fb0a9cba077f28c825288ed07aed46a82e63c0bf1fb",
    182,
)


def download(dist: Dist, downloads: pathlib.Path) -> pathlib.Path:
    """Fetch ``dist`` with pip (no dependencies, never built) into ``downloads``; verify its digest."""
    target = downloads / dist.filename
    if target.is_file():
        if sha256(target) == dist.sha256:
            return target
        log(f"{target.name} is damaged (digest mismatch); downloading it again")
        target.unlink()
    downloads.mkdir(parents=True, exist_ok=True)
    log(f"downloading {dist.name}=={dist.version} (~{dist.approx_mb} MB) with pip ...")
    spec = f"{dist.name}=={dist.version}"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check"]
    cmd += ["--dest", str(downloads)]
    if dist.filename.endswith(".whl"):
        attempts = [cmd + ["--only-binary", ":all:", spec]]
    else:
        # pip prepares an sdist's metadata (it does not build it) before saving the file;
        # if fetching the isolated build backend fails, use this environment's setuptools.
        attempts = [
            cmd + ["--no-binary", ":all:", spec],
            cmd + ["--no-binary", ":all:", "--no-build-isolation", spec],
        ]
    errors = []
    for attempt in attempts:
        proc = subprocess.run(attempt, stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
        if proc.returncode == 0 and target.is_file():
            break
        errors.append(proc.stderr.strip()[-2000:] or f"pip exited with {proc.returncode}")
    else:
        raise RuntimeError(
            f"could not download {spec} with pip (is pip available to {sys.executable}, and PyPI "
            "or a mirror reachable?):\n" + "\n---\n".join(errors)
        )
    digest = sha256(target)
    if digest != dist.sha256:
        target.unlink()
        raise RuntimeError(f"{dist.filename}: SHA-256 {digest} does not match the pinned {dist.sha256}")
    log(f"downloaded {target.name} ({mb(target)})")
    return target


# --------------------------------------------------------------------------- PySpark's Jackson

JACKSON_ARTIFACTS = ("jackson-core", "jackson-databind", "jackson-annotations", "jackson-datatype-jsr310")


def spark_jars_dir() -> pathlib.Path:
    """The ``jars/`` folder of the Spark that PySpark will launch (found without importing PySpark)."""
    candidates = []
    if os.environ.get("SPARK_HOME"):  # PySpark launches $SPARK_HOME's Spark when set
        candidates.append(pathlib.Path(os.environ["SPARK_HOME"]) / "jars")
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.origin:
        candidates.append(pathlib.Path(spec.origin).parent / "jars")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise RuntimeError(
        "no Spark jars folder found: install PySpark (pip install pyspark==3.5.*) or set SPARK_HOME"
    )


def jackson_sources() -> tuple[str, list[pathlib.Path]]:
    """The version(s) and paths of PySpark's Jackson jars, which Iceberg's runtime jar lacks."""
    folder = spark_jars_dir()
    jars, versions = [], []
    for artifact in JACKSON_ARTIFACTS:
        found = sorted(folder.glob(f"{artifact}-2.*.jar"))
        if not found:
            raise RuntimeError(f"{artifact}-2.*.jar not found in {folder}")
        jars.append(found[-1])
        versions.append(found[-1].name[len(artifact) + 1 : -len(".jar")])
    return "-".join(sorted(set(versions))), jars
