"""Stands in for the development package inside an emulated Glue/EMR run.

A shipped module that imports `lakeloader_dev` would fail on AWS, where the package does not
exist; this stub (first on PYTHONPATH) makes it fail the same way here.
"""

raise ImportError("lakeloader_dev is development tooling and is not shipped to Glue or EMR")
