"""Cost and freshness of S3-arrival runs: today's run per arrival against batched arrivals.

`python -m benchmarks.cost` drives the real trigger (`lakeloader.control.trigger.Trigger`: handle and sweep)
and the real ledger (`lakeloader.control.ledger.Ledger`: record, locks, windows, the job's drain protocol)
against DynamoDB in the embedded emulator (moto over HTTP), with a simulated clock. Only the Glue
runs are a model (`model.RunModel`): a run's time is a fixed start-up plus, per table batch, a fixed
merge cost and a size-dependent term, billed per second with Glue 5.x's 1-minute minimum at the
stage's DPUs. See `sim.py` for the event loop and `__main__.py` for the options.
"""
