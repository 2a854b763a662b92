"""The jobs' Python as requirement markers see it, and a pip-check against given versions.

Shared by the packaging tests: the pins in requirements-job.txt and the unpacked EMR archive must
both satisfy every requirement that applies on a runtime (Linux, its CPython: 3.11 for glue-5.1,
3.13 for glue-6.0).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from packaging.requirements import Requirement

from infra.packaging import canonical_name, default_runtime
from lakeloader.control.runtimes import Runtime


def target_env(runtime: Runtime) -> dict[str, str]:
    """The marker environment of the runtime's jobs."""
    return {
        "python_version": runtime.python,
        "python_full_version": f"{runtime.python}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
        "extra": "",
    }


def unmet(
    owner: str, requires: Iterable[str], found: Mapping[str, str], runtime: Runtime | None = None
) -> list[str]:
    """Each of `owner`'s requirements that applies on the runtime (default: a stage's default) and
    `found` (name: version) misses."""
    environment = target_env(runtime or default_runtime())
    problems = []
    for requirement in map(Requirement, requires):
        if requirement.marker and not requirement.marker.evaluate(environment):
            continue
        version = found.get(canonical_name(requirement.name))
        if version is None or not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{owner} needs {requirement}, found: {version}")
    return problems
