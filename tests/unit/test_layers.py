"""The Iceberg layer stays one layer: table operations live in lakeloader.iceberg, a batch commits only
through lakeloader.commit, and the modules above them call down, never sideways (docs/merge_and_commit.md).

Read from the source (imports and spellings), no Spark needed.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "lakeloader"
# The modules that use Iceberg tables; which of each other each may import. A batch (merge) composes
# its mode (scd2) and the tombstones; maintenance and erase reach the tombstones' side table. Table
# operations (refs, procedures, properties, commits, snapshot lookups) come from iceberg and commit.
ALLOWED = {
    "merge": {"scd2", "tombstones", "commit", "iceberg"},
    "scd2": {"tombstones"},
    "maintenance": {"tombstones", "iceberg"},
    "erase": {"tombstones", "commit", "iceberg"},
    "quality": {"iceberg"},
    "tombstones": {"iceberg"},
    "commit": {"quality", "iceberg"},  # the audit branch runs the quality rules
    "iceberg": set(),
}
# Spellings of Iceberg table operations: only lakeloader/iceberg.py writes them.
ICEBERG_ONLY = re.compile(
    r"loadIcebergTable|TableMetadataParser|CommitMetadata|SparkActions|\.system\.|\} (?:CREATE|DROP) BRANCH|"
    r"SET TBLPROPERTIES|\.refs\b"
)


def runtime_imports(module: str) -> set[str]:
    """The lakeloader modules `module` imports at run time (annotation-only TYPE_CHECKING imports aside)."""
    return {name.split(".")[1] for name in module_graph()[f"lakeloader.{module}"] if "." in name}


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_table_modules_call_down_never_sideways(module):
    sideways = (runtime_imports(module) & ALLOWED.keys()) - ALLOWED[module]
    assert not sideways, f"lakeloader/{module}.py imports {sorted(sideways)}: go through iceberg/commit"


def test_only_the_iceberg_module_spells_table_operations():
    spelled = {
        path.name: sorted(set(ICEBERG_ONLY.findall(path.read_text())))
        for path in PACKAGE.rglob("*.py")
        if path.name != "iceberg.py"
    }
    assert {name: found for name, found in spelled.items() if found} == {}


REPO = PACKAGE.parent
PACKAGES = ("lakeloader", "infra", "lakeloader_dev")


@functools.cache
def module_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports, at the top or inside a function (TYPE_CHECKING aside):
    an import deferred into a function to dodge a cycle is still the cycle."""
    files = {
        ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): path
        for package in PACKAGES
        for path in (REPO / package).rglob("*.py")
    }

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text())
        skipped = {
            id(node)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
            for node in ast.walk(block)
        }
        names = []
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names += [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
        graph[module] = {found for name in names if (found := known(name)) and found != module}
    return graph


def test_no_import_cycle_anywhere():
    graph = module_graph()
    cycles = []

    def walk(module: str, path: list[str], seen: set[str]) -> None:
        for imported in sorted(graph[module]):
            if imported == path[0]:
                cycles.append(" -> ".join([*path, imported]))
            elif imported not in seen and imported > path[0]:  # each cycle once, from its least module
                seen.add(imported)
                walk(imported, [*path, imported], seen)

    for start in sorted(graph):
        walk(start, [start], {start})
    assert cycles == []
