"""AWS Glue entry point: merge pending raw objects into Iceberg (`lakeloader.jobs.ingest_main`).

`lakeloader` arrives through `--extra-py-files` (the zip `cdk synth` builds); docs/jobs.md lists
the job arguments.
"""

import sys

from lakeloader.control.contract import INGEST_OPTIONAL_ARGS
from lakeloader.jobs import ingest_main
from lakeloader.jobs.args import glue_args

if __name__ == "__main__":
    sys.exit(ingest_main(glue_args(sys.argv, INGEST_OPTIONAL_ARGS), runtime="glue"))
