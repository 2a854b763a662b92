"""EMR Serverless (or EMR step) entry point: merge a table's pending raw objects into Iceberg.

Thin by design: parse the arguments, hand them to `lakeloader.jobs.ingest_main` with the
same keys the Glue job resolves. `lakeloader` arrives with `--py-files` (the zip built by
`cdk synth`); the S3-arrival Lambda starts runs with the arguments in EMR_EXTRA_ARGS plus
`--table-id` and `--correlation-id`.
"""

from __future__ import annotations

import argparse
import sys

from lakeloader.jobs import ingest_main


def parse_args(argv: list[str] | None = None) -> dict[str, str]:
    parser = argparse.ArgumentParser(prog="ingest", description=__doc__.splitlines()[0])
    parser.add_argument("--config-table", required=True, help="DynamoDB config table")
    parser.add_argument("--ledger-table", required=True, help="DynamoDB object ledger")
    parser.add_argument("--runs-table", required=True, help="DynamoDB run history")
    parser.add_argument("--raw-root", required=True, help="s3://<raw-bucket>/")
    parser.add_argument("--warehouse", required=True, help="s3://<curated-bucket>/warehouse/")
    parser.add_argument("--table-id", default="", help="the table to run, or a comma-separated list")
    parser.add_argument("--correlation-id", default="", help="ties the run to the event that started it")
    parser.add_argument("--database-prefix", default="", help="the stage's Glue database prefix")
    parser.add_argument("--parallel-tables", default="", help="how many tables to drain at once (default 1)")
    parsed = parser.parse_args(argv)
    return {f"lakeloader_{name}": value for name, value in vars(parsed).items()}


if __name__ == "__main__":
    sys.exit(ingest_main(parse_args(), runtime="emr"))
