"""`python -m benchmarks.cost`: runs per day, DPU-hours and $ per day, p50/p99 freshness.

Each behaviour is simulated once on a sample of tables and scaled to each `--tables` count and to a
day: today's behaviour treats every table alone (a run per arrival), so a sample of `--sample`
tables behaves like any other; batched tables share runs in fixed groups of `tables_per_run`, so one
group is the sample. With the defaults `today` takes about 1.5 minutes and each batched behaviour
about 5 (nearly all of it DynamoDB calls to moto); `--behaviours` runs a subset.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.cost.sim import DPU_PER_WORKER, Result, RunModel, Scenario, Simulation

REPO = Path(__file__).resolve().parents[2]


def stage_settings(stage: str):
    from infra.settings import resolve_stage

    context = json.loads((REPO / "cdk.json").read_text())["context"]
    return resolve_stage({**context, "stage": stage}).settings


def rate_seconds(schedule: str | None, default: int) -> int:
    match = re.match(r"^rate\(\s*(\d+)\s+(minute|hour|day)s?\s*\)$", schedule or "")
    return (
        int(match.group(1)) * {"minute": 60, "hour": 3600, "day": 86400}[match.group(2)] if match else default
    )


def scenarios(args, parallel: int, today_sweep: int) -> list[Scenario]:
    largest = max(args.tables)
    today = Scenario("today", largest, min(largest, args.sample), sweep_seconds=today_sweep)
    batched = Scenario(
        "batched",
        largest,
        min(largest, args.tables_per_run),
        window_seconds=args.window,
        tables_per_run=args.tables_per_run,
        parallel_tables=parallel,
        sweep_seconds=args.sweep,
    )
    flex = replace(batched, name="batched FLEX", execution_class="FLEX")
    chosen = {"today": today, "batched": batched, "flex": flex}
    return [chosen[name] for name in args.behaviours]


def table_rows(results: list[Result], counts: list[int]) -> list[str]:
    rows = [
        "| tables | behaviour | runs/day | DPU-hours/day | $/day | freshness p50 | freshness p99 |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for count in counts:
        for result in results:
            scaled = replace(result, scenario=replace(result.scenario, tables=count))
            day = scaled.per_day()
            rows.append(
                f"| {count} | {result.scenario.name} | {day['runs']:,.0f} | {day['dpu_hours']:,.0f} | "
                f"${day['dollars']:,.0f} | {day['p50']:.0f} s | {day['p99']:.0f} s |"
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cost", description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, nargs="+", default=[50, 500], help="table counts to report")
    parser.add_argument("--stage", default="prod", help="cdk.json stage whose ingest workers set the DPUs")
    parser.add_argument("--files-per-minute", type=float, default=1.0, help="arrivals per table per minute")
    parser.add_argument("--file-mb", type=float, default=1.0, help="size of each file")
    parser.add_argument("--minutes", type=float, default=60, help="simulated clock per behaviour")
    parser.add_argument("--warmup", type=float, default=10, help="minutes left out of the figures")
    parser.add_argument("--sample", type=int, default=10, help="tables simulated for today's behaviour")
    parser.add_argument("--window", type=int, default=300, help="batched: trigger.min_interval_seconds")
    parser.add_argument("--tables-per-run", type=int, default=50, help="batched: batching.tables_per_run")
    parser.add_argument(
        "--parallel", type=int, help="batched: batching.parallel_tables (default: the stage's)"
    )
    parser.add_argument("--sweep", type=int, default=60, help="batched: sweep interval, seconds")
    parser.add_argument(
        "--behaviours", nargs="+", choices=["today", "batched", "flex"], default=["today", "batched", "flex"]
    )
    parser.add_argument("--startup", type=float, default=20.0, help="model: run start-up seconds")
    parser.add_argument(
        "--batch-seconds", type=float, default=6.0, help="model: fixed seconds per table batch"
    )
    parser.add_argument("--flex-wait", type=float, default=120.0, help="model: FLEX start delay, seconds")
    parser.add_argument("--endpoint", default=os.environ.get("AWS_ENDPOINT_URL"), help="else: the emulator")
    args = parser.parse_args(argv)

    settings = stage_settings(args.stage)
    dpus = settings.ingest.number_of_workers * DPU_PER_WORKER[settings.ingest.worker_type]
    model = RunModel(
        dpus=dpus,
        startup_seconds=args.startup,
        batch_seconds=args.batch_seconds,
        flex_wait_seconds=args.flex_wait,
    )
    parallel = args.parallel or settings.batching.parallel_tables
    today_sweep = rate_seconds(settings.sweep_schedule, 600)
    emulator = None
    if not args.endpoint:
        from lakeloader_dev.emulator import Emulator

        emulator = Emulator().start()
        args.endpoint = emulator.endpoint
    results = []
    try:
        for scenario in scenarios(args, parallel, today_sweep):
            began = time.monotonic()
            sim = Simulation(
                args.endpoint,
                scenario,
                model,
                minutes=args.minutes,
                warmup_minutes=args.warmup,
                files_per_minute=args.files_per_minute,
                file_bytes=int(args.file_mb * 1e6),
                progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True),
            )
            result = sim.run()
            results.append(result)
            print(
                f"{scenario.name}: {scenario.simulated_tables} tables x {args.minutes:g} simulated minutes "
                f"in {time.monotonic() - began:.0f} s; {result.objects} objects measured, "
                f"{result.double_applied} applied twice, {result.left_pending} never committed",
                file=sys.stderr,
                flush=True,
            )
    finally:
        if emulator is not None:
            emulator.stop()

    print(
        f"stage {args.stage}: {settings.ingest.number_of_workers} x {settings.ingest.worker_type} "
        f"= {dpus:g} DPU per run"
    )
    print(f"model: {model.describe()}")
    print(
        f"arrivals: {args.files_per_minute:g} file of {args.file_mb:g} MB per table per minute; "
        f"today: a run per arrival, sweep every {today_sweep} s; "
        f"batched: window {args.window} s, sweep every {args.sweep} s, "
        f"{args.tables_per_run} tables per run, {parallel} at a time"
    )
    sampled = ", ".join(f"{r.scenario.simulated_tables} ({r.scenario.name})" for r in results)
    print(
        f"simulated {args.minutes:g} min per behaviour ({args.warmup:g} min warm-up left out) on {sampled} "
        "tables, scaled to a day and to each table count; Glue concurrency limits not modelled"
    )
    print("\n".join(table_rows(results, args.tables)))
    broken = [r.scenario.name for r in results if r.double_applied or r.left_pending]
    if broken:
        print(f"objects lost or applied twice in: {', '.join(broken)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
