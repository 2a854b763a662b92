"""The fault suite's oracle: seeded disorderly CDC workloads and, in plain Python, the table they must make.

A workload is a DMS source stream (a full load, then inserts, updates and deletes with
`last_update_time` and `AR_H_CHANGE_SEQ`) cut into files, then delivered out of order: files
shuffled, re-delivered, and DMS-style replays (a copy of an earlier stretch of the stream under a new
name) arriving late. The expected table is computed from the files alone, by the rules docs/loading.md
states (lakeloader.engine.sequence): the sequence tuple orders changes, NULL is the oldest, an equal tuple
is the same change; a key's state is its newest change, and a change not newer than a key's delete
is ignored (a tombstone), a newer one brings the key back.

`safe=True` drops from the delivered files every change that a tombstone would be needed for (a
change older than a delete delivered in an earlier file): what lakeloader guaranteed before
tombstones, so those workloads hold under either implementation.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

T0 = datetime(2026, 11, 1, 8, 0, 0)
CDC_SCHEMA = pa.schema(
    [
        ("Op", pa.string()),
        ("id", pa.int64()),
        ("name", pa.string()),
        ("city", pa.string()),
        ("last_update_time", pa.timestamp("us")),
        ("AR_H_CHANGE_SEQ", pa.string()),
    ]
)
LOAD_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("city", pa.string()),
        ("last_update_time", pa.timestamp("us")),
    ]
)
COLUMNS = "id, name, city, last_update_time, AR_H_CHANGE_SEQ"
CITIES = ("Leeds", "Delft", "Lyon")


@dataclass(frozen=True)
class Change:
    key: int
    op: str  # I, U, D; L for a full-load row
    name: str | None
    city: str | None
    ts: datetime
    seq: str | None  # AR_H_CHANGE_SEQ; None in the full load

    @property
    def order(self) -> tuple:
        """The sequence tuple as lakeloader compares it: NULL is the oldest value of an element."""
        return (self.ts, (0, "") if self.seq is None else (1, self.seq))

    @property
    def row(self) -> tuple:
        return (self.key, self.name, self.city, self.ts, self.seq)


@dataclass
class RawFile:
    name: str  # path under the table's prefix
    changes: list[Change]

    @property
    def full_load(self) -> bool:
        return self.name.startswith("LOAD")

    def write(self, folder: Path) -> Path:
        path = folder / self.name
        path.parent.mkdir(parents=True, exist_ok=True)
        if self.full_load:
            rows = [
                {"id": c.key, "name": c.name, "city": c.city, "last_update_time": c.ts} for c in self.changes
            ]
            pq.write_table(pa.Table.from_pylist(rows, schema=LOAD_SCHEMA), path)
        else:
            rows = [
                {
                    "Op": c.op,
                    "id": c.key,
                    "name": c.name,
                    "city": c.city,
                    "last_update_time": c.ts,
                    "AR_H_CHANGE_SEQ": c.seq,
                }
                for c in self.changes
            ]
            pq.write_table(pa.Table.from_pylist(rows, schema=CDC_SCHEMA), path)
        return path


@dataclass
class Workload:
    """Files in delivery order, and what was done to them (for the summary)."""

    seed: int
    files: list[RawFile]
    faults: Counter = field(default_factory=Counter)

    @property
    def changes(self) -> int:
        return sum(len(f.changes) for f in self.files)

    def rounds(self, rng: random.Random, most: int = 6) -> list[list[RawFile]]:
        """The delivery cut into runs: each run sees the files that landed since the last one."""
        out, i = [], 0
        while i < len(self.files):
            n = rng.randint(1, most)
            out.append(self.files[i : i + n])
            i += n
        return out


def workload(
    seed: int,
    *,
    keys: int = 30,
    events: int = 110,
    ties: bool = True,
    safe: bool = True,
    replays: int = 2,
    redeliveries: int = 2,
) -> Workload:
    """A seeded source stream, cut into files and delivered out of order (see the module doc).

    `ties`: several changes share one `last_update_time` (AR_H_CHANGE_SEQ decides); without, every
    change has its own time (SCD2's valid_from is the time alone).
    """
    rng = random.Random(seed)
    load = [Change(k, "L", f"k{k}", rng.choice(CITIES), T0, None) for k in range(1, keys // 2 + 1)]
    live = {c.key: c for c in load}
    stream: list[Change] = []
    for i in range(1, events + 1):
        ts = T0 + timedelta(seconds=(i // 3) if ties else i)
        seq = f"{20261101000000000000 + i:035d}"
        key = rng.randint(1, keys)
        held = live.get(key)
        if held is None:
            change = Change(key, "I", f"k{key}e{i}", rng.choice(CITIES), ts, seq)
        elif rng.random() < 0.2:
            change = Change(key, "D", held.name, held.city, ts, seq)
        elif rng.random() < 0.15:  # an update that changes nothing the table tracks
            change = Change(key, "U", held.name, held.city, ts, seq)
        else:
            change = Change(key, "U", f"k{key}e{i}", rng.choice(CITIES), ts, seq)
        stream.append(change)
        if change.op == "D":
            live.pop(key)
        else:
            live[key] = change
    files = [RawFile("LOAD00000001.parquet", load)]
    i = 0
    while i < len(stream):
        n = rng.randint(3, 16)
        files.append(RawFile(f"2026110108{len(files):04d}.parquet", stream[i : i + n]))
        i += n
    faults: Counter = Counter()
    # Late files: each CDC file may arrive up to 4 places late.
    cdc = files[1:]
    keyed = sorted(range(len(cdc)), key=lambda j: j + rng.uniform(0, 4))
    faults["late file"] = sum(1 for pos, j in enumerate(keyed) if j != pos)
    delivered = [files[0]] + [cdc[j] for j in keyed]
    for r in range(replays):  # a DMS task restart replays a stretch of changes under a new name
        start = rng.randrange(len(stream) - 20)
        copy = RawFile(f"2026110109{r:02d}-replay.parquet", stream[start : start + rng.randint(5, 20)])
        delivered.insert(rng.randint(len(delivered) // 2, len(delivered)), copy)
        faults["replay"] += 1
    for r in range(redeliveries):  # the same rows again, under a new name (a re-sent object)
        original = rng.choice(delivered[1:])
        delivered.insert(
            rng.randint(delivered.index(original) + 1, len(delivered)),
            RawFile(original.name.replace(".parquet", f"-again{r}.parquet"), list(original.changes)),
        )
        faults["re-delivery"] += 1
    if rng.random() < 0.5:  # the full load delivered again, late
        delivered.insert(rng.randint(2, len(delivered)), RawFile("LOAD00000002.parquet", list(load)))
        faults["full load again"] += 1
    if safe:
        _drop_after_delete(delivered)
    else:
        faults["older change after its key's delete"] = _after_delete(delivered)
    return Workload(seed, [f for f in delivered if f.changes], faults)


def _after_delete(files: list[RawFile]) -> int:
    """How many delivered changes are older than a delete of their key delivered in an earlier file."""
    deletes: dict[int, tuple] = {}
    n = 0
    for file in files:
        n += sum(1 for c in file.changes if c.key in deletes and c.order < deletes[c.key])
        for c in file.changes:
            if c.op == "D" and c.order > deletes.get(c.key, (T0 - timedelta(days=1), (0, ""))):
                deletes[c.key] = c.order
    return n


def _drop_after_delete(files: list[RawFile]) -> None:
    deletes: dict[int, tuple] = {}
    for file in files:
        file.changes = [c for c in file.changes if not (c.key in deletes and c.order < deletes[c.key])]
        for c in file.changes:
            if c.op == "D" and c.order > deletes.get(c.key, (T0 - timedelta(days=1), (0, ""))):
                deletes[c.key] = c.order


# ------------------------------------------------------------------------------------------- merge


def expected_merge(files: Iterable[RawFile]) -> dict[int, tuple]:
    """`mode: merge`: each key's newest change by sequence tuple; a key whose newest is a delete is absent."""
    newest: dict[int, Change] = {}
    for file in files:
        for c in file.changes:
            if c.key not in newest or c.order > newest[c.key].order:
                newest[c.key] = c
    return {k: c.row for k, c in newest.items() if c.op != "D"}


@dataclass(frozen=True)
class BatchCounts:
    """What one `mode: merge` batch must report: the rows it inserts, updates and deletes, the changes a
    newer one of the same key supersedes within the batch, and the key's newest changes that are late
    (an insert or update not newer than a delete of its key seen before)."""

    inserted: int
    updated: int
    deleted: int
    superseded: int
    late: int


def expected_batches(batches: Iterable[Iterable[RawFile]]) -> list[BatchCounts]:
    """`mode: merge`, batch by batch: what each batch does and reports.

    Per batch, each key's newest change (equal tuples are the same change) against the table as the
    earlier batches left it: a delete newer than the key's row deletes it; an insert or update not
    newer than a delete of the key seen so far is late and does nothing, else it updates a row it is
    newer than, or inserts the key the table does not hold.
    """
    rows: dict[int, tuple] = {}  # key -> order of the row the table holds
    deleted_at: dict[int, tuple] = {}  # key -> order of its newest delete seen
    counts = []
    for batch in batches:
        newest: dict[int, Change] = {}
        changes = 0
        for file in batch:
            changes += len(file.changes)
            for c in file.changes:
                if c.key not in newest or c.order > newest[c.key].order:
                    newest[c.key] = c
        inserted = updated = deleted = late = 0
        for key, c in newest.items():
            if c.op == "D":
                if key in rows and c.order > rows[key]:
                    del rows[key]
                    deleted += 1
                if key not in deleted_at or c.order > deleted_at[key]:
                    deleted_at[key] = c.order
            elif key in deleted_at and c.order <= deleted_at[key]:
                late += 1
            elif key not in rows:
                rows[key] = c.order
                inserted += 1
            elif c.order > rows[key]:
                rows[key] = c.order
                updated += 1
        counts.append(BatchCounts(inserted, updated, deleted, changes - len(newest), late))
    return counts


def expected_counts(batches: Iterable[Iterable[RawFile]]) -> list[tuple[int, int, int]]:
    """`mode: merge`, batch by batch: the rows each batch inserts, updates and deletes (expected_batches)."""
    return [(c.inserted, c.updated, c.deleted) for c in expected_batches(batches)]


# -------------------------------------------------------------------------------------------- scd2


@dataclass
class Version:
    key: int
    name: str | None
    city: str | None
    valid_from: datetime
    valid_to: datetime | None = None

    @property
    def row(self) -> tuple:
        return (self.key, self.name, self.city, self.valid_from, self.valid_to, self.valid_to is None)


def expected_scd2(batches: Iterable[Iterable[RawFile]]) -> list[tuple]:
    """`mode: scd2`, batch by batch as the runs committed them (history is never rewritten).

    Per batch and key, in sequence order: a change not newer than the key's latest point (its
    current version's tuple; after a delete, the delete's) is late and ignored; a change to
    name/city closes the current version and opens one; an unchanged one opens nothing; a delete
    closes the current version. Needs `workload(ties=False)`: valid_from is the time alone.
    """
    versions: dict[int, list[Version]] = {}
    latest: dict[int, tuple] = {}
    for batch in batches:
        changes: dict[int, dict[tuple, Change]] = {}
        for file in batch:
            for c in file.changes:
                changes.setdefault(c.key, {})[c.order] = c
        for key, by_order in changes.items():
            chain = versions.setdefault(key, [])
            for order in sorted(by_order):
                c = by_order[order]
                if key in latest and order <= latest[key]:
                    continue
                current = chain[-1] if chain and chain[-1].valid_to is None else None
                if c.op == "D":
                    if current:
                        current.valid_to = c.ts
                    latest[key] = order
                    continue
                if current and (current.name, current.city) == (c.name, c.city):
                    continue
                if current:
                    current.valid_to = c.ts
                chain.append(Version(key, c.name, c.city, c.ts))
                latest[key] = order
    return sorted(v.row for chain in versions.values() for v in chain)


def chain_problems(rows: list[tuple]) -> list[str]:
    """SCD2 invariants on (id, name, city, valid_from, valid_to, is_current) rows: one current
    version per key at most, no version valid for a negative time, no overlapping validity."""
    problems = []
    by_key: dict[int, list[tuple]] = {}
    for row in rows:
        by_key.setdefault(row[0], []).append(row)
    for key, chain in by_key.items():
        chain.sort(key=lambda r: r[3])
        current = [r for r in chain if r[5]]
        if len(current) > 1:
            problems.append(f"key {key}: {len(current)} current versions")
        for r in chain:
            if r[5] != (r[4] is None):
                problems.append(f"key {key}: is_current {r[5]} with valid_to {r[4]}")
            if r[4] is not None and r[4] < r[3]:
                problems.append(f"key {key}: valid_to {r[4]} before valid_from {r[3]}")
        for a, b in zip(chain, chain[1:], strict=False):
            if a[4] is None or a[4] > b[3]:
                problems.append(f"key {key}: [{a[3]}, {a[4]}) overlaps [{b[3]}, {b[4]})")
    return problems


# ------------------------------------------------------------------------------------- the figures


@dataclass
class Stats:
    """What the fault suite did, summed over its tests (printed at the end of the session)."""

    cases: int = 0
    faults: Counter = field(default_factory=Counter)
    changes_in: int = 0
    rows_expected: int = 0
    rows_lost: int = 0
    rows_duplicated: int = 0
    rows_wrong: int = 0
    rows_unexpected: int = 0

    def lines(self) -> list[str]:
        shown = ", ".join(f"{n} {what}" for what, n in sorted(self.faults.items()))
        return [
            f"cases checked against the oracle: {self.cases}",
            f"faults injected: {sum(self.faults.values())} ({shown})",
            f"changes in: {self.changes_in:,}",
            f"rows expected: {self.rows_expected:,}",
            f"rows lost: {self.rows_lost}",
            f"rows duplicated: {self.rows_duplicated}",
            f"rows wrong or resurrected: {self.rows_wrong + self.rows_unexpected}",
        ]


STATS = Stats()


@dataclass
class Diff:
    lost: list = field(default_factory=list)
    duplicated: list = field(default_factory=list)
    wrong: list = field(default_factory=list)
    unexpected: list = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.lost or self.duplicated or self.wrong or self.unexpected)

    def __str__(self) -> str:
        return (
            "; ".join(f"{what}: {items[:5]}" for what, items in vars(self).items() if items)
            or "table matches the oracle"
        )


