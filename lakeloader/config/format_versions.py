"""Which Iceberg format version a table may have where: format 3 (deletion vectors, row lineage) only
on a runtime whose Spark and Iceberg lakeloader tests it with, and never for a reader that queries
through Athena, which reads format 2 only. Checked at `cdk synth` (infra.settings) and by
`lakeloader tables --stage` (the same function, on cdk.json's stage): docs/format-versions.md.

Imports no PySpark: `cdk synth` and the CLI's config check run it without a JVM.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from lakeloader.config.table import TableConfig
from lakeloader.control import runtimes

# Athena's own words on its limit (Athena User Guide, "Query Apache Iceberg tables"; AWS Prescriptive
# Guidance "Working with Iceberg tables by using Athena SQL": "Athena supports table format version 2").
ATHENA_LIMIT = 'Athena "only creates and operates on Iceberg v2 tables"'
# The runtimes whose Spark and Iceberg lakeloader runs format-3 tables on (tests/spark/test_format_v3.py
# on glue-6.0; glue-6.1 runs the same Iceberg). glue-5.1's Iceberg 1.10 can write format 3, but no
# lakeloader test runs it there.
FORMAT_3_RUNTIMES = ("glue-6.0", "glue-6.1")
# A reader that names no engines queries through its Athena workgroup (infra.readers gives it one).
DEFAULT_ENGINES = ("athena",)


@dataclass(frozen=True)
class Reader:
    """A stage's reader as far as format versions go: who, which tables ("db.table" patterns), how."""

    name: str
    tables: Sequence[str]
    engines: Sequence[str] = DEFAULT_ENGINES


def queries_through_athena(engines: Sequence[str]) -> bool:
    """Does a reader naming these engines query through Athena: it gets an Athena workgroup
    (infra.readers), and no format-3 table."""
    return any(engine.lower() == "athena" for engine in engines)


def format_version_problems(
    tables: Iterable[TableConfig], runtime: runtimes.Runtime, readers: Iterable[Reader]
) -> list[str]:
    """One line per table whose format version the stage cannot give it, naming the table and why."""
    readers = list(readers)
    problems = []
    for table in tables:
        if table.target.format_version < 3:
            continue
        target = f"{table.target.database}.{table.target.table}"
        if runtime.name not in FORMAT_3_RUNTIMES:
            problems.append(
                f"table {table.id!r} has target.format_version 3, which runtime {runtime.name} does not "
                f"run (format 3 needs {' or '.join(FORMAT_3_RUNTIMES)}); keep it at 2 or change runtime"
            )
        for reader in readers:
            reads = any(fnmatchcase(target, pattern) for pattern in reader.tables)
            if reads and queries_through_athena(reader.engines):
                problems.append(
                    f"table {table.id!r} has target.format_version 3, and reader {reader.name} reads "
                    f"{target} through its Athena workgroup: {ATHENA_LIMIT}; keep the table at 2, or give "
                    "the reader engines: [spark] (or another engine that reads format 3)"
                )
    return problems
