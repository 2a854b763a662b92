"""The trigger's loop at N tables found by one `sources:` entry (issue 67 item 4), on a moto server over HTTP.

    python -m benchmarks.found_tables --tables 10 100 1000 [--tables-per-run 10] [--window 900]

For each N: a config table holding one source (the stage's config sync writes it), the ledger and run
tables, and a Glue job, on moto's server in a process of its own, as the emulator runs (the
emulator's base, without its Glue runner: a started run runs nothing, so only the trigger is timed).
Then, as the S3-arrival Lambda sees them (the handler in this process, its clients over HTTP):

- one file in each of N new tables, one event each: each table found, recorded in the config table,
  its file recorded (prod's batching window defers the start to the sweep): time per object;
- a second file in each table (the table known): time per object;
- the sweep over the N tables: its time, and the runs it starts (target: at most
  ceil(N / tables_per_run), never one per file);
- `lakeloader status` over the N tables (the stage verb's code, on the same tables): its time
  (target <= 10 s at 1,000), the part of it that loads the config and the part that reads the ledger,
  its requests to the ledger and run tables, and the CPU seconds it took (this process and the
  emulator's: on a loaded machine the wall time is that CPU time stretched by the load);
- the config table's requests: per arrival once the routes are cached, per sweep, and what one job
  run's config load (`load_tables_from_dynamodb`) costs.

Prints one table of figures; benchmarks/RESULTS.md keeps the latest.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import multiprocessing
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

SOURCE_ID = "bench"


def _requests(client: Any, table: str) -> Counter:
    """Count the requests a boto3 client makes to one DynamoDB table, by operation (its event hook)."""
    counts: Counter = Counter()

    def count(model: Any, params: dict[str, Any], **_: Any) -> None:
        if params.get("TableName") == table:
            counts.update([model.name])

    client.meta.events.register("provide-client-params.dynamodb.*", count)
    return counts


def _record(key: str) -> dict[str, Any]:
    return {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventName": "ObjectCreated:Put",
        "eventTime": "2026-11-03T09:00:00.000Z",
        "s3": {
            "bucket": {"name": "bench-raw"},
            "object": {"key": key, "size": 1024, "eTag": f"e{abs(hash(key))}", "sequencer": "01"},
        },
    }


def _cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far (Linux: /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(tables: int, tables_per_run: int, window: int, server_pid: int) -> dict[str, Any]:
    import boto3

    from lakeloader.cli import operate
    from lakeloader.cli.stage import DeployedStage
    from lakeloader.config.items import load_tables_from_dynamodb
    from lakeloader.control import trigger as trigger_module
    from lakeloader.control.config_store import source_item, sync_items
    from lakeloader.control.trigger import Trigger, TriggerSettings
    from lakeloader.control.trigger.events import ObjectsArrived, SweepRequest

    suffix = f"{tables}-{int(time.time() * 1000)}"
    dynamodb, glue = boto3.client("dynamodb"), boto3.client("glue")
    names = {}
    for what, sort_key in (("config", None), ("ledger", "object_id"), ("runs", "run_id")):
        name = f"bench-{what}-{suffix}"
        keys = [{"AttributeName": "table_id", "KeyType": "HASH"}]
        attributes = [{"AttributeName": "table_id", "AttributeType": "S"}]
        if sort_key:
            keys.append({"AttributeName": sort_key, "KeyType": "RANGE"})
            attributes.append({"AttributeName": sort_key, "AttributeType": "S"})
        dynamodb.create_table(
            TableName=name, KeySchema=keys, AttributeDefinitions=attributes, BillingMode="PAY_PER_REQUEST"
        )
        names[what] = name
    job = f"bench-ingest-{suffix}"
    glue.create_job(
        Name=job,
        Role="arn:aws:iam::123456789012:role/bench",
        Command={"Name": "glueetl", "ScriptLocation": "s3://assets/ingest.py"},
        ExecutionProperty={"MaxConcurrentRuns": 1000},
    )
    source = {
        "id": SOURCE_ID,
        "prefix": "erp/",
        "format": "parquet",
        "cdc": "dms",
        "layout": "<schema>/<table>/",
        "defaults": {"sequence_by": "last_update_time", "trigger": {"min_interval_seconds": window}},
        "keys": {"*": ["id"]},
    }
    sync_items(names["config"], [source_item(source)], client=dynamodb)
    settings = TriggerSettings(
        config_table=names["config"],
        ledger_table=names["ledger"],
        runs_table=names["runs"],
        glue_job_name=job,
        raw_bucket="bench-raw",
        log_level="WARNING",
        config_cache_seconds=60.0,
        tables_per_run=tables_per_run,
    )
    trigger_module.clear_caches()
    client = boto3.client("dynamodb")
    calls = _requests(client, names["config"])
    trigger = Trigger(settings, dynamodb=client, glue=glue)
    ids = [f"app.t{n:04d}" for n in range(tables)]

    def arrive(file: str) -> float:
        started = time.perf_counter()
        for table_id in ids:
            key = f"erp/app/{table_id.split('.')[1]}/{file}"
            trigger.handle(ObjectsArrived.read({"Records": [_record(key)]}, correlation_id=f"c-{key}"))
        return (time.perf_counter() - started) / tables

    first = arrive("LOAD00000001.parquet")
    config_per_new_table = sum(calls.values()) / tables
    calls.clear()
    second = arrive("20261103-0900.parquet")
    config_per_arrival = sum(calls.values()) / tables

    calls.clear()
    started = time.perf_counter()
    swept = trigger.sweep(SweepRequest(correlation_id="sweep", table_ids=()))
    sweep_seconds = time.perf_counter() - started
    sweep_scans = calls["Scan"]
    runs = len(glue.get_job_runs(JobName=job, MaxResults=1000)["JobRuns"])

    stage = DeployedStage(
        raw_bucket="bench-raw",
        warehouse="s3://bench-warehouse/",
        config_table=names["config"],
        ledger_table=names["ledger"],
        runs_table=names["runs"],
        ingest_job=job,
        arrival_function="bench-arrival",
    )
    job_client = boto3.client("dynamodb")
    job_calls = _requests(job_client, names["config"])
    loaded = load_tables_from_dynamodb(names["config"], client=job_client)
    started, cpu = time.perf_counter(), _cpu_seconds(os.getpid()) + _cpu_seconds(server_pid)
    ledger = stage.ledger()
    ledger_calls = _requests(ledger.client, names["ledger"])
    runs_calls = _requests(ledger.client, names["runs"])
    deployed = stage.tables()
    config_seconds = time.perf_counter() - started
    statuses = operate.stage_statuses(ledger, deployed)
    ledger_seconds = time.perf_counter() - started - config_seconds
    stage.held_tables()
    operate.status_report(statuses)
    status_seconds = time.perf_counter() - started
    status_cpu = _cpu_seconds(os.getpid()) + _cpu_seconds(server_pid) - cpu
    return {
        "tables": tables,
        "found": len(loaded),
        "first file, ms/object": first * 1000,
        "known table, ms/object": second * 1000,
        "config requests/new table": config_per_new_table,
        "config requests/arrival": config_per_arrival,
        "sweep, s": sweep_seconds,
        "sweep config scans": sweep_scans,
        "runs started": runs,
        "runs target": math.ceil(tables / tables_per_run),
        "started by sweep": len(swept["started"]),
        "status, s": status_seconds,
        "of which config load, s": config_seconds,
        "of which ledger reads, s": ledger_seconds,
        "status CPU (CLI + emulator), s": status_cpu,
        "status ledger+runs requests": sum(ledger_calls.values()) + sum(runs_calls.values()),
        "job config load: Scan pages": job_calls["Scan"],
    }


def _serve(address: Any) -> None:
    """moto's server in a process of its own, as the emulator runs beside the CLI and the Lambda
    (`python -m lakeloader_dev.local up`): its address on `address`, then serve until terminated."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    address.put(server.get_host_and_port())
    threading.Event().wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.found_tables", description=__doc__)
    parser.add_argument("--tables", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--tables-per-run", type=int, default=10, help="prod's batching.tables_per_run")
    parser.add_argument("--window", type=int, default=900, help="prod's batching.window_seconds")
    args = parser.parse_args(argv)

    context = multiprocessing.get_context("spawn")
    address = context.Queue()
    server = context.Process(target=_serve, args=(address,), daemon=True)
    server.start()
    host, port = address.get(timeout=120)
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
        }
    )
    os.environ.pop("AWS_PROFILE", None)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the sweep's metrics are log lines on stdout
            rows = [measure(n, args.tables_per_run, args.window, server.pid) for n in args.tables]
    finally:
        server.terminate()
        server.join()
    header = list(rows[0])
    print(" | ".join(header))
    for row in rows:
        print(" | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in row.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
