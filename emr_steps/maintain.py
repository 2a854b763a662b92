"""EMR Serverless entry point: Iceberg table maintenance (`lakeloader.jobs.maintain_main`).

`lakeloader` arrives with `--py-files` (the zip `cdk synth` builds); docs/jobs.md lists the
arguments (`--config-table` ...).
"""

import sys

from lakeloader.control.contract import MAINTAIN_OPTIONAL_ARGS
from lakeloader.jobs import maintain_main
from lakeloader.jobs.args import emr_args

if __name__ == "__main__":
    sys.exit(maintain_main(emr_args(sys.argv, MAINTAIN_OPTIONAL_ARGS), runtime="emr"))
