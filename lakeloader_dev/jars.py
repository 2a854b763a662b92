"""The jars a local Spark needs, taken from Maven Central by their coordinates, as Spark users do.

Each runtime of :mod:`lakeloader.control.runtimes` has its list (:data:`RUNTIME_JARS`), the artifacts that
``spark.jars.packages`` would resolve for it, pinned with their transitive jars:

* the Iceberg Spark runtime of the runtime's Spark, Scala and Iceberg (SQL extensions; the Hadoop,
  Glue and REST catalogs; ``S3FileIO``);
* ``iceberg-aws-bundle`` of the same Iceberg: the AWS SDK v2 that ``GlueCatalog`` and ``S3FileIO`` call;
* ``hadoop-aws`` of the Hadoop client that PySpark bundles, for Spark's own ``s3a://`` and ``s3://``
  reads of raw files, with the AWS SDK it is built against: SDK v1's bundle for Hadoop 3.3; for
  Hadoop 3.4, SDK v2 as ``iceberg-aws-bundle`` already carries it plus the S3 transfer manager of
  the same SDK version (not the 640 MB SDK bundle).

Every jar is fetched once from ``$LAKELOADER_MAVEN_REPO`` (default: Maven Central), checked against its
pinned SHA-256, and kept in the cache, ``<project>/.lakeloader/jars`` (or ``$LAKELOADER_CACHE``), under
Maven's own layout; later calls only check that the files exist, so the suite runs offline. A download
goes to a temporary file that is renamed once its digest matches: an interrupted set-up is redone.

    python -m lakeloader_dev.jars [--runtime glue-5.1|glue-6.0] [--check]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import pathlib
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

from lakeloader.control import runtimes
from lakeloader.spark.session import jar_conf_path

MAVEN_REPO_ENV = "LAKELOADER_MAVEN_REPO"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class MavenJar:
    """One pinned artifact: its coordinates, its digest, and a class that proves the jar is whole."""

    coordinates: str  # group:artifact:version
    sha256: str
    probe: str

    @property
    def path(self) -> str:
        """Maven's layout: `org/apache/iceberg/iceberg-aws-bundle/1.10.0/iceberg-aws-bundle-1.10.0.jar`."""
        group, artifact, version = self.coordinates.split(":")
        return f"{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"

    @property
    def version(self) -> str:
        return self.coordinates.rsplit(":", 1)[1]


_RUNTIME_PROBE = "org/apache/iceberg/spark/extensions/IcebergSparkSessionExtensions.class"
_GLUE_CLIENT = "software/amazon/awssdk/services/glue/GlueClient.class"
_S3A = "org/apache/hadoop/fs/s3a/S3AFileSystem.class"

RUNTIME_JARS = {
    "glue-5.1": (
        MavenJar(
            "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.0",
            "70f9471870b2d456167d703c829f098a446b86bb1379eee338c0efa03a341026",
            _RUNTIME_PROBE,
        ),
        MavenJar(
            "org.apache.iceberg:iceberg-aws-bundle:1.10.0",
            "172370cfc32a5f1ae5399b210e86fc04a366dc29a112d97ac8ffc74df7525596",
            _GLUE_CLIENT,
        ),
        MavenJar(
            "org.apache.hadoop:hadoop-aws:3.3.4",
            "53f9ae03c681a30a50aa17524bd9790ab596b28481858e54efd989a826ed3a4a",
            _S3A,
        ),
        # hadoop-aws 3.3.4's own dependency (its POM), the AWS SDK v1 that S3A calls.
        MavenJar(
            "com.amazonaws:aws-java-sdk-bundle:1.12.262",
            "873fe7cf495126619997bec21c44de5d992544aea7e632fdc77adb1a0915bae5",
            "com/amazonaws/services/s3/AmazonS3Client.class",
        ),
    ),
    "glue-6.0": (
        MavenJar(
            "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.11.0",
            "d6ea6c5d099288daeb7d5a92061bd3d7d8f296492632b42378e5f2f0e3066242",
            _RUNTIME_PROBE,
        ),
        # Carries AWS SDK v2 2.44.4 (s3, sts, glue, kms, dynamodb, lakeformation) and the S3
        # analytics accelerator, which hadoop-aws 3.4 uses too.
        MavenJar(
            "org.apache.iceberg:iceberg-aws-bundle:1.11.0",
            "38f01da7e96850cdd05e6616d758b77b43314b712a8808e3f9a824d56976162f",
            _GLUE_CLIENT,
        ),
        MavenJar(
            "org.apache.hadoop:hadoop-aws:3.4.2",
            "d2d24e6b715b5656b9d238bf13b6682a07e2004dd36aad74a73aeb854319f4d9",
            _S3A,
        ),
        # The one SDK v2 module S3A needs that the Iceberg bundle lacks, at the bundle's SDK version.
        MavenJar(
            "software.amazon.awssdk:s3-transfer-manager:2.44.4",
            "dbcad736b19f6eb8471f9edf027d9fffe994228f25f415894efd01fd80cb6c02",
            "software/amazon/awssdk/transfer/s3/S3TransferManager.class",
        ),
    ),
}
# Glue 6.1 keeps 6.0's Iceberg (1.11.0, as emr-spark-8.2.0 bundles it), Scala 2.13 and Hadoop ("Hadoop is
# unchanged"): the same coordinates serve Spark 4.1.3.
RUNTIME_JARS["glue-6.1"] = RUNTIME_JARS["glue-6.0"]


