"""Deterministic benchmark data: a base table and DMS-style CDC batches, as parquet files.

Everything derives from a fixed seed, so two runs (or two machines) time the same bytes.

* Base table: ids ``0 .. rows-1`` and columns derived from the id by an integer hash
  (pure pyarrow compute, chunked, so 16M rows never sit in Python lists).
* CDC batch of ``n`` changes: 70% updates, 20% inserts, 10% deletes (by change count),
  with duplicates per key: some keys are updated twice, some inserted keys are then
  updated, some updated keys are then deleted. Every change has a distinct, increasing
  ``last_update_time`` newer than the base rows, so "latest change wins" has one answer
  whatever engine applies it. Updates and deletes hit keys drawn uniformly from
  ``0 .. key_space-1``; inserts use ids from 10**9 up, unique per batch number.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SEED = 20261122
T0 = datetime(2026, 11, 1, tzinfo=UTC)
STATUSES = ["new", "active", "suspended", "closed", "vip", "trial", "pending", "dormant"]  # 8: a 3-bit pick
TS = pa.timestamp("us", tz="UTC")
BASE_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("email", pa.string()),
        ("status", pa.string()),
        ("amount", pa.float64()),
        ("created_at", TS),
        ("last_update_time", TS),
    ]
)
CDC_SCHEMA = pa.schema([("Op", pa.string()), *BASE_SCHEMA])
INSERT_BASE = 10**9
ROWS_PER_BASE_FILE = 1_000_000
CHANGES_PER_CDC_FILE = 25_000


def _u64(value: int) -> pa.Scalar:
    return pa.scalar(value % 2**64, pa.uint64())


def _mix(ids: pa.Array, salt: int) -> pa.Array:
    """A cheap deterministic 64-bit hash of each id (splitmix64 finaliser), as uint64."""
    x = pc.add(pc.cast(ids, pa.uint64()), _u64(salt * 0x9E3779B97F4A7C15))
    x = pc.multiply(pc.bit_wise_xor(x, pc.shift_right(x, _u64(30))), _u64(0xBF58476D1CE4E5B9))
    x = pc.multiply(pc.bit_wise_xor(x, pc.shift_right(x, _u64(27))), _u64(0x94D049BB133111EB))
    return pc.bit_wise_xor(x, pc.shift_right(x, _u64(31)))


def base_rows(start: int, stop: int) -> pa.Table:
    ids = pa.array(range(start, stop), pa.int64())
    text = pc.cast(ids, pa.string())
    h = _mix(ids, SEED)
    status = pc.take(pa.array(STATUSES), pc.cast(pc.shift_right(h, _u64(61)), pa.int64()))
    cents = pc.cast(pc.bit_wise_and(h, _u64(0xFFFFF)), pa.float64())
    created_us = pc.cast(pc.bit_wise_and(pc.shift_right(h, _u64(20)), _u64(0xFFFFFFFFF)), pa.int64())
    t0_us = int(T0.timestamp() * 1_000_000)
    created = pc.cast(pc.subtract(pa.scalar(t0_us, pa.int64()), created_us), TS)
    return pa.table(
        {
            "id": ids,
            "name": pc.binary_join_element_wise("customer-", text, ""),
            "email": pc.binary_join_element_wise("c", text, "@example.com", ""),
            "status": status,
            "amount": pc.divide(cents, 100.0),
            "created_at": created,
            "last_update_time": pc.cast(pc.add(pc.multiply(ids, 0), t0_us), TS),
        },
        schema=BASE_SCHEMA,
    )


def write_base(folder: Path, rows: int) -> list[Path]:
    """The base table as parquet files of at most ROWS_PER_BASE_FILE rows (ids ascending)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for part, start in enumerate(range(0, rows, ROWS_PER_BASE_FILE)):
        path = folder / f"LOAD{part + 1:08d}.parquet"
        if not path.exists():
            pq.write_table(base_rows(start, min(rows, start + ROWS_PER_BASE_FILE)), path)
        paths.append(path)
    return paths


@dataclass(frozen=True)
class Batch:
    """One CDC batch on disk, and what its latest-change-per-key outcome is."""

    files: list[Path]
    changes: int
    distinct_keys: int


def cdc_changes(changes: int, key_space: int, batch_no: int = 0) -> pa.Table:
    """`changes` change records (70/20/10 update/insert/delete, duplicates per key), deterministic."""
    rng = random.Random(f"{SEED}:{batch_no}:{changes}:{key_space}")
    n_ins = changes * 20 // 100
    n_del = changes * 10 // 100
    n_upd = changes - n_ins - n_del
    upd_dupes = n_upd * 15 // 100  # half re-update a key updated in this batch, half update a new key
    del_after_upd = n_del * 20 // 100
    fresh = rng.sample(range(key_space), min(key_space, (n_upd - upd_dupes) + (n_del - del_after_upd)))
    upd_keys = fresh[: n_upd - upd_dupes]
    del_keys = fresh[n_upd - upd_dupes :]
    ins_keys = [INSERT_BASE + batch_no * 10_000_000 + i for i in range(n_ins)]

    events: list[tuple[str, int]] = [("I", k) for k in ins_keys]
    events += [("U", k) for k in upd_keys]
    events += [("U", rng.choice(upd_keys)) for _ in range(upd_dupes // 2)]
    events += [("U", rng.choice(ins_keys)) for _ in range(upd_dupes - upd_dupes // 2)]
    events += [("D", k) for k in del_keys]
    events += [("D", k) for k in rng.sample(upd_keys, min(len(upd_keys), del_after_upd))]
    rng.shuffle(events)
    # a new key's insert comes before its updates, as a real source emits them (keeps the 70/20/10 mix)
    seen: set[int] = set()
    for i, (_, key) in enumerate(events):
        if key >= INSERT_BASE:
            events[i] = ("U" if key in seen else "I", key)
            seen.add(key)
    start = T0 + timedelta(days=1, hours=batch_no)
    ops = [op for op, _ in events]
    ids = [key for _, key in events]
    stamps = [start + timedelta(milliseconds=i) for i in range(len(events))]
    amounts = [round(rng.random() * 10_000, 2) for _ in events]
    statuses = [STATUSES[rng.randrange(len(STATUSES))] for _ in events]
    return pa.table(
        {
            "Op": ops,
            "id": ids,
            "name": [f"customer-{k}-b{batch_no}-{i}" for i, k in enumerate(ids)],
            "email": [f"c{k}@example.net" for k in ids],
            "status": statuses,
            "amount": amounts,
            "created_at": [T0] * len(ids),
            "last_update_time": stamps,
        },
        schema=CDC_SCHEMA,
    )


def write_batch(folder: Path, changes: int, key_space: int, batch_no: int = 0) -> Batch:
    """One batch as DMS-named parquet files (about CHANGES_PER_CDC_FILE changes per file)."""
    folder.mkdir(parents=True, exist_ok=True)
    table = cdc_changes(changes, key_space, batch_no)
    parts = max(1, changes // CHANGES_PER_CDC_FILE)
    per = -(-table.num_rows // parts)
    paths = []
    for part in range(parts):
        path = folder / f"20261102-{batch_no:04d}{part:03d}.parquet"
        if not path.exists():
            pq.write_table(table.slice(part * per, per), path)
        paths.append(path)
    distinct = len(pc.unique(table["id"]))
    return Batch(paths, table.num_rows, distinct)
