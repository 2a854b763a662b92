"""Development tooling beside the runtime package: never shipped to Glue or EMR.

The embedded AWS emulator (`emulator/`), the `python -m lakeloader_dev.local` service (`local.py`), the demos
(`demo.py`) and the offline assembly of the local Spark jars (`jars.py`). `infra.packaging`
zips `lakeloader/` only; a test fails if anything shipped imports this package.
"""
