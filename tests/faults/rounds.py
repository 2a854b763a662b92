"""A seeded workload delivered to a table in rounds, each round one run of the table (as the CLI runs
it: every file under the prefix is offered again; the ones consumed before must be skipped)."""

from __future__ import annotations

import random

from lakeloader.jobs.load import LoadResult, run_tables
from lakeloader.spark.inputs import list_inputs
from lakeloader.spark.session import CATALOG
from tests.faults import oracle


def deliver(
    spark, table, raw, work: oracle.Workload, rounds_seed: int
) -> list[tuple[list[oracle.RawFile], LoadResult]]:
    """Land the workload's files round by round, running the table after each round; each round's
    files with the run's result."""
    return deliver_rounds(spark, table, raw, work.rounds(random.Random(rounds_seed)))


def deliver_rounds(
    spark, table, raw, rounds: list[list[oracle.RawFile]]
) -> list[tuple[list[oracle.RawFile], LoadResult]]:
    """Land each round's files and run the table after it; each round's files with the run's result."""
    delivered = []
    for n, files in enumerate(rounds):
        for file in files:
            file.write(raw.root / "src")
        (result,) = run_tables(
            spark,
            [table],
            {table.id: list_inputs(str(raw.root), table.source.prefix)},
            catalog=CATALOG,
            run_id=f"round-{n}",
            progress=lambda message: None,
            log_consumed=True,
        )
        assert result.status == "ok", result.error
        assert result.files == len(files), f"round {n}: consumed {result.files} files, landed {len(files)}"
        delivered.append((files, result))
    return delivered
