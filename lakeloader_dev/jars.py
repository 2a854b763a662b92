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

Relocation is pure Python: only the CONSTANT_Utf8 entries of each class file's
constant pool are rewritten (class names, descriptors, generic signatures and
string literals all live there), so indices and bytecode stay untouched.

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
import hashlib
import importlib.util
import os
import pathlib
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

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

_PROJECT_ROOT = pathlib.Path(__file__).resolve().parent.parent
_CHUNK = 1 << 20


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class _Dist:
    name: str
    version: str
    filename: str
    sha256: str
    approx_mb: int


_ICEBERG_DIST = _Dist(
    "snowpark-connect-deps-iceberg",
    "1.0.3",
    "snowpark_connect_deps_iceberg-1.0.3-py3-none-any.whl",
    "4f280e3677ab8d3a89f16647fc392ab2a3d48369f0c48873fe07bc1e74e06ffc",
    77,
)
_SMFS_DIST = _Dist(
    "sagemaker-feature-store-pyspark",
    "2.2.2",
    "sagemaker_feature_store_pyspark-2.2.2-py3-none-any.whl",
    "5e5da72967812a0cc92399682da0d8fab3d0ec9e038eb82fe79b645c35fbf8e9",
    361,
)
_SAGEMAKER_PYSPARK_DIST = _Dist(
    "sagemaker-pyspark",
    "1.4.5",
    "sagemaker_pyspark-1.4.5.tar.gz",
    "05ca2d5081d7138ce29a8fb0a9cba077f28c825288ed07aed46a82e63c0bf1fb",
    182,
)

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
_JACKSON_ARTIFACTS = ("jackson-core", "jackson-databind", "jackson-annotations", "jackson-datatype-jsr310")

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


# --------------------------------------------------------------------------- small helpers


def _log(msg: str) -> None:
    print(f"[lakeloader_dev.jars] {msg}", file=sys.stderr, flush=True)


def cache_dir() -> pathlib.Path:
    """The jar cache: ``$LAKELOADER_CACHE`` or ``<project>/.lakeloader/jars``."""
    env = os.environ.get("LAKELOADER_CACHE")
    return pathlib.Path(env).expanduser().resolve() if env else _PROJECT_ROOT / ".lakeloader" / "jars"


