"""`python -m infra.prefetch` (`make setup`): fetch every wheel the stack ships, while PyPI is reachable.

The jobs' wheels (Glue's zip of wheels, EMR's unpacked archive) and the Lambdas' wheels go into
`.lakeloader/wheels/`; synth then only checks them there and never needs a package index.
"""

from __future__ import annotations

from infra.lambda_code import fetch_lambda_wheels
from infra.packaging import emr_deps_archive, glue_wheels_zip

if __name__ == "__main__":
    print(glue_wheels_zip())
    print(emr_deps_archive())
    print(*fetch_lambda_wheels(), sep="\n")
