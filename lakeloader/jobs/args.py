"""The job arguments of the Glue and EMR entry points, resolved into one dict keyed by contract.ARG_*.

Glue passes `--lakeloader_<name> value` (resolved with awsglue's getResolvedOptions, which
exists on Glue only); the EMR scripts take `--<name> value` (argparse). Either way
`lakeloader.jobs.main` gets the same keys. docs/jobs.md lists the arguments.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from lakeloader.control import contract

HELP = {
    contract.ARG_CONFIG_TABLE: "DynamoDB config table",
    contract.ARG_LEDGER_TABLE: "DynamoDB object ledger",
    contract.ARG_RUNS_TABLE: "DynamoDB run history",
    contract.ARG_RAW_ROOT: "s3://<raw-bucket>/",
    contract.ARG_WAREHOUSE: "s3://<curated-bucket>/warehouse/",
    contract.ARG_TABLE_ID: "the table to run (ingest: or a comma-separated list); empty: every enabled table",
    contract.ARG_CORRELATION_ID: "ties the run to the event that started it",
    contract.ARG_DATABASE_PREFIX: "the stage's Glue database prefix",
    contract.ARG_PARALLEL_TABLES: "how many tables to drain at once (default 1)",
    contract.ARG_MAX_ATTEMPTS: "failures of one file before it is quarantined (default 3)",
    contract.ARG_REBUILD: "true: build the run's tables again from their ledger objects first",
    contract.ARG_RAW_ZONE_ERASED: "true: a rebuild may run although erasures are on record",
}


def glue_args(argv: Sequence[str], optional: Sequence[str]) -> dict[str, str]:
    """The Glue job's arguments. getResolvedOptions fails on a name absent from argv: the job's
    DefaultArguments carry the required ones, and an optional one Glue did not pass resolves to ""."""
    from awsglue.utils import getResolvedOptions  # Glue's runtime provides it

    present = [name for name in optional if contract.glue_arg(name) in argv]
    args = getResolvedOptions(list(argv), [*contract.JOB_REQUIRED_ARGS, *present])
    for name in optional:
        args.setdefault(name, "")
    return args


def emr_args(argv: Sequence[str], optional: Sequence[str]) -> dict[str, str]:
    """The EMR script's options (`argv` as sys.argv has it); a missing required one exits with usage (2)."""
    parser = argparse.ArgumentParser(prog=Path(argv[0]).name if argv else None)
    for name in contract.JOB_REQUIRED_ARGS:
        parser.add_argument(contract.emr_arg(name), dest=name, required=True, help=HELP[name])
    for name in optional:
        parser.add_argument(contract.emr_arg(name), dest=name, default="", help=HELP[name])
    return vars(parser.parse_args(list(argv[1:])))
