"""A/B of a run's ledger writes: claiming and finishing a batch's objects one write at a time, or
`lakeloader.control.ledger.base.WRITES_IN_FLIGHT` at a time.

    python -m benchmarks.ab_ledger_writes --objects 1000 --reps 6

The ledger on the emulator's DynamoDB, in a process of its own (`lakeloader_dev.local.up`), so
the harness's threads and the emulator do not share one interpreter. The same objects are claimed
and given back each repetition, alternating which variant goes first. Prints each repetition and
the medians. The emulator handles each write in Python, so its own time per write bounds what
writes in flight can save here; on DynamoDB a write is mostly a network round trip. See
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab_ledger_writes", description=__doc__)
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=6)
    args = parser.parse_args(argv)

    import boto3

    from benchmarks.backfill import create_table
    from lakeloader.control.ledger import PENDING, Ledger, ObjectRef, base
    from lakeloader_dev import local
    from lakeloader_dev.emulator import aws_env

    work = Path(tempfile.mkdtemp(prefix="lakeloader-ab-ledger-"))
    try:
        os.environ.update(aws_env(local.up(work)["endpoint"]))
        client = boto3.client("dynamodb")
        ledger = Ledger(
            client,
            create_table(client, "ledger", "table_id", "object_id"),
            create_table(client, "runs", "table_id", "run_id"),
        )
        for i in range(args.objects):
            ref = ObjectRef(bucket="raw", key=f"crm/ab/{i:06d}.parquet", etag=f"e{i}", size=1)
            ledger.record("crm.ab", ref, correlation_id="ab")
        variants = {1: [], base.WRITES_IN_FLIGHT: []}
        for rep in range(args.reps):
            for in_flight in variants if rep % 2 == 0 else reversed(list(variants)):
                base.WRITES_IN_FLIGHT = in_flight
                run_id = f"ab-{rep}-{in_flight}"
                objects = ledger.pending_objects("crm.ab")
                started = time.perf_counter()
                claimed = ledger.claim("crm.ab", objects, run_id)
                claiming = time.perf_counter() - started
                given_back = ledger.finish("crm.ab", claimed, run_id, PENDING)
                finishing = time.perf_counter() - started - claiming
                if not len(claimed) == len(given_back) == args.objects:
                    raise SystemExit(f"{run_id}: claimed {len(claimed)}, finished {len(given_back)}")
                variants[in_flight].append((claiming, finishing))
                print(f"{in_flight} in flight: claim {claiming:.2f} s, finish {finishing:.2f} s", flush=True)
        for in_flight, times in variants.items():
            claim, finish = (statistics.median(t[i] for t in times) for i in (0, 1))
            print(f"{in_flight} in flight, {args.objects:,} objects, medians: claim {claim:.2f} s, ", end="")
            print(f"finish {finish:.2f} s")
    finally:
        local.down(work)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
