"""The jobs' dependencies as a packed virtual environment, built at synth time without Docker: Glue
6.0's `--python-virtual-env` (`glue_venv_archive`, with AWS Glue's own library) and EMR Serverless's
`spark.archives` (`emr_venv_archive`), each the runtime's wheels (infra.packaging.fetch_wheels)
installed into one site-packages and packed as `venv-pack` packs one: a deterministic .tar.gz, so the
same wheels give the same bytes and the same asset hash. Glue 5.x takes the zip of wheels instead
(infra.packaging.glue_wheels_zip).
"""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

from infra.packaging import (
    Entry,
    PackagingError,
    Pin,
    default_runtime,
    entries_digest,
    fetch_wheels,
    installed_entries,
    job_pins,
    publish,
)
from lakeloader.control import runtimes

GLUE_VENV_SUFFIX = ".tar.gz"
GLUE_VENV_NAME = f"lakeloader-venv{GLUE_VENV_SUFFIX}"
EMR_VENV_SUFFIX = ".tar.gz"  # Spark unpacks an archive by its name's ending
EMR_VENV_NAME = f"lakeloader-emr-venv{EMR_VENV_SUFFIX}"


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
GLUE_DATAPLANE = {"5.0": "5.0.0", "5.1": "5.1.0", "6.0": "6.0.0", "6.1": "6.0.0"}
# Glue versions whose AWSGlueDataplanePython is an earlier version's wheel: PyPI has no 6.1.0 (checked
# 2026-12-02; its versions are 5.0.0, 5.1.0 and 6.0.0), and 6.0.0 declares Requires-Python <3.14, so pip
# fetches it for Glue 6.1's 3.14 only when told to ignore that. It is pure Python (py3-none-any); no
# Python 3.14 here can prove it imports there (docs/deploy.md, "Runtimes").
GLUE_DATAPLANE_BORROWED = {"6.1"}
# Where the Glue venv's interpreter links to: AWS builds the venv on Amazon Linux 2023 with
# `dnf install python3.13` and `python3.13 -m venv` (same guide, steps 2 and 5), so its bin/python3.13
# is a link to /usr/bin/python3.13, the interpreter Glue 6.0 runs the venv with.
GLUE_PYTHON_HOME = "/usr/bin"


def glue_dataplane_pin(runtime: runtimes.Runtime) -> Pin:
    if runtime.glue_version not in GLUE_DATAPLANE:
        raise PackagingError(
            f"runtime {runtime.name}: no AWSGlueDataplanePython version for Glue {runtime.glue_version} "
            "in infra.packed_venv.GLUE_DATAPLANE (AWS's venv guide lists them)"
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


def glue_venv_archive(
    pins: list[Pin] | None = None,
    runtime: runtimes.Runtime | None = None,
    architecture: str = runtimes.X86_64,
) -> Path:
    """Glue 6.0's `--python-virtual-env`: a virtual environment of every pin plus AWSGlueDataplanePython,
    packed as `venv-pack` packs one (a .tar.gz of the venv's folder), built here without Docker.

    AWS's guide builds it in an Amazon Linux 2023 container with `python3.13 -m venv`, `pip install`
    and `venv-pack`. What that produces is the venv's files: `pyvenv.cfg` (home /usr/bin),
    `bin/python3.13` a link to /usr/bin/python3.13 (venv-pack keeps it: Python is not packed, the
    target has it), `bin/python`, `bin/python3` links to it, `lib64` a link to `lib`, and every wheel
    installed into `lib/python3.13/site-packages`. Installing a wheel into site-packages is unpacking
    it (`.data/purelib|platlib` merged into the root; scripts are not needed): the wheels are the
    runtime's cp313 manylinux2014_x86_64 ones, the platform AWS's guide asks for, so nothing is built
    and the container adds nothing; for Graviton workers (`architecture` aarch64) the
    manylinux2014_aarch64 ones, fetched by pip's platform options on this x86_64 machine. Nothing is
    inherited from Glue's image (no boto3): the pins marked glue-provided are packed too, as the guide
    requires.
    """
    runtime = runtime or default_runtime()
    return packed_venv(
        "glue-venv", GLUE_VENV_NAME, pins, runtime, [glue_dataplane_pin(runtime)], architecture
    )


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
    return packed_venv("emr-venv", EMR_VENV_NAME, pins, runtime, [])


def packed_venv(
    name: str,
    filename: str,
    pins: list[Pin] | None,
    runtime: runtimes.Runtime,
    extra: list[Pin],
    architecture: str = runtimes.X86_64,
) -> Path:
    """A virtual environment of `pins` and `extra` for `runtime`'s CPython on the workers' CPU, packed as
    venv-pack packs one."""
    pins = job_pins() if pins is None else pins
    wheels = fetch_wheels(pins, runtime=runtime, architecture=architecture)
    if extra:
        borrowed = runtime.glue_version in GLUE_DATAPLANE_BORROWED
        wheels |= fetch_wheels(
            extra, runtime=runtime, architecture=architecture, ignore_requires_python=borrowed
        )
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
