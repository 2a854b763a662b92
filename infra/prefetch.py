"""`python -m infra.prefetch` (`make setup`): fetch every wheel the stack ships, while PyPI is reachable.

The jobs' wheels for every runtime a stage may name (lakeloader.control.runtimes: Glue 5.1's zip of wheels,
Glue 6.x's packed venv, for Graviton workers too where the runtime offers them, EMR's packed venv) and
the Lambdas' wheels go into
`.lakeloader/wheels/`; synth then only checks them there and never needs a package index.
"""

from __future__ import annotations

from infra.lambda_code import fetch_lambda_wheels
from infra.packaging import glue_wheels_zip
from infra.packed_venv import emr_venv_archive, glue_venv_archive, uses_python_venv
from lakeloader.control import runtimes

if __name__ == "__main__":
    for runtime in runtimes.RUNTIMES.values():
        glue = glue_venv_archive if uses_python_venv(runtime) else glue_wheels_zip
        print(glue(runtime=runtime))
        if runtime.graviton:
            print(glue_venv_archive(runtime=runtime, architecture=runtimes.AARCH64))
        print(emr_venv_archive(runtime=runtime))
    print(*fetch_lambda_wheels(), sep="\n")
