"""The layers of lakeloader/ (docs/architecture.md), read from the source (imports and spellings), no
Spark needed: each layer calls only its own and the ones below it, a layer below the jobs is reached
only through its public surface, only the Iceberg layer spells table operations, and no import cycle
anywhere. No exceptions. And nowhere does Spark map case (`upper`, `lower`, `initcap`): Spark 4 does it
through ICU, whose case data take about a second to load in every new JVM, each Glue 6.0 job run among
them; lakeloader.formats.base.ascii_upper and ascii_lower map the ASCII letters (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "lakeloader"
# Top down. A module not in a named layer is the base (config, formats, columns, contract, inputs,
# spark, sql, ledger, trigger ...): it imports none of the layers.
LAYERS = ("lakeloader.cli", "lakeloader.jobs", "lakeloader.engine", "lakeloader.iceberg")
# The modules at the root of lakeloader/: base code only, each named in docs/architecture.md.
BASE_AT_ROOT: set[str] = set()
# Root modules whose home is a folder they have not moved to yet (docs/architecture.md says why), held
# to the rules of the layer they belong to meanwhile. None now: kept for the next one.
NOT_YET_MOVED: dict[str, str] = {}
# What the layers above may import of a layer: its package (and its `__all__`) and these modules.
PUBLIC = {
    "lakeloader.engine": {
        "lakeloader.engine",
        "lakeloader.engine.tombstones",  # the side table jobs maintain
        "lakeloader.engine.reconciliation",  # what the run record and `status` read of a commit
    },
    "lakeloader.iceberg": {
        "lakeloader.iceberg",
        "lakeloader.iceberg.commit",
        "lakeloader.iceberg.retry",
        "lakeloader.iceberg.s3_tables",
    },
}
# Spellings of Iceberg table operations: only lakeloader/iceberg/ writes them.
ICEBERG_ONLY = re.compile(
    r"loadIcebergTable|TableMetadataParser|CommitMetadata|SparkActions|\.system\.|\} (?:CREATE|DROP) BRANCH|"
    r"SET TBLPROPERTIES|\.refs\b"
)
# Spark's case mapping: F.upper(...) and the like, and the SQL functions; not Python's str.lower().
ICU_CASE_MAPPING = re.compile(
    r"\bF\.(?:upper|lower|initcap)\(|(?<![.\w])(?:upper|lower|initcap|ucase|lcase)\("
)


REPO = PACKAGE.parent
PACKAGES = ("lakeloader", "infra", "lakeloader_dev")


@functools.cache
def module_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports, at the top, inside a function or under TYPE_CHECKING:
    an import deferred into a function, or kept to type hints, to dodge a cycle is still the cycle."""
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
        names = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names += [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
        graph[module] = {found for name in names if (found := known(name)) and found != module}
    return graph


def layer(module: str) -> int:
    """0 for the top layer, len(LAYERS) for the base."""
    module = NOT_YET_MOVED.get(module, module)
    for rank, name in enumerate(LAYERS):
        if module == name or module.startswith(name + "."):
            return rank
    return len(LAYERS)


def shipped_modules() -> list[str]:
    return sorted(m for m in module_graph() if m.split(".")[0] == "lakeloader")


def test_the_root_holds_base_modules_the_docs_name():
    """A module of an upper layer at the root would escape its layer's rules: each lives in its folder."""
    root = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__"}
    waiting = {module.removeprefix("lakeloader.") for module in NOT_YET_MOVED}
    assert root - waiting == BASE_AT_ROOT
    assert waiting <= root, "moved: drop it from NOT_YET_MOVED"
    docs = (REPO / "docs" / "architecture.md").read_text()
    assert sorted(name for name in root if f"`{name}.py`" not in docs) == []


def test_a_module_calls_its_own_layer_and_those_below():
    upward = {
        module: sorted(m for m in module_graph()[module] if layer(m) < layer(module))
        for module in shipped_modules()
    }
    assert {module: found for module, found in upward.items() if found} == {}, "imports of a layer above"


def test_a_lower_layer_is_reached_through_its_public_surface():
    def owner(imported: str) -> str | None:
        return next((p for p in PUBLIC if imported == p or imported.startswith(p + ".")), None)

    private = {
        module: sorted(
            m
            for m in module_graph()[module]
            if owner(m) not in (None, owner(module)) and m not in PUBLIC[owner(m)]
        )
        for module in shipped_modules()
    }
    assert {module: found for module, found in private.items() if found} == {}, "past a public surface"


def test_the_engine_surface_is_what_it_exports():
    """`from lakeloader.engine import X` resolves to the package: X must be in its `__all__`."""
    import lakeloader.engine

    used = set()
    for path in PACKAGE.rglob("*.py"):
        if "engine" in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "lakeloader.engine":
                used |= {alias.name for alias in node.names}
    assert used and used <= set(lakeloader.engine.__all__)
    assert set(lakeloader.engine.__all__) <= used, "exported and used by no layer above: drop it"


def test_only_the_iceberg_layer_spells_table_operations():
    spelled = {
        str(path.relative_to(PACKAGE)): sorted(set(ICEBERG_ONLY.findall(path.read_text())))
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] != "iceberg"
    }
    assert {name: found for name, found in spelled.items() if found} == {}


def test_no_spark_case_mapping_anywhere():
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if ICU_CASE_MAPPING.search(line)
    ]
    assert not found, "use lakeloader.formats.base.ascii_upper / ascii_lower:\n" + "\n".join(found)


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
