"""EMR Serverless (or EMR step) entry point: Iceberg table maintenance.

Thin by design: parse the arguments, hand them to `lakeloader.jobs.maintain_main` with the
same keys the Glue job resolves. `lakeloader` arrives with `--py-files` (the zip built by
`cdk synth`); run it with the arguments in the EMR_EXTRA_ARGS of the stack plus
`--table-id` and `--correlation-id`.
"""

from __future__ import annotations

import argparse
import sys

from lakeloader.jobs import maintain_main


def parse_args(argv: list[str] | None = None) -> dict[str, str]:
    parser = argparse.ArgumentParser(prog="maintain", description=__doc__.splitlines()[0])
    parser.add_argument("--config-table", required=True, help="DynamoDB config table")
    parser.add_argument("--ledger-table", required=True, help="DynamoDB object ledger")
    parser.add_argument("--runs-table", required=True, help="DynamoDB run history")
    parser.add_argument("--raw-root", required=True, help="s3://<raw-bucket>/")
    parser.add_argument("--warehouse", required=True, help="s3://<curated-bucket>/warehouse/")
    parser.add_argument("--table-id", default="", help="the table to maintain ( = every enabled table)")
    parser.add_argument("--correlation-id", default="", help="ties the run to the event that started it")
    parser.add_argument("--database-prefix", default="", help="the stage's Glue database prefix")
    parsed = parser.parse_args(argv)
    return {f"lakeloader_{name}": value for name, value in vars(parsed).items()}


if __name__ == "__main__":
    sys.exit(maintain_main(parse_args(), runtime="emr"))
