"""The ledger's narrow interfaces (control/ledger/interfaces.py): `Ledger` implements each with the
same signatures, every caller is typed against interfaces rather than `Ledger` and uses only what
they name, and each interface names only operations its callers use."""

from __future__ import annotations

import ast
import functools
import inspect
import re
from pathlib import Path
from typing import Protocol

import pytest

from lakeloader.control.ledger import Ledger, interfaces

PACKAGE = Path(__file__).resolve().parents[2] / "lakeloader"
INTERFACES = {
    name: cls
    for name, cls in vars(interfaces).items()
    if inspect.isclass(cls) and issubclass(cls, Protocol) and cls.__module__ == interfaces.__name__  # type: ignore[arg-type]
}


def declared(cls: type) -> set[str]:
    """What an interface itself declares: its operations and attributes (not its bases')."""
    own = {n for n, v in vars(cls).items() if inspect.isfunction(v) and not n.startswith("_")}
    return own | set(vars(cls).get("__annotations__", {}))


def members(cls: type) -> set[str]:
    return set().union(*(declared(base) for base in cls.__mro__ if base.__name__ in INTERFACES))


def _assigns_param(node: ast.AST, params: dict[str, str]) -> bool:
    """`self.ledger = ledger`, the parameter typed against an interface kept as an attribute."""
    return isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in params


@functools.cache
def callers() -> list[tuple[str, str, str, int]]:
    """(module, interface, operation, line) for every use of a ledger typed against an interface: a
    parameter, a local or an attribute (`self.ledger`) annotated with one, anywhere in lakeloader/
    outside the ledger package."""
    uses = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "ledger" in path.relative_to(PACKAGE).parts[:1]:
            continue
        tree = ast.parse(path.read_text())
        module = str(path.relative_to(PACKAGE.parent))
        for scope in ast.walk(tree):
            if not isinstance(scope, ast.FunctionDef | ast.ClassDef):
                continue
            typed: dict[str, str] = {}  # "ledger" or "self.ledger" -> interface
            functions = [scope] if isinstance(scope, ast.FunctionDef) else []
            if isinstance(scope, ast.ClassDef):
                functions = [f for f in scope.body if isinstance(f, ast.FunctionDef)]
            for function in functions:
                params = {
                    a.arg: a.annotation.id
                    for a in function.args.args + function.args.kwonlyargs
                    if isinstance(a.annotation, ast.Name) and a.annotation.id in INTERFACES
                }
                if isinstance(scope, ast.FunctionDef):
                    typed |= params
                for node in ast.walk(function):
                    annotation = node.annotation if isinstance(node, ast.AnnAssign) else None
                    if isinstance(annotation, ast.Name) and annotation.id in INTERFACES:
                        typed[ast.unparse(node.target)] = annotation.id
                    elif isinstance(scope, ast.ClassDef) and _assigns_param(node, params):
                        for target in node.targets:
                            typed[ast.unparse(target)] = params[node.value.id]
            for node in ast.walk(scope):
                if isinstance(node, ast.Attribute) and ast.unparse(node.value) in typed:
                    uses.append((module, typed[ast.unparse(node.value)], node.attr, node.lineno))
    return uses


@pytest.mark.parametrize("name", sorted(INTERFACES))
def test_the_ledger_implements_each_interface_with_its_signatures(name):
    cls = INTERFACES[name]
    for member in members(cls):
        assert hasattr(Ledger(None, "ledger", "runs"), member), f"{name}.{member}"
        if inspect.isfunction(getattr(cls, member, None)):
            assert inspect.signature(getattr(cls, member)) == inspect.signature(getattr(Ledger, member)), (
                f"{name}.{member}"
            )


def test_callers_use_only_what_their_interfaces_name():
    uses = callers()
    assert {module for module, *_ in uses} >= {
        "lakeloader/jobs/drain.py",
        "lakeloader/jobs/reconcile.py",
        "lakeloader/control/trigger/handler.py",
        "lakeloader/control/trigger/starts.py",
        "lakeloader/cli/operate.py",
        "lakeloader/cli/verify.py",
    }
    beyond = [f"{m}:{line} {op} not in {i}" for m, i, op, line in uses if op not in members(INTERFACES[i])]
    assert beyond == []


def test_each_interface_names_only_operations_its_callers_use():
    used = {(i, op) for _, i, op, _ in callers()}
    unused = {
        f"{name}.{op}"
        for name, cls in INTERFACES.items()
        for op in declared(cls)
        if not any(op == o and cls in INTERFACES[i].__mro__ for i, o in used)
    }
    assert unused == set()


def test_no_caller_takes_the_whole_ledger():
    """Built where a stage's tables are known (the job's main, the trigger, the CLI's stage), the
    `Ledger` is passed on as the interfaces its callers name, never as itself."""
    typed = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            annotation = node.annotation if isinstance(node, ast.arg | ast.AnnAssign) else None
            if annotation is not None and re.search(r"\bLedger\b", ast.unparse(annotation)):
                typed.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert typed == []
