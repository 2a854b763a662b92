"""What ships is `lakeloader/` alone: the installed package holds no development tooling and no shipped
module imports it (the CLI finds the checkout's jars through the settings file they leave behind)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest
from setuptools import find_packages

REPO = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_shipped_module_imports_the_development_tooling():
    reaching = {
        str(path.relative_to(REPO)): sorted(
            m for m in imported_modules(path) if m.startswith("lakeloader_dev")
        )
        for path in (REPO / "lakeloader").rglob("*.py")
    }
    assert {path: found for path, found in reaching.items() if found} == {}


def test_the_installed_package_holds_no_development_tooling():
    """The packages setuptools installs from pyproject.toml's `find` settings."""
    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    installed = find_packages(str(REPO), include=find["include"], exclude=find.get("exclude", ()))
    assert "lakeloader" in installed and "lakeloader.control.trigger" in installed
    assert sorted(p for p in installed if p.split(".")[0] != "lakeloader") == []


def test_the_cli_finds_the_jars_the_assembly_recorded(tmp_path, monkeypatch):
    """The jar assembly (development tooling) records its Spark settings; the shipped runtime reads
    that file, never the module. Without it, the error names the file and the two ways out."""
    from lakeloader.control import runtimes
    from lakeloader.spark.errors import LakeloaderError
    from lakeloader.spark.session import JARS_ENV, SparkSettings, jar_conf_path, local_conf

    monkeypatch.setenv("LAKELOADER_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(JARS_ENV, raising=False)
    settings = SparkSettings(warehouse=str(tmp_path / "warehouse"))
    recorded = re.escape(f"spark-conf-{runtimes.local().name}.json")  # the runtime this checkout runs
    with pytest.raises(LakeloaderError, match=rf"{recorded} does not name them.*make setup"):
        local_conf(settings)

    jar_conf_path().parent.mkdir(parents=True)
    # as lakeloader_dev.jars records it
    jar_conf_path().write_text('{"spark.jars": "/jars/iceberg.jar,/jars/aws.jar"}')
    assert local_conf(settings)["spark.jars"] == "/jars/iceberg.jar,/jars/aws.jar"
    monkeypatch.setenv(JARS_ENV, "/elsewhere/iceberg.jar")
    assert local_conf(settings)["spark.jars"] == "/elsewhere/iceberg.jar"