def _tmp_name(target: pathlib.Path) -> pathlib.Path:
    return target.with_name(f".{target.name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def _atomic_path(target: pathlib.Path) -> Iterator[pathlib.Path]:
    """Yield a temporary path next to ``target``; rename it onto ``target`` on success."""
    tmp = _tmp_name(target)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


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


def _mb(path: pathlib.Path) -> str:
    return f"{path.stat().st_size / 1e6:.1f} MB"


def _sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------- class-file relocation


class Relocation:
    """Rename package prefixes, in slash (``a/b/``) and dot (``a.b.``) form.

    ``rules`` maps old slash-form prefixes to new ones, e.g.
    ``{"com/fasterxml/jackson/": "org/apache/iceberg/shaded/com/fasterxml/jackson/"}``.
    Text that already carries a new prefix is left alone, so relocating twice is harmless.
    """

    def __init__(self, rules: dict[str, str]):
        if not rules:
            raise ValueError("no relocation rules")
        self.rules = dict(rules)
        table: dict[bytes, bytes] = {}
        alternatives: list[tuple[int, bytes]] = []
        for old, new in rules.items():
            if not (old.endswith("/") and new.endswith("/")):
                raise ValueError(f"relocation prefixes must end with '/': {old!r} -> {new!r}")
            for o, n in ((old, new), (old.replace("/", "."), new.replace("/", "."))):
                ob, nb = o.encode(), n.encode()
                table[ob] = nb
                pattern = re.escape(ob)
                if nb.endswith(ob):  # e.g. a/ -> x/a/: don't touch x/a/ again
                    pattern = b"(?<!" + re.escape(nb[: -len(ob)]) + b")" + pattern
                alternatives.append((len(ob), pattern))
        alternatives.sort(key=lambda item: item[0], reverse=True)  # longest (most specific) first
        self._table = table
        self._pattern = re.compile(b"|".join(pattern for _, pattern in alternatives))

    def bytes(self, data: bytes) -> bytes:
        return self._pattern.sub(lambda m: self._table[m.group(0)], data)

    def text(self, value: str) -> str:
        return self.bytes(value.encode("utf-8")).decode("utf-8")

    def matches(self, data: bytes) -> bool:
        return self._pattern.search(data) is not None


_CP_SIZES = {  # payload size of each non-Utf8 constant-pool entry, by tag
    3: 4,  # Integer
    4: 4,  # Float
    5: 8,  # Long (takes two slots)
    6: 8,  # Double (takes two slots)
    7: 2,  # Class
    8: 2,  # String
    9: 4,  # Fieldref
    10: 4,  # Methodref
    11: 4,  # InterfaceMethodref
    12: 4,  # NameAndType
    15: 3,  # MethodHandle
    16: 2,  # MethodType
    17: 4,  # Dynamic
    18: 4,  # InvokeDynamic
    19: 2,  # Module
    20: 2,  # Package
}


def relocate_class(data: bytes, rewrite: Callable[[bytes], bytes]) -> bytes:
    """Return class file ``data`` with ``rewrite`` applied to every CONSTANT_Utf8 entry.

    Everything else (indices, attributes, bytecode) is copied unchanged, which is
    valid because only the byte length of Utf8 entries changes. ``rewrite`` gets the
    entry's modified-UTF-8 bytes, in which ASCII prefixes can be replaced safely.
    """
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file (bad magic)")
    (count,) = struct.unpack_from(">H", data, 8)
    out = [data[:10]]
    pos, index = 10, 1
    while index < count:
        tag = data[pos]
        if tag == 1:
            (length,) = struct.unpack_from(">H", data, pos + 1)
            start = pos + 3
            value = data[start : start + length]
            new = rewrite(value)
            if new == value:
                out.append(data[pos : start + length])
            elif len(new) > 0xFFFF:
                raise ValueError("relocated CONSTANT_Utf8 entry exceeds 65535 bytes")
            else:
                out.append(b"\x01" + struct.pack(">H", len(new)) + new)
            pos = start + length
            index += 1
        else:
            size = _CP_SIZES.get(tag)
            if size is None:
                raise ValueError(f"unknown constant-pool tag {tag} at offset {pos}")
            out.append(data[pos : pos + 1 + size])
            pos += 1 + size
            index += 2 if tag in (5, 6) else 1
    out.append(data[pos:])
    return b"".join(out)


# --------------------------------------------------------------------------- jar writing


def _dropped(name: str) -> bool:
    """Entries never carried into a generated jar."""
    if name.startswith(("META-INF/versions/", "META-INF/maven/")) or name.endswith("module-info.class"):
        return True
    upper = name.upper()
    if upper.startswith("META-INF/") and upper.count("/") == 1:
        return upper.endswith((".SF", ".RSA", ".DSA", ".EC")) or upper in (
            "META-INF/MANIFEST.MF",
            "META-INF/INDEX.LIST",
        )
    return False


class _JarWriter:
    """Stream entries into a new jar: duplicates keep the first copy, service files are merged."""

    def __init__(self, path: pathlib.Path, title: str):
        self._zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6)
        self._names: set[str] = set()
        self._services: dict[str, list[str]] = {}
        self.classes = 0
        manifest = (
            f"Manifest-Version: 1.0\r\nCreated-By: lakeloader.jars\r\nImplementation-Title: {title}\r\n\r\n"
        )
        self._write("META-INF/MANIFEST.MF", manifest.encode())

    def _write(self, name: str, data: bytes) -> None:
        info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = 0o644 << 16
        self._zip.writestr(info, data)
        self._names.add(name)

    def add(self, name: str, data: bytes) -> None:
        if name.startswith("META-INF/services/") and name.count("/") == 2:
            lines = self._services.setdefault(name, [])
            for line in data.decode("utf-8").splitlines():
                line = line.split("#", 1)[0].strip()
                if line and line not in lines:
                    lines.append(line)
            return
        if name in self._names:
            return
        self._write(name, data)
        if name.endswith(".class"):
            self.classes += 1

    def close(self) -> None:
        try:
            for name, lines in sorted(self._services.items()):
                if lines:
                    self._write(name, ("\n".join(lines) + "\n").encode())
        finally:
            self._zip.close()


