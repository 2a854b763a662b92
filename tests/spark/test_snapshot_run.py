"""`cdc: snapshot` as a user drives it: `lakeloader run` over a folder of daily snapshots written as
`<prefix><date>/part-0.parquet` with `_SUCCESS`, in merge and scd2 modes: three days with inserts,
updates and deletes between them, a late older snapshot, a re-delivery, and an incomplete folder that
waits. The input log (run's ledger-less memory) keeps each consumed file once."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pytest

pytestmark = pytest.mark.spark

PEOPLE = pa.schema([("id", pa.int64()), ("name", pa.string())])


def table(prefix: str, mode: str) -> dict:
    return {
        "id": f"shop.{prefix}",
        "source": {"cdc": "snapshot", "format": "parquet", "prefix": f"{prefix}/"},
        "target": {"database": "shop", "table": prefix},
        "keys": ["id"],
        "mode": mode,
    }


@pytest.fixture
def lake(tmp_path, raw):
    config = tmp_path / "tables.yaml"
    tables = [table("people", "merge"), table("history", "scd2")]
    config.write_text(
        json.dumps({"raw_root": str(raw.root), "warehouse": str(tmp_path / "wh"), "tables": tables})
    )
    return str(config)


def deliver(raw, day: str, people: dict[int, str], *, done: bool = True) -> None:
    for prefix in ("people", "history"):
        raw.write_parquet(
            f"{prefix}/{day}/part-0.parquet", [{"id": k, "name": v} for k, v in people.items()], PEOPLE
        )
        if done:
            raw.write_text(f"{prefix}/{day}/_SUCCESS", "")


@pytest.mark.slow
def test_daily_snapshots_through_lakeloader_run(cli, lake, raw):
    def run() -> str:
        done = cli("run", "--config", lake)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def query(sql: str) -> list[dict]:
        out = cli("sql", "--config", lake, sql)
        assert out.returncode == 0, out.stderr
        return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]

    deliver(raw, "2026-11-25", {1: "ann", 2: "bob", 3: "cy"})
    run()
    deliver(raw, "2026-11-26", {1: "ann", 2: "rob", 4: "dee"})
    run()
    deliver(raw, "2026-11-24", {1: "old", 9: "old"})  # late: older than the last applied
    deliver(raw, "2026-11-26", {1: "ann", 2: "rob", 4: "dee"})  # re-delivered (a new file version)
    assert "not newer than the last one applied" in run()
    deliver(raw, "2026-11-28", {1: "ann"}, done=False)  # incomplete: waits
    assert "incomplete" in run()
    assert query("SELECT id, name FROM shop.people ORDER BY id") == [
        {"id": 1, "name": "ann"},
        {"id": 2, "name": "rob"},
        {"id": 4, "name": "dee"},
    ]

    deliver(raw, "2026-11-27", {1: "ann", 2: "rob", 3: "cy", 4: "dee"})  # 3 comes back
    raw.write_text("people/2026-11-28/_SUCCESS", "")
    raw.write_text("history/2026-11-28/_SUCCESS", "")
    run()  # 2026-11-27, then 2026-11-28: only 1 is left

    assert query("SELECT id, name FROM shop.people ORDER BY id") == [{"id": 1, "name": "ann"}]
    history = query(
        "SELECT id, name, CAST(valid_from AS DATE) AS f, CAST(valid_to AS DATE) AS t FROM shop.history "
        "ORDER BY id, valid_from"
    )
    assert [(h["id"], h["name"], h["f"], h["t"]) for h in history] == [
        (1, "ann", "2026-11-25", None),
        (2, "bob", "2026-11-25", "2026-11-26"),
        (2, "rob", "2026-11-26", "2026-11-28"),
        (3, "cy", "2026-11-25", "2026-11-26"),
        (3, "cy", "2026-11-27", "2026-11-28"),
        (4, "dee", "2026-11-26", "2026-11-28"),
    ]
    again = run()  # nothing new: every file was consumed once, the waiting ones included
    assert re.search(r"shop\.people\s+skipped\s+0\s", again) and re.search(
        r"shop\.history\s+skipped\s+0\s", again
    )
