"""The job bodies: what the Glue and EMR entry points (`ingest_main`, `maintain_main`) and the CLI's
Spark verbs run. A job loads tables through the engine (`lakeloader.engine`) and keeps the run's
books: the ledger, the run summary (`load.LoadResult`), metrics."""

from lakeloader.jobs.main import ingest_main, maintain_main, with_database_prefix

__all__ = ["ingest_main", "maintain_main", "with_database_prefix"]