def relocate_jar(
    target: pathlib.Path,
    sources: Iterable[pathlib.Path],
    rules: dict[str, str],
    select: Callable[[str], bool] | None = None,
    title: str = "relocated by lakeloader.jars",
) -> int:
    """Write ``target`` (atomically) from the entries of ``sources`` that ``select`` accepts.

    Class files get their constant pool relocated by ``rules`` (see :class:`Relocation`),
    entry names and ``META-INF/services`` files (name and content) are relocated too;
    signatures, ``module-info.class``, ``META-INF/versions/`` and Maven metadata are
    dropped. Entries are streamed one at a time. Returns the number of classes written.
    """
    relocation = Relocation(rules)
    with _atomic_path(target) as tmp:
        writer = _JarWriter(tmp, title)
        try:
            for source in sources:
                with zipfile.ZipFile(source) as jar:
                    for info in jar.infolist():
                        name = info.filename
                        if info.is_dir() or _dropped(name) or (select is not None and not select(name)):
                            continue
                        data = jar.read(info)
                        if name.endswith(".class"):
                            if relocation.matches(data):
                                data = relocate_class(data, relocation.bytes)
                        elif name.startswith("META-INF/services/"):
                            data = relocation.bytes(data)
                        writer.add(relocation.text(name), data)
        finally:
            writer.close()
    return writer.classes


# --------------------------------------------------------------------------- downloads


def _download(dist: _Dist, downloads: pathlib.Path) -> pathlib.Path:
    """Fetch ``dist`` with pip (no dependencies, never built) into ``downloads``; verify its digest."""
    target = downloads / dist.filename
    if target.is_file():
        if _sha256(target) == dist.sha256:
            return target
        _log(f"{target.name} is damaged (digest mismatch); downloading it again")
        target.unlink()
    downloads.mkdir(parents=True, exist_ok=True)
    _log(f"downloading {dist.name}=={dist.version} (~{dist.approx_mb} MB) with pip ...")
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
    digest = _sha256(target)
    if digest != dist.sha256:
        target.unlink()
        raise RuntimeError(f"{dist.filename}: SHA-256 {digest} does not match the pinned {dist.sha256}")
    _log(f"downloaded {target.name} ({_mb(target)})")
    return target


# --------------------------------------------------------------------------- builders


def _spark_jars_dir() -> pathlib.Path:
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


def _jackson_sources() -> tuple[str, list[pathlib.Path]]:
    folder = _spark_jars_dir()
    jars, versions = [], []
    for artifact in _JACKSON_ARTIFACTS:
        found = sorted(folder.glob(f"{artifact}-2.*.jar"))
        if not found:
            raise RuntimeError(f"{artifact}-2.*.jar not found in {folder}")
        jars.append(found[-1])
        versions.append(found[-1].name[len(artifact) + 1 : -len(".jar")])
    return "-".join(sorted(set(versions))), jars


def _jackson_output() -> pathlib.Path:
    version, _ = _jackson_sources()
    return cache_dir() / f"iceberg-shaded-jackson-{version}-{_RECIPE}.jar"


