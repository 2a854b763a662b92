"""AWS Glue entry point: Iceberg table maintenance (`lakeloader.jobs.maintain_main`).

`lakeloader` arrives through `--extra-py-files` (the zip `cdk synth` builds); docs/jobs.md lists
the job arguments.
"""

import sys

from lakeloader.control.contract import MAINTAIN_OPTIONAL_ARGS
from lakeloader.jobs import maintain_main
from lakeloader.jobs.args import glue_args

if __name__ == "__main__":
    sys.exit(maintain_main(glue_args(sys.argv, MAINTAIN_OPTIONAL_ARGS), runtime="glue"))
