"""benchmarks.cost: the simulation drives the real trigger and ledger (moto over HTTP) end to end.

Small and simulated-time only: no wall-clock figure is asserted. What is checked is what the
figures rest on: every object committed exactly once, a run per arrival today, batched tables
sharing fewer runs, and the report's shape.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # benchmarks/ is a top-level folder, not an installed package
    sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "tests"))

import aws_fixtures  # noqa: E402
import pytest  # noqa: E402

from benchmarks.cost import __main__ as cli  # noqa: E402
from benchmarks.cost.sim import RunModel, Scenario, Simulation  # noqa: E402

moto_server = aws_fixtures.moto_server
aws_endpoint = aws_fixtures.aws_endpoint
MODEL = RunModel(dpus=2, startup_seconds=20, batch_seconds=6)


def simulate(endpoint: str, scenario: Scenario):
    return Simulation(endpoint, scenario, MODEL, minutes=12, warmup_minutes=2).run()


@pytest.mark.slow
def test_today_a_run_per_arrival_batched_shared_runs_nothing_lost_or_doubled(aws_endpoint):
    today = simulate(aws_endpoint, Scenario("today", 2, 2, sweep_seconds=600))
    batched = simulate(
        aws_endpoint,
        Scenario("batched", 2, 2, window_seconds=180, tables_per_run=2, parallel_tables=2, sweep_seconds=60),
    )
    for result in (today, batched):
        assert result.objects == 20  # 2 tables x 1 file a minute x 10 measured minutes
        assert (result.double_applied, result.left_pending) == (0, 0)
        assert len(result.freshness) == result.objects
    assert today.runs == today.objects  # each arrival started its own run
    assert batched.runs < today.runs / 2 and batched.dollars < today.dollars / 2
    # an object is committed by a batch (one that lands while its table's run drains rides the next)
    assert min(batched.freshness) >= MODEL.batch_seconds
    assert max(batched.freshness) > max(today.freshness)


@pytest.mark.slow
def test_the_report_prints_a_row_per_table_count_and_behaviour(aws_endpoint, capsys):
    code = cli.main(
        [
            "--endpoint", aws_endpoint, "--stage", "dev", "--tables", "2", "20",
            "--minutes", "6", "--warmup", "1", "--sample", "1", "--tables-per-run", "2", "--window", "120",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "stage dev: 2 x G.1X = 2 DPU per run" in out
    assert "$0.44/DPU-hour" in out and "FLEX $0.29" in out and "60 s minimum" in out
    rows = [row.split("|")[1:3] for row in out.splitlines() if row.startswith("| ") and row.endswith(" s |")]
    assert rows == [
        [" 2 ", " today "], [" 2 ", " batched "], [" 2 ", " batched FLEX "],
        [" 20 ", " today "], [" 20 ", " batched "], [" 20 ", " batched FLEX "],
    ]  # fmt: skip
