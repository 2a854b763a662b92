"""Merge benchmark: lakeloader vs the AWS-sample pattern vs PyIceberg, on the same deterministic data
(and lakeloader vs itself without tombstones: what they cost). Each lakeloader case prints its phases.

    python -m benchmarks.merge --quick                 # small sizes, < 5 minutes on 2 cores
    python -m benchmarks.merge                         # full sizes (1M / 4M / 16M rows)
    python -m benchmarks.merge --scenario batch --scenario growth --growth-sizes 1000000,4000000

Scenarios
  batch   one CDC batch (70% updates, 20% inserts, 10% deletes, duplicates per key) into a base table,
          copy-on-write and merge-on-read
  growth  a fixed-size batch into tables of growing size, merge-on-read and copy-on-write; time ratio
          per size step
  small   many small batches into a merge-on-read table, then compaction: files before/after and the
          query speed-up
  large   1M changes into 16M rows, merge-on-read and copy-on-write, one run each (full run only;
          alone: python -m benchmarks.merge --scenario large --engines lakeloader,aws-sample)

Method: one process and one SparkSession; a warm-up run of every engine first; each case is timed
N times, and the table is rolled back to the same base snapshot between runs (untimed). The engines
of a case run side by side: each repetition (or each small batch) runs every engine once, the order
alternating, so a drift of load or JVM warm-up is not charged to whichever engine runs first. Reported:
median and min-max wall time, changes/s (input change records / median), and peak RSS of the
Spark driver JVM and of this Python process (VmHWM from /proc, reset before each run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from benchmarks.measure import Case, machine
from benchmarks.scenarios import FULL, QUICK, SCENARIOS, Bench


def ratios(cases: list[Case]) -> list[str]:
    """Lakeloader's median against every other engine's, the growth steps, and the checksum verdicts."""
    lines = []
    by_key: dict[tuple[str, str], dict[str, Case]] = {}
    for case in cases:
        if case.seconds:
            by_key.setdefault((case.scenario, case.case), {})[case.engine] = case
    for (scenario, name), engines in by_key.items():
        ours = engines.get("lakeloader")
        if not ours:
            continue
        theirs = dict(engines)
        if scenario == "batch" and name == "merge-on-read":
            pyi = next(
                (c for c in cases if c.scenario == "batch" and c.engine == "pyiceberg" and c.seconds),
                None,
            )
            if pyi:
                theirs["pyiceberg"] = pyi
        parts = [
            f"÷ {eng} {ours.median / other.median:.2f}"
            for eng, other in theirs.items()
            if eng != "lakeloader"
        ]
        if parts:
            lines.append(f"  {scenario:<7} {name:<28} lakeloader {ours.median:7.2f}s  " + "  ".join(parts))
    growth: dict[tuple[str, str], list[Case]] = {}
    for case in cases:
        if case.scenario == "growth" and case.seconds:
            growth.setdefault((case.engine, case.mode), []).append(case)
    for (engine, mode), series in growth.items():
        steps = [
            f"{a.rows:,}->{b.rows:,} rows ({b.rows / a.rows:.0f}x): time x{b.median / a.median:.2f}"
            for a, b in zip(series, series[1:], strict=False)
        ]
        if len(series) > 2:
            first, last = series[0], series[-1]
            steps.append(f"{first.rows:,}->{last.rows:,} rows: time x{last.median / first.median:.2f}")
        if steps:
            lines.append(f"  growth  {engine:<11} {mode[:3]} " + "; ".join(steps))
    checks: dict[tuple[str, str], set] = {}
    for case in cases:
        if case.checksum is not None:
            checks.setdefault((case.scenario, case.case if case.scenario != "batch" else "batch"), set()).add(
                tuple(case.checksum)
            )
    for (scenario, name), values in checks.items():
        verdict = "same table from every engine" if len(values) == 1 else f"DIFFERENT results: {values}"
        lines.append(f"  check   {scenario} {name}: {verdict}")
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.merge", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and fewer runs (< 5 minutes)")
    parser.add_argument(
        "--scenario",
        action="append",
        choices=SCENARIOS,
        help="repeatable, run in the order given; default: all",
    )
    parser.add_argument(
        "--engines",
        default="lakeloader,lakeloader-no-tombstones,aws-sample,pyiceberg",
        type=lambda s: [e.strip() for e in s.split(",") if e.strip()],
        help="comma-separated subset of lakeloader, lakeloader-no-tombstones (lakeloader ÷ it: what "
        "tombstones cost), aws-sample, pyiceberg",
    )
    parser.add_argument(
        "--reps",
        type=int,
        help="timed runs per case (default 5, 3 for growth and 1 for large; --quick 5 and 3); runs of a case "
        "alternate the engines' order",
    )
    parser.add_argument(
        "--growth-sizes",
        type=lambda s: tuple(int(float(x)) for x in s.split(",")),
        help="comma-separated table sizes for the growth scenario (default 1e6,4e6,16e6)",
    )
    parser.add_argument(
        "--growth-modes",
        default="merge-on-read,copy-on-write",
        type=lambda s: [m.strip() for m in s.split(",") if m.strip()],
        help="comma-separated write modes the growth scenario runs (default both)",
    )
    parser.add_argument("--pyiceberg-max-rows", type=int, default=4_000_000)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--shuffle-partitions", type=int, default=4, help="lakeloader's local default")
    parser.add_argument("--workdir", help="keep tables and data here (default: a temp dir, removed)")
    parser.add_argument("--data-dir", help="reuse generated parquet data from here (it is deterministic)")
    parser.add_argument("--keep-tables", action="store_true")
    parser.add_argument(
        "--replay-tombstones",
        action="store_true",
        help="each run finds the tombstones of the batch itself (a re-delivered batch: always probed), "
        "not an earlier batch's",
    )
    parser.add_argument("--no-verify", dest="verify", action="store_false", help="skip result checksums")
    parser.add_argument("--json", help="write all figures to this JSON file")
    args = parser.parse_args(argv)
    args.scenario = args.scenario or list(SCENARIOS)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.reps:
        sizes = replace(sizes, reps=args.reps, growth_reps=args.reps, large_reps=args.reps)
    info = machine()
    print("lakeloader merge benchmark" + (" (--quick)" if args.quick else ""))
    print("  " + "  ".join(f"{k}={v}" for k, v in info.items()))
    print("  command: python -m benchmarks.merge " + " ".join(sys.argv[1:] if argv is None else argv))
    bench = Bench(args, sizes)
    steps: dict[str, Callable[[], None]] = {
        "batch": bench.scenario_batch,
        "growth": bench.scenario_growth,
        "small": bench.scenario_small,
        "large": bench.scenario_large,
    }
    try:
        bench.warm_up()
        for scenario in dict.fromkeys(args.scenario):  # in the order given
            steps[scenario]()
        print("\nratios (lakeloader median ÷ theirs; < 1 means lakeloader is faster)")
        lines = ratios(bench.cases)
        print("\n".join(lines))
        info["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        bench.log(f"done; load average at end {info['loadavg_end']}")
        if args.json:
            Path(args.json).write_text(
                json.dumps(
                    {
                        "machine": info,
                        "sizes": asdict(sizes),
                        "cases": [asdict(c) | {"median": c.median} for c in bench.cases],
                        "ratios": lines,
                        **bench.extra,
                    },
                    indent=2,
                    default=str,
                )
            )
    finally:
        bench.spark.stop()
        if not args.workdir:
            shutil.rmtree(bench.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
