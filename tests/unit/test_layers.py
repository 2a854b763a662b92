"""The layers of lakeloader/ (docs/architecture.md), read from the source (imports and spellings), no
Spark needed: every module is in a named layer, each layer calls only its own and the ones below it
(so the bottom one, lakeloader/control/, which the Lambda bundles ship whole, imports nothing else),
a layer below the jobs is reached only through its public surface, only the Iceberg layer spells
table operations, and no import cycle anywhere. No exceptions. And nowhere does Spark map case
(`upper`, `lower`, `initcap`): Spark 4 does it through ICU, whose case data take about a second to load
in every new JVM, each Glue 6.0 job run among them; lakeloader.formats.base.ascii_upper and
ascii_lower map the ASCII letters (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "lakeloader"
# Every layer, top down, each a folder named in docs/architecture.md; a module in none fails. The
# package's own __init__ (`lakeloader`) is the one module outside them, and imports nothing.
LAYERS = (
    "lakeloader.cli",  # the laptop's command line
    "lakeloader.jobs",  # the Glue/EMR job bodies
    "lakeloader.engine",  # one batch prepared and committed
    "lakeloader.iceberg",  # table operations and the commit path
    "lakeloader.config",  # the pydantic config model (synth, the CLI, the jobs)
    "lakeloader.formats",  # the source formats
    "lakeloader.spark",  # the job side's shared kit: the SparkSession, SQL quoting, inputs, errors ...
    "lakeloader.control",  # the Lambda side: trigger, ledger, config store, grants, contract, runtimes
)
ROOT = "lakeloader"
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


def layer(module: str) -> int | None:
    """0 for the top layer; None for a module in none."""
    for rank, name in enumerate(LAYERS):
        if module == name or module.startswith(name + "."):
            return rank
    return None


def shipped_modules() -> list[str]:
    return sorted(m for m in module_graph() if m.split(".")[0] == "lakeloader")


def test_every_module_is_in_a_named_layer():
    """A module outside the layers would escape their rules: each lives in its layer's folder."""
    assert [m for m in shipped_modules() if m != ROOT and layer(m) is None] == []
    assert module_graph()[ROOT] == set()
    docs = (REPO / "docs" / "architecture.md").read_text()
    assert [name for name in LAYERS if f"`{name.replace('.', '/')}/" not in docs] == []


def test_a_module_calls_its_own_layer_and_those_below():
    upward = {
        module: sorted(m for m in module_graph()[module] if (layer(m) or 0) < (layer(module) or 0))
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