def _build_iceberg(downloads: pathlib.Path) -> None:
    target = cache_dir() / _ICEBERG_RUNTIME
    if not target.is_file():
        wheel = _download(_ICEBERG_DIST, downloads)
        _log(f"extracting {_ICEBERG_RUNTIME} ...")
        with (
            zipfile.ZipFile(wheel) as archive,
            _atomic_path(target) as tmp,
            archive.open(_ICEBERG_RUNTIME_MEMBER) as src,
            open(tmp, "wb") as dst,
        ):
            shutil.copyfileobj(src, dst, _CHUNK)
        _log(f"wrote {target} ({_mb(target)})")

    target = _jackson_output()
    if not target.is_file():
        version, sources = _jackson_sources()
        _log(f"relocating Spark's Jackson {version} into {_SHADED} ...")
        classes = relocate_jar(
            target,
            sources,
            {"com/fasterxml/jackson/": _SHADED + "com/fasterxml/jackson/"},
            title=f"Jackson {version} relocated for {_ICEBERG_RUNTIME}",
        )
        _log(f"wrote {target} ({_mb(target)}, {classes} classes)")


def _build_aws(downloads: pathlib.Path) -> None:
    """The AWS SDK v2 jar and Iceberg's HttpClient 5 jar, both from the smfs wheel."""
    sdk, hc5 = cache_dir() / _AWS_SDK_V2, cache_dir() / _ICEBERG_HC5
    if sdk.is_file() and hc5.is_file():
        return
    wheel = _download(_SMFS_DIST, downloads)
    # The jar inside the wheel is deflated, and seeking in a deflated member re-inflates it
    # from the start: unpack it to a temporary file first.
    inner = downloads / f".smfs-{os.getpid()}.jar"
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(_SMFS_MEMBER) as src, open(inner, "wb") as dst:
            shutil.copyfileobj(src, dst, _CHUNK)
        if not sdk.is_file():
            _log("relocating AWS SDK v2 (smfs/shaded/software/amazon/ -> software/amazon/) ...")
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
            _log(f"wrote {sdk} ({_mb(sdk)}, {classes} classes)")
        if not hc5.is_file():
            prefix = _SMFS + _SHADED + "org/apache/hc/"
            _log("relocating Iceberg's shaded HttpClient 5 (REST catalog) ...")
            classes = relocate_jar(
                hc5,
                [inner],
                {prefix: _SHADED + "org/apache/hc/"},
                select=lambda name: name.startswith(prefix),
                title=f"HttpClient 5 relocated for {_ICEBERG_RUNTIME}",
            )
            _log(f"wrote {hc5} ({_mb(hc5)}, {classes} classes)")
    finally:
        with contextlib.suppress(FileNotFoundError):
            inner.unlink()


def _build_s3a(downloads: pathlib.Path) -> None:
    wanted = {
        m: cache_dir() / n for m, n in _SAGEMAKER_PYSPARK_MEMBERS.items() if not (cache_dir() / n).is_file()
    }
    if not wanted:
        return
    sdist = _download(_SAGEMAKER_PYSPARK_DIST, downloads)
    _log(f"extracting {', '.join(p.name for p in wanted.values())} from {sdist.name} ...")
    with tarfile.open(sdist, "r:gz") as tar:  # streamed, one pass
        for member in tar:
            target = wanted.pop(member.name, None)
            if target is None:
                continue
            src = tar.extractfile(member)
            if src is None:
                raise RuntimeError(f"{member.name} in {sdist.name} is not a regular file")
            with _atomic_path(target) as tmp, src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst, _CHUNK)
            _log(f"wrote {target} ({_mb(target)})")
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
        _ICEBERG_DIST.filename: [_ICEBERG_RUNTIME],
        _SMFS_DIST.filename: [_AWS_SDK_V2, _ICEBERG_HC5],
        _SAGEMAKER_PYSPARK_DIST.filename: [_HADOOP_AWS, _AWS_SDK_V1],
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
        return {"spark.jars.packages": MAVEN_PACKAGES}
    return {"spark.jars": ",".join(str(p) for p in local_jars("all"))}


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
        _log(f"building the {kind!r} jars in {root} (once; downloads from PyPI) ...")
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
    _log(f"jars ready in {time.monotonic() - started:.0f}s")
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
    except (RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
