"""EMR Serverless entry point: merge pending raw objects into Iceberg (`lakeloader.jobs.ingest_main`).

`lakeloader` arrives with `--py-files` (the zip `cdk synth` builds); docs/jobs.md lists the
arguments (`--config-table` ...; the S3-arrival Lambda passes the stack's plus `--table-id`
and `--correlation-id`).
"""

import sys

from lakeloader.control.contract import INGEST_OPTIONAL_ARGS
from lakeloader.jobs import ingest_main
from lakeloader.jobs.args import emr_args

if __name__ == "__main__":
    sys.exit(ingest_main(emr_args(sys.argv, INGEST_OPTIONAL_ARGS), runtime="emr"))
