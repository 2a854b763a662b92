"""The infra constructs' surfaces, read from the source (no synth): each construct takes its own few
settings (a small frozen dataclass, or keyword arguments of infra.settings_names' StageNames and
Retention), never the whole `Stage` model, which the stack alone reads (infra.stack builds each
construct's settings from it); and no construct's `__init__` runs over 60 lines."""

from __future__ import annotations

import ast
from pathlib import Path

INFRA = Path(__file__).resolve().parents[2] / "infra"
MAX_INIT_LINES = 60
WHOLE_MODEL = {"Stage", "StageSettings"}
# The app resolves the Stage model from cdk.json, the stack composes the constructs from it, and the
# settings modules define it.
READS_THE_WHOLE_MODEL = {"app.py", "stack.py"}


def modules() -> dict[str, ast.Module]:
    return {path.name: ast.parse(path.read_text()) for path in sorted(INFRA.glob("*.py"))}


def construct_inits(tree: ast.Module) -> list[tuple[str, ast.FunctionDef]]:
    """The `__init__` of each class built in a construct scope: a Construct or Stack subclass, or a
    class whose `__init__` takes the scope its resources go in (infra.emr.EmrServerless)."""
    found = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        if init is None:
            continue
        bases = {base.id for base in node.bases if isinstance(base, ast.Name)}
        first = init.args.args[1] if len(init.args.args) > 1 else None
        takes_scope = (
            first is not None
            and isinstance(first.annotation, ast.Name)
            and first.annotation.id == "Construct"
        )
        if bases & {"Construct", "Stack"} or takes_scope:
            found.append((node.name, init))
    return found


def names_in(node: ast.AST | None) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} if node is not None else set()


def test_the_scan_finds_the_constructs():
    found = {name for tree in modules().values() for name, _ in construct_inits(tree)}
    assert {"LakeloaderStack", "LakeStorage", "Processing", "EmrServerless", "VerifyAccess"} <= found
    assert len(found) >= 20


def test_no_construct_init_runs_over_60_lines():
    long = [
        f"infra/{module}: {name}.__init__ is {init.end_lineno - init.lineno + 1} lines"
        for module, tree in modules().items()
        for name, init in construct_inits(tree)
        if init.end_lineno - init.lineno + 1 > MAX_INIT_LINES
    ]
    assert not long, "split into named private methods or sub-constructs: " + "; ".join(long)


def test_no_construct_takes_the_whole_stage_model():
    taking = []
    for module, tree in modules().items():
        if module in READS_THE_WHOLE_MODEL:  # the stack, which builds the others' settings from it
            continue
        for name, init in construct_inits(tree):
            for arg in [*init.args.args, *init.args.kwonlyargs]:
                if names_in(arg.annotation) & WHOLE_MODEL:
                    taking.append(f"infra/{module}: {name}({arg.arg}: {ast.unparse(arg.annotation)})")
    assert not taking, "give it its own few settings, built in infra.stack: " + "; ".join(taking)


def test_only_the_app_and_the_stack_read_the_whole_stage_model():
    """Nor does a helper of a construct module (a check, a grant) take it: it would be the construct's
    way back to the whole model."""
    readers = []
    for module, tree in modules().items():
        if module in READS_THE_WHOLE_MODEL or module.startswith("settings"):
            continue
        imported = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "infra.settings"
            for alias in node.names
        }
        annotated = {
            name
            for node in ast.walk(tree)
            if isinstance(node, ast.arg)
            for name in names_in(node.annotation) & WHOLE_MODEL
        }
        if (imported | annotated) & WHOLE_MODEL:
            readers.append(f"infra/{module}: {sorted((imported | annotated) & WHOLE_MODEL)}")
    assert not readers, "only infra.stack builds constructs' settings from the Stage model: " + "; ".join(
        readers
    )
