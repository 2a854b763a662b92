"""Reproducible performance harness for lakeloader's merge (see benchmarks/RESULTS.md)."""
