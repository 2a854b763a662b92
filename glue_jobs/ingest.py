"""AWS Glue entry point: merge a table's pending raw objects into Iceberg.

Thin by design: resolve the job arguments, hand them to `lakeloader.jobs.ingest_main`.
The `lakeloader` package arrives through `--extra-py-files` (a zip built by `cdk synth`).

Job arguments (DefaultArguments set by infra/processing.py; the S3-arrival Lambda passes
the last two per run):

    --lakeloader_config_table      DynamoDB config table
    --lakeloader_ledger_table      DynamoDB object ledger
    --lakeloader_runs_table        DynamoDB run history
    --lakeloader_raw_root          s3://<raw-bucket>/
    --lakeloader_warehouse         s3://<curated-bucket>/warehouse/
    --lakeloader_table_id          the table to run, or a comma-separated list ("" in the defaults: all)
    --lakeloader_correlation_id    ties the run to the event that started it ("" in the defaults)
    --lakeloader_database_prefix   the stage's Glue database prefix ("" or absent: the config's names)
    --lakeloader_parallel_tables   how many of the run's tables to drain at once (absent: 1)

getResolvedOptions fails on a name absent from argv; the job's DefaultArguments carry all
of them (the per-run ones as ""), and an optional name Glue did not pass resolves to "".
"""

import sys

from awsglue.utils import getResolvedOptions

from lakeloader.jobs import ingest_main

REQUIRED = [
    "lakeloader_config_table",
    "lakeloader_ledger_table",
    "lakeloader_runs_table",
    "lakeloader_raw_root",
    "lakeloader_warehouse",
]
OPTIONAL = [
    "lakeloader_table_id",
    "lakeloader_correlation_id",
    "lakeloader_database_prefix",
    "lakeloader_parallel_tables",
]


def resolve(argv: list[str]) -> dict[str, str]:
    present = [name for name in OPTIONAL if f"--{name}" in argv]
    args = getResolvedOptions(argv, REQUIRED + present)
    for name in OPTIONAL:
        args.setdefault(name, "")
    return args


if __name__ == "__main__":
    sys.exit(ingest_main(resolve(sys.argv), runtime="glue"))
