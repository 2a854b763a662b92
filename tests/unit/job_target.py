"""The jobs' Python as requirement markers see it, and a pip-check against given versions.

Shared by the packaging tests: the pins in requirements-job.txt and the unpacked EMR archive must
both satisfy every requirement that applies on the runtimes (Linux, CPython 3.11).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from packaging.requirements import Requirement

from infra.packaging import canonical_name
from lakeloader import runtimes

TARGET_ENV = {
    "python_version": runtimes.PYTHON_VERSION,
    "sys_platform": "linux",
    "platform_system": "Linux",
    "extra": "",
}


def unmet(owner: str, requires: Iterable[str], found: Mapping[str, str]) -> list[str]:
    """Each of `owner`'s requirements that applies on the runtimes and `found` (name: version) misses."""
    problems = []
    for requirement in map(Requirement, requires):
        if requirement.marker and not requirement.marker.evaluate(TARGET_ENV):
            continue
        version = found.get(canonical_name(requirement.name))
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{owner} needs {requirement}, found: {version}")
    return problems
