"""Where each ledger operation lives: `Ledger` is one object over parts (objects, actions, runs, lock,
window, over base's persistence), each operation defined in one part only, and
docs/ledger_and_trigger.md names the module of each."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from lakeloader.control.ledger import Ledger

DOC = Path(__file__).resolve().parents[2] / "docs" / "ledger_and_trigger.md"


def homes() -> dict[str, list[type]]:
    """Every public operation of `Ledger`, and the classes of its MRO that define it."""
    found: dict[str, list[type]] = {}
    for cls in Ledger.__mro__[:-1]:
        for name, value in vars(cls).items():
            # "ǁ": the copies of each method mutmut adds to the class under `make mutate`
            if not name.startswith("_") and "ǁ" not in name and inspect.isfunction(value):
                found.setdefault(name, []).append(cls)
    return found


def test_no_part_of_the_ledger_overrides_another():
    assert {name: [c.__name__ for c in where] for name, where in homes().items() if len(where) > 1} == {}


def test_the_docs_name_the_module_of_every_ledger_operation():
    rows = dict(re.findall(r"^\| `lakeloader/control/ledger/(\w+)\.py` \| (.*) \|$", DOC.read_text(), re.M))
    misplaced = {
        name: module
        for name, (cls,) in homes().items()
        if f"`{name}`" not in rows.get(module := cls.__module__.rsplit(".", 1)[1], "")
    }
    assert misplaced == {}
    assert len(homes()) > 30  # the operations were found
