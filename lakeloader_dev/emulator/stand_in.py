"""A runtime's packed virtual environment, run on the Python that stands in for the runtime's here.

glue-6.1's jobs run Python 3.14, which this project's machines cannot install: its suites run on 3.13
(lakeloader.control.runtimes: Runtime.local_python). The stack ships a venv of cp314 wheels, which 3.13 cannot
import; the emulator then runs the job with the same venv built for the stand-in Python (same pins, same
CPU, cp313 wheels), after checking that it holds exactly the shipped venv's distributions and versions.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
from pathlib import Path

from lakeloader.control import runtimes


def distributions(site_packages: Path) -> set[str]:
    """`name-version` of every distribution installed in a site-packages folder (its .dist-info)."""
    return {p.name.removesuffix(".dist-info").lower() for p in site_packages.glob("*.dist-info")}


def stands_in(found_python: str) -> bool:
    """Is `found_python` (`python3.14`) the Python of the local runtime, which this process stands in for?"""
    local = runtimes.local()
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    return local.local_python == here and found_python == f"python{local.python}"


def stand_in_site_packages(shipped: Path, workdir: Path) -> Path:
    """The site-packages of the shipped venv (`shipped`: its lib/pythonX.Y/site-packages) rebuilt for this
    Python: the Glue or EMR venv of the local runtime whose distributions are the shipped one's."""
    from infra.packed_venv import emr_venv_archive, glue_venv_archive

    local = runtimes.local()
    stand_in = dataclasses.replace(local, python=local.laptop_python)
    wanted = distributions(shipped)
    for build in (glue_venv_archive, emr_venv_archive):
        archive = build(runtime=stand_in)
        target = workdir / "stand-in-venvs" / archive.parent.name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
            shutil.unpack_archive(str(archive), str(staging), filter="tar")
            try:
                staging.rename(target)
            except OSError:  # another run unpacked the same venv first
                shutil.rmtree(staging, ignore_errors=True)
        site = target / "lib" / f"python{stand_in.python}" / "site-packages"
        if distributions(site) == wanted:
            return site
    raise RuntimeError(
        f"{shipped}: no venv of the same distributions for Python {stand_in.python}, which stands in for "
        f"runtime {local.name}'s {local.python} here"
    )