def compare(actual: list[tuple], expected: dict | list, *, faults: Counter | dict, changes: int) -> Diff:
    """Compare a table's rows with the oracle's and add the outcome to the session's figures.

    `expected`: {key: row} (merge: one row per key) or a list of rows (scd2: row identity is the
    whole version). A row's first element is its key.
    """
    diff = Diff()
    if isinstance(expected, dict):
        seen = Counter(r[0] for r in actual)
        diff.duplicated = [k for k, n in seen.items() if n > 1]
        got = {r[0]: r for r in actual}
        diff.lost = [k for k in expected if k not in got]
        diff.unexpected = [got[k] for k in got if k not in expected]
        diff.wrong = [(expected[k], got[k]) for k in expected if k in got and got[k] != expected[k]]
        wanted = len(expected)
    else:
        have, want = Counter(actual), Counter(expected)
        diff.lost = list((want - have).elements())
        extra = have - want
        diff.duplicated = [r for r in extra.elements() if r in want]
        diff.unexpected = [r for r in extra.elements() if r not in want]
        wanted = len(expected)

    STATS.cases += 1
    STATS.faults.update(faults)
    STATS.changes_in += changes
    STATS.rows_expected += wanted
    STATS.rows_lost += len(diff.lost)
    STATS.rows_duplicated += len(diff.duplicated)
    STATS.rows_wrong += len(diff.wrong)
    STATS.rows_unexpected += len(diff.unexpected)
    return diff
