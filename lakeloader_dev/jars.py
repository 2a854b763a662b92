"""Assemble, offline from PyPI packages, the jars a local Spark needs.

Maven Central is often unreachable (corporate proxies, sandboxes) while PyPI is
not, and a few PyPI packages carry the jars we need:

* ``snowpark-connect-deps-iceberg`` ships ``iceberg-spark-runtime-3.5_2.12-1.10.2``,
  whose relocated Jackson classes are missing; PySpark's own Jackson jars,
  relocated into Iceberg's shaded package, fill the gap.
* ``sagemaker-feature-store-pyspark`` ships an AWS SDK v2 (S3, Glue, STS, KMS,
  Apache HTTP client) relocated under ``smfs/shaded/``; moved back to
  ``software/amazon/`` it serves Iceberg's ``GlueCatalog`` and ``S3FileIO``.
  The same jar holds the HttpClient 5 classes Iceberg's REST catalog needs.
* ``sagemaker-pyspark`` (an sdist; only unpacked, never built) contains
  ``hadoop-aws`` and the AWS SDK v1 bundle for Spark's own ``s3a://``.

Relocation is pure Python (:mod:`lakeloader_dev.relocate`); the pinned archives and
their download live in :mod:`lakeloader_dev.jar_sources`. This module is the recipe:
which jars, from which members, with which prefixes, and the cache that holds them.

Outputs are cached under ``<project>/.lakeloader/jars`` (or ``$LAKELOADER_CACHE``)
and rebuilt only when missing. Each is written to a temporary file and renamed,
so an interrupted build is simply redone; downloads are checked against pinned
SHA-256 digests and removed once everything built from them exists
(``LAKELOADER_KEEP_DOWNLOADS=1`` keeps them).

    python -m lakeloader_dev.jars [--kind all|iceberg|aws|s3a] [--check]

Where Maven is reachable, :data:`MAVEN_PACKAGES` is the equivalent
``spark.jars.packages`` value (the Spark session uses it when ``LAKELOADER_JARS=maven``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import shutil
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator

from lakeloader.spark import jar_conf_path
from lakeloader_dev.jar_sources import (
    CHUNK,
    ICEBERG_DIST,
    SAGEMAKER_PYSPARK_DIST,
    SMFS_DIST,
    download,
    jackson_sources,
    log,
    mb,
)
from lakeloader_dev.relocate import Relocation, atomic_path, relocate_class, relocate_jar

__all__ = [
    "KINDS",
    "MAVEN_PACKAGES",
    "Relocation",
    "cache_dir",
    "local_jars",
    "main",
    "spark_conf",
    "relocate_class",
    "relocate_jar",
]

MAVEN_PACKAGES = (
    "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.0,"
    "org.apache.iceberg:iceberg-aws-bundle:1.10.0,"
    "org.apache.hadoop:hadoop-aws:3.3.4"
)

KINDS = ("iceberg", "aws", "s3a", "all")

# Bump when the recipe of a generated jar changes: outputs then get new names and are rebuilt.
_RECIPE = "ll1"


# --------------------------------------------------------------------------- outputs and prefixes

_ICEBERG_RUNTIME = "iceberg-spark-runtime-3.5_2.12-1.10.2.jar"
_ICEBERG_RUNTIME_MEMBER = f"snowpark_connect_deps_iceberg/jars/{_ICEBERG_RUNTIME}"
_SMFS_MEMBER = "feature_store_pyspark/jars/sagemaker-feature-store-spark-sdk-3.5.jar"
_AWS_SDK_V2 = f"awssdk-v2-2.55.9-from-smfs-2.2.2-{_RECIPE}.jar"
_ICEBERG_HC5 = f"iceberg-shaded-httpclient5-5.4.3-{_RECIPE}.jar"
_HADOOP_AWS = "hadoop-aws-3.3.1.jar"
_AWS_SDK_V1 = "aws-java-sdk-bundle-1.11.901.jar"
_SAGEMAKER_PYSPARK_MEMBERS = {
    f"sagemaker_pyspark-1.4.5/deps/jars/{_HADOOP_AWS}": _HADOOP_AWS,
    f"sagemaker_pyspark-1.4.5/deps/jars/{_AWS_SDK_V1}": _AWS_SDK_V1,
}

_SHADED = "org/apache/iceberg/shaded/"
_SMFS = "smfs/shaded/"
# AWS SDK v2 service packages in the smfs jar that Iceberg does not need.
_SMFS_DROPPED_SERVICES = ("sagemaker", "sagemakerfeaturestoreruntime", "lakeformation", "dynamodb")
# What the relocated SDK uses, kept under the names it has in the smfs jar.
_SMFS_KEPT = (
    _SMFS + "org/apache/hc/",
    _SMFS + "org/apache/commons/",
    "software/amazon/eventstream/",
    "org/reactivestreams/",
    "mozilla/",
    "org/publicsuffix/",
)

# One class per output that must be present for the jar to count as good (``--check``).
_PROBES = {
    _ICEBERG_RUNTIME: "org/apache/iceberg/spark/extensions/IcebergSparkSessionExtensions.class",
    _AWS_SDK_V2: "software/amazon/awssdk/services/glue/GlueClient.class",
    _ICEBERG_HC5: _SHADED + "org/apache/hc/client5/http/impl/classic/HttpClients.class",
    _HADOOP_AWS: "org/apache/hadoop/fs/s3a/S3AFileSystem.class",
    _AWS_SDK_V1: "com/amazonaws/services/s3/AmazonS3Client.class",
}
_JACKSON_PROBE = _SHADED + "com/fasterxml/jackson/core/JsonFactoryBuilder.class"


# --------------------------------------------------------------------------- cache


def cache_dir() -> pathlib.Path:
    """The jar cache: ``$LAKELOADER_CACHE`` or ``<project>/.lakeloader/jars`` (where the shipped
    runtime looks for the recorded settings)."""
    return jar_conf_path().parent


@contextlib.contextmanager
def _build_lock(directory: pathlib.Path) -> Iterator[None]:
    """Serialise builds of one cache between processes (pytest-xdist, parallel shells)."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: no lock; atomic renames still keep every output whole
        yield
        return
    with open(directory / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _remove_stale_temporaries(directory: pathlib.Path) -> None:
    """Drop what an interrupted build left behind (called under the build lock)."""
    for pattern in (".*.tmp-*", "downloads/.*.tmp-*", "downloads/.smfs-*.jar"):
        for path in directory.glob(pattern):
            with contextlib.suppress(OSError):
                path.unlink()


# --------------------------------------------------------------------------- builders


def _jackson_output() -> pathlib.Path:
    version, _ = jackson_sources()
    return cache_dir() / f"iceberg-shaded-jackson-{version}-{_RECIPE}.jar"


def _build_iceberg(downloads: pathlib.Path) -> None:
    target = cache_dir() / _ICEBERG_RUNTIME
    if not target.is_file():
        wheel = download(ICEBERG_DIST, downloads)
        log(f"extracting {_ICEBERG_RUNTIME} ...")
        with (
            zipfile.ZipFile(wheel) as archive,
            atomic_path(target) as tmp,
            archive.open(_ICEBERG_RUNTIME_MEMBER) as src,
            open(tmp, "wb") as dst,
        ):
            shutil.copyfileobj(src, dst, CHUNK)
        log(f"wrote {target} ({mb(target)})")

    target = _jackson_output()
    if not target.is_file():
        version, sources = jackson_sources()
        log(f"relocating Spark's Jackson {version} into {_SHADED} ...")
        classes = relocate_jar(
            target,
            sources,
            {"com/fasterxml/jackson/": _SHADED + "com/fasterxml/jackson/"},
            title=f"Jackson {version} relocated for {_ICEBERG_RUNTIME}",
        )
        log(f"wrote {target} ({mb(target)}, {classes} classes)")


def _build_aws(downloads: pathlib.Path) -> None:
    """The AWS SDK v2 jar and Iceberg's HttpClient 5 jar, both from the smfs wheel."""
    sdk, hc5 = cache_dir() / _AWS_SDK_V2, cache_dir() / _ICEBERG_HC5
    if sdk.is_file() and hc5.is_file():
        return
    wheel = download(SMFS_DIST, downloads)
    # The jar inside the wheel is deflated, and seeking in a deflated member re-inflates it
    # from the start: unpack it to a temporary file first.
    inner = downloads / f".smfs-{os.getpid()}.jar"
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(_SMFS_MEMBER) as src, open(inner, "wb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)
        if not sdk.is_file():
            log("relocating AWS SDK v2 (smfs/shaded/software/amazon/ -> software/amazon/) ...")
            dropped = tuple(
                f"{_SMFS}software/amazon/awssdk/services/{svc}/" for svc in _SMFS_DROPPED_SERVICES
            )
            kept = (_SMFS + "software/amazon/", *_SMFS_KEPT)
            classes = relocate_jar(
                sdk,
                [inner],
                {_SMFS + "software/amazon/": "software/amazon/"},
                select=lambda name: name.startswith(kept) and not name.startswith(dropped),
                title="AWS SDK v2 2.55.9 (s3, glue, sts, kms) from sagemaker-feature-store-pyspark 2.2.2",
            )
            log(f"wrote {sdk} ({mb(sdk)}, {classes} classes)")
        if not hc5.is_file():
            prefix = _SMFS + _SHADED + "org/apache/hc/"
            log("relocating Iceberg's shaded HttpClient 5 (REST catalog) ...")
            classes = relocate_jar(
                hc5,
                [inner],
                {prefix: _SHADED + "org/apache/hc/"},
                select=lambda name: name.startswith(prefix),
                title=f"HttpClient 5 relocated for {_ICEBERG_RUNTIME}",
            )
            log(f"wrote {hc5} ({mb(hc5)}, {classes} classes)")
    finally:
        with contextlib.suppress(FileNotFoundError):
            inner.unlink()


def _build_s3a(downloads: pathlib.Path) -> None:
    wanted = {
        m: cache_dir() / n for m, n in _SAGEMAKER_PYSPARK_MEMBERS.items() if not (cache_dir() / n).is_file()
    }
    if not wanted:
        return
    sdist = download(SAGEMAKER_PYSPARK_DIST, downloads)
    log(f"extracting {', '.join(p.name for p in wanted.values())} from {sdist.name} ...")
    with tarfile.open(sdist, "r:gz") as tar:  # streamed, one pass
        for member in tar:
            target = wanted.pop(member.name, None)
            if target is None:
                continue
            src = tar.extractfile(member)
            if src is None:
                raise RuntimeError(f"{member.name} in {sdist.name} is not a regular file")
            with atomic_path(target) as tmp, src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst, CHUNK)
            log(f"wrote {target} ({mb(target)})")
            if not wanted:
                break
    if wanted:
        raise RuntimeError(f"{sdist.name} lacks {sorted(wanted)}")


def _prune_downloads(downloads: pathlib.Path) -> None:
    """Delete downloaded archives whose outputs all exist, unless LAKELOADER_KEEP_DOWNLOADS=1."""
    if os.environ.get("LAKELOADER_KEEP_DOWNLOADS") == "1":
        return
    root = cache_dir()
    needed_for = {
        ICEBERG_DIST.filename: [_ICEBERG_RUNTIME],
        SMFS_DIST.filename: [_AWS_SDK_V2, _ICEBERG_HC5],
        SAGEMAKER_PYSPARK_DIST.filename: [_HADOOP_AWS, _AWS_SDK_V1],
    }
    for filename, outputs in needed_for.items():
        archive = downloads / filename
        if archive.is_file() and all((root / name).is_file() for name in outputs):
            archive.unlink()
    with contextlib.suppress(OSError):
        downloads.rmdir()


# --------------------------------------------------------------------------- public API


def _outputs(kind: str) -> list[pathlib.Path]:
    root = cache_dir()
    paths = []
    if kind in ("iceberg", "all"):
        paths += [root / _ICEBERG_RUNTIME, _jackson_output()]
    if kind in ("aws", "all"):
        paths += [root / _AWS_SDK_V2, root / _ICEBERG_HC5]
    if kind in ("s3a", "all"):
        paths += [root / _HADOOP_AWS, root / _AWS_SDK_V1]
    return paths


def spark_conf() -> dict[str, str]:
    """The jar settings for a local SparkSession (``SparkSettings.extra_conf``).

    The Iceberg/AWS jars assembled here, or Maven coordinates with ``LAKELOADER_JARS=maven``.
    """
    if os.environ.get("LAKELOADER_JARS") == "maven":
        conf = {"spark.jars.packages": MAVEN_PACKAGES}
    else:
        conf = {"spark.jars": ",".join(str(p) for p in local_jars("all"))}
    _record(conf)
    return conf


def _record(conf: dict[str, str]) -> None:
    """Leave the settings where the shipped runtime reads them (`lakeloader.spark.jar_conf_path`):
    `lakeloader run` in this checkout then finds the jars without importing this module."""
    path = jar_conf_path()
    text = json.dumps(conf, indent=2, sort_keys=True) + "\n"
    if path.is_file() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def local_jars(kind: str = "all") -> list[pathlib.Path]:
    """Ensure the jars for ``kind`` are built, and return their paths (for ``spark.jars``).

    * ``iceberg``: the Iceberg Spark runtime (SQL extensions; Hadoop, Glue, REST catalogs)
      and its missing relocated Jackson (from the installed PySpark).
    * ``aws``: AWS SDK v2 for ``GlueCatalog``/``S3FileIO``, and the HttpClient 5 the
      REST catalog needs.
    * ``s3a``: ``hadoop-aws`` and the AWS SDK v1 bundle for Spark's ``s3a://``/``s3://``.
    * ``all``: all of the above.

    The first build downloads up to ~620 MB from PyPI (with pip) and takes under a
    minute on a fast link; later calls only check that the files exist.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown jar kind {kind!r}; expected one of {', '.join(KINDS)}")
    wanted = _outputs(kind)
    if all(path.is_file() for path in wanted):
        return wanted
    root = cache_dir()
    downloads = root / "downloads"
    started = time.monotonic()
    with _build_lock(root):
        _remove_stale_temporaries(root)
        log(f"building the {kind!r} jars in {root} (once; downloads from PyPI) ...")
        if kind in ("iceberg", "all"):
            _build_iceberg(downloads)
        if kind in ("aws", "all"):
            _build_aws(downloads)
        if kind in ("s3a", "all"):
            _build_s3a(downloads)
        _prune_downloads(downloads)
    missing = [str(path) for path in wanted if not path.is_file()]
    if missing:
        raise RuntimeError(f"jar build finished but outputs are missing: {missing}")
    log(f"jars ready in {time.monotonic() - started:.0f}s")
    return wanted


def _problem(path: pathlib.Path) -> str | None:
    """Why ``path`` is not a usable output, or None."""
    if not path.is_file():
        return "missing"
    probe = _PROBES.get(
        path.name, _JACKSON_PROBE if path.name.startswith("iceberg-shaded-jackson-") else None
    )
    try:
        with zipfile.ZipFile(path) as jar:
            if probe is not None and probe not in jar.NameToInfo:
                return f"lacks {probe}"
    except (zipfile.BadZipFile, OSError) as exc:
        return f"unreadable ({exc})"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lakeloader_dev.jars",
        description="Build once, from PyPI packages, the jars local Spark needs for Iceberg, "
        "Glue/S3FileIO and s3a, and print their paths (one per line).",
    )
    parser.add_argument("--kind", choices=KINDS, default="all", help="which jars (default: all)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="build nothing: verify the cached jars (present, readable, key class inside); exit 1 if not",
    )
    args = parser.parse_args(argv)
    try:
        if args.check:
            bad = 0
            for path in _outputs(args.kind):
                problem = _problem(path)
                bad += problem is not None
                print(f"{'ok' if problem is None else problem}\t{path}")
            return 1 if bad else 0
        for path in local_jars(args.kind):
            print(path)
        if args.kind == "all":
            spark_conf()  # records them for `lakeloader run`
    except (RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