def log(msg: str) -> None:
    print(f"[lakeloader_dev.jars] {msg}", file=sys.stderr, flush=True)


def cache_dir() -> pathlib.Path:
    """The jar cache: ``$LAKELOADER_CACHE`` or ``<project>/.lakeloader/jars`` (where the shipped
    runtime looks for the recorded settings)."""
    return jar_conf_path().parent


def runtime_jars(runtime: runtimes.Runtime | None = None) -> tuple[MavenJar, ...]:
    return RUNTIME_JARS[(runtime or runtimes.local()).name]


def local_jars(runtime: runtimes.Runtime | None = None) -> list[pathlib.Path]:
    """The runtime's jars in the cache, each fetched and checked first if missing (for ``spark.jars``).

    The first call downloads about 390 MB (glue-5.1) or 110 MB (glue-6.0) from Maven Central;
    later calls only check that the files exist.
    """
    wanted = runtime_jars(runtime)
    root = cache_dir()
    missing = [jar for jar in wanted if not (root / jar.path).is_file()]
    if missing:
        started = time.monotonic()
        with _build_lock(root):
            for jar in missing:
                _fetch(jar, root / jar.path)
        log(f"jars ready in {time.monotonic() - started:.0f}s")
    return [root / jar.path for jar in wanted]


def spark_conf(runtime: runtimes.Runtime | None = None) -> dict[str, str]:
    """The jar settings for a local SparkSession (``SparkSettings.extra_conf``), also recorded where
    the shipped runtime reads them (`lakeloader.spark.session.jar_conf_path`): `lakeloader run` in this
    checkout then finds the jars without importing this module.

    Each jar is a ``local:`` URI, a file every node already has, so the driver's file server does not
    serve it: with a plain path it served all of them, 377 MB for glue-5.1, to each new SparkContext's
    executor, which in local mode is the same JVM. Measured side by side (2026-11-30, 2 cores):
    the e2e suite's S3 -> Iceberg and kept-driver modules 168.5 CPU-s against 182.0; the fault suite's
    crashes and the CLI's subprocess tests 119.0 against 127.3."""
    runtime = runtime or runtimes.local()
    conf = {"spark.jars": ",".join(f"local:{path}" for path in local_jars(runtime))}
    path = jar_conf_path(runtime)
    text = json.dumps(conf, indent=2, sort_keys=True) + "\n"
    if not (path.is_file() and path.read_text() == text):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(text)
        partial.replace(path)
    return conf


def _fetch(jar: MavenJar, target: pathlib.Path) -> None:
    """Download `jar` to `target`, renamed into place only once its SHA-256 matches the pin."""
    if target.is_file():  # another process fetched it while this one waited for the lock
        return
    url = f"{os.environ.get(MAVEN_REPO_ENV, MAVEN_CENTRAL).rstrip('/')}/{jar.path}"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}")
    digest = hashlib.sha256()
    log(f"fetching {jar.coordinates} from {url} ...")
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as out:
            while chunk := response.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != jar.sha256:
            raise RuntimeError(
                f"{url}: SHA-256 {digest.hexdigest()} is not the pinned {jar.sha256}; nothing was kept"
            )
        partial.replace(target)
    except OSError as exc:
        raise RuntimeError(
            f"could not fetch {jar.coordinates} from {url} ({exc}); set {MAVEN_REPO_ENV} to a "
            "reachable Maven mirror"
        ) from exc
    finally:
        partial.unlink(missing_ok=True)
    log(f"wrote {target} ({target.stat().st_size / 1e6:.1f} MB)")


@contextlib.contextmanager
def _build_lock(directory: pathlib.Path) -> Iterator[None]:
    """Serialise fetches into one cache between processes (parallel shells, test workers)."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: no lock; atomic renames still keep every jar whole
        yield
        return
    with open(directory / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def problem(jar: MavenJar, path: pathlib.Path) -> str | None:
    """Why the cached `path` of `jar` is not usable, or None."""
    if not path.is_file():
        return "missing"
    try:
        with zipfile.ZipFile(path) as archive:
            if jar.probe not in archive.NameToInfo:
                return f"lacks {jar.probe}"
    except (zipfile.BadZipFile, OSError) as exc:
        return f"unreadable ({exc})"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lakeloader_dev.jars",
        description="Fetch once from Maven Central, by pinned coordinates and SHA-256, the jars local "
        "Spark needs for Iceberg, Glue/S3FileIO and s3a, and print their paths (one per line).",
    )
    parser.add_argument(
        "--runtime",
        choices=sorted(runtimes.RUNTIMES),
        default=None,
        help=f"which runtime's jars (default: ${runtimes.RUNTIME_ENV}, else {runtimes.DEFAULT_RUNTIME})",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="fetch nothing: verify the cached jars (present, readable, key class inside); exit 1 if not",
    )
    args = parser.parse_args(argv)
    runtime = runtimes.runtime(args.runtime) if args.runtime else runtimes.local()
    try:
        if args.check:
            found = [
                (problem(jar, cache_dir() / jar.path), cache_dir() / jar.path)
                for jar in runtime_jars(runtime)
            ]
            for trouble, path in found:
                print(f"{trouble or 'ok'}\t{path}")
            return 1 if any(trouble for trouble, _ in found) else 0
        for uri in spark_conf(runtime)["spark.jars"].split(","):
            print(uri.removeprefix("local:"))
    except (RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
