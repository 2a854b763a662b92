"""Reconciliation on every commit: what a batch's files asked for against what the table reports of
the commit that applied them (issue 41, part 2). This module is standard library only: the engine
fills it in, the run record, `lakeloader status` and the unit tests read it without Spark.

What a commit *asked* for (`Asked`) is counted on passes the engine makes anyway (observed metrics
of its classification, or of the MERGE's own source): the changes after ordering (the latest per key
in `mode: merge`), how many of them are upserts and deletes, the changes a newer one of the same key
superseded within the batch, and the late ones a tombstone buried.

What the table *reports* (`Reported`) comes from the commit's snapshot summary and its parent's: on
Spark 4.1 with Iceberg 1.11 the MERGE's own row counts (`spark.merge-into.num-target-rows-*`), and on
every runtime the change of `total-records`, `total-position-deletes` and `total-equality-deletes`.

`reconcile` holds the two against invariants every correct batch keeps; a table that disagrees
(a duplicate row of a key written behind the engine's back makes one update touch two rows, a row
deleted behind its back makes an update insert) breaks one of them. docs/merge_and_commit.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

# What Spark 4.1+ with Iceberg 1.11+ records of a MERGE in the summary of the snapshot it commits
# (SPARK-54309, Iceberg PR 15014): the rows it inserted, updated and deleted.
MERGE_COUNT_KEYS = {
    "inserted": "spark.merge-into.num-target-rows-inserted",
    "updated": "spark.merge-into.num-target-rows-updated",
    "deleted": "spark.merge-into.num-target-rows-deleted",
}
OnMismatch = Literal["fail", "alarm"]


@dataclass(frozen=True)
class Asked:
    """What one commit's files asked of the table.

    `mode: merge`: `upserts` and `deletes` are the latest change per key (after ordering), `late` the
    upserts among them a tombstone buried, `superseded` the changes a newer one of the same key
    replaced within the batch. `expected` is the rows the engine decided to insert, update and delete
    when it classified the batch against the table first (Spark 3.5, and `mode: scd2`); None when the
    MERGE decides on its own (Spark 4.1), whose own counts then say what it did.

    `mode: scd2`: `expected` is (versions opened, current versions closed, versions dropped: a new
    version at the current one's own valid_from replaces it); `upserts` and `deletes` count the
    changes applied, `late` the ones history already passed, `superseded` the ones that changed no
    tracked column.
    """

    mode: str
    upserts: int
    deletes: int
    superseded: int = 0
    late: int = 0
    expected: tuple[int, int, int] | None = None


@dataclass(frozen=True)
class Reported:
    """What the table reports of one commit: the MERGE's row counts (None: the runtime records none),
    the change of its live data rows and of its delete records, and whether the commit rewrote data
    files (copy-on-write: then every row it copied is added again, and only the live change counts)."""

    inserted: int | None = None
    updated: int | None = None
    deleted: int | None = None
    records_delta: int | None = None  # total-records, this commit's less its parent's
    deletes_delta: int | None = None  # total-position-deletes + total-equality-deletes, likewise
    rewrote_files: bool = False

    @property
    def merge_counts(self) -> tuple[int, int, int] | None:
        if None in (self.inserted, self.updated, self.deleted):
            return None
        return (self.inserted or 0, self.updated or 0, self.deleted or 0)

    @property
    def live_delta(self) -> int | None:
        """The change of the rows a reader sees: data rows less the rows deleted by delete files."""
        if self.records_delta is None or self.deletes_delta is None:
            return None
        return self.records_delta - self.deletes_delta


def _int(summary: dict[str, str], key: str) -> int | None:
    value = summary.get(key)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def reported_from_summaries(summary: dict[str, str], parent: dict[str, str] | None) -> Reported:
    """`Reported` of a commit from its snapshot summary and its parent's (None: the first commit)."""
    parent = parent or {}
    totals = ("total-records", "total-position-deletes", "total-equality-deletes")
    now = {k: _int(summary, k) for k in totals}
    # A table's first snapshot has no parent: every total starts at 0.
    before = {k: (_int(parent, k) if parent else 0) for k in totals}
    deltas = {k: None if now[k] is None or before[k] is None else now[k] - before[k] for k in totals}
    deletes = (
        None
        if deltas["total-position-deletes"] is None or deltas["total-equality-deletes"] is None
        else deltas["total-position-deletes"] + deltas["total-equality-deletes"]
    )
    return Reported(
        inserted=_int(summary, MERGE_COUNT_KEYS["inserted"]),
        updated=_int(summary, MERGE_COUNT_KEYS["updated"]),
        deleted=_int(summary, MERGE_COUNT_KEYS["deleted"]),
        records_delta=deltas["total-records"],
        deletes_delta=deletes,
        rewrote_files=bool(_int(summary, "deleted-data-files")),
    )


@dataclass
class CommitReconciliation:
    """One or more commits reconciled (a run's commits add up): what was asked, what the table
    reported, and every invariant the table broke."""

    commits: int = 0
    upserts_asked: int = 0
    deletes_asked: int = 0
    superseded: int = 0
    late: int = 0
    inserted: int = 0  # what the table reports it did (the MERGE's counts, else the engine's plan)
    updated: int = 0
    deleted: int = 0
    live_delta: int = 0
    mismatched_commits: int = 0
    mismatches: list[str] = field(default_factory=list)
    snapshot_id: int | None = None  # the last commit reconciled

    @property
    def ok(self) -> bool:
        return not self.mismatched_commits

    def describe(self) -> str:
        head = (
            f"reconciled {self.commits} commit(s): asked {self.upserts_asked:,} upsert(s) and "
            f"{self.deletes_asked:,} delete(s) ({self.superseded:,} superseded, {self.late:,} late); the "
            f"table reports {self.inserted:,} inserted, {self.updated:,} updated, {self.deleted:,} deleted, "
            f"live rows {self.live_delta:+,}"
        )
        if self.ok:
            return head + ": agrees"
        return f"{head}: MISMATCH in {self.mismatched_commits} commit(s): " + "; ".join(self.mismatches)

    def run_counts(self) -> dict[str, int]:
        """What the run record keeps (lakeloader.control.ledger.runs counts; all numbers)."""
        counts = {k: v for k, v in asdict(self).items() if isinstance(v, int) and not isinstance(v, bool)}
        return {f"reconcile_{k}": v for k, v in counts.items()}

    def add(self, other: CommitReconciliation | None) -> CommitReconciliation:
        if other is None:
            return self
        for name, value in asdict(other).items():
            if isinstance(value, int) and name != "snapshot_id":
                setattr(self, name, getattr(self, name) + value)
        self.mismatches += other.mismatches
        self.snapshot_id = other.snapshot_id or self.snapshot_id
        return self


def combine(a: CommitReconciliation | None, b: CommitReconciliation | None) -> CommitReconciliation | None:
    """Two runs' or batches' reconciliations as one (None: nothing reconciled)."""
    if a is None and b is None:
        return None
    return CommitReconciliation().add(a).add(b)


def from_run_counts(counts: dict[str, int | float]) -> dict[str, int] | None:
    """The reconciliation a run record kept (`CommitReconciliation.run_counts`), None when it kept none."""
    found = {k.removeprefix("reconcile_"): int(v) for k, v in counts.items() if k.startswith("reconcile_")}
    return found if found.get("commits") else None


def reconcile(asked: Asked, reported: Reported, *, snapshot_id: int | None = None) -> CommitReconciliation:
    """Hold what one commit asked against what the table reports of it; every broken invariant is
    named in `mismatches`."""
    broken: list[str] = []
    done = reported.merge_counts or asked.expected
    if done is None:
        broken.append("the commit reports no row counts and the engine planned none")
        done = (0, 0, 0)
    inserted, updated, deleted = done
    if asked.mode == "scd2":
        _scd2(asked, reported, broken)
    else:
        _merge(asked, reported, done, broken)
    live = reported.live_delta
    if live is None:
        broken.append("the commit's summary has no total-records/total-*-deletes to reconcile with")
    elif live != inserted - deleted:
        what = "versions" if asked.mode == "scd2" else "rows"
        broken.append(
            f"the table's live rows changed by {live:+,}, but {inserted:,} {what} were inserted and "
            f"{deleted:,} deleted ({inserted - deleted:+,})"
        )
    if (
        not reported.rewrote_files
        and reported.records_delta is not None
        and reported.deletes_delta is not None
    ):
        # Merge-on-read: every row written is a new data row, every row removed a delete record.
        if reported.records_delta != inserted + updated:
            broken.append(
                f"the commit added {reported.records_delta:,} data row(s) for {inserted:,} insert(s) and "
                f"{updated:,} update(s)"
            )
        if reported.deletes_delta != updated + deleted:
            broken.append(
                f"the commit added {reported.deletes_delta:,} delete record(s) for {updated:,} update(s) "
                f"and {deleted:,} delete(s)"
            )
    return CommitReconciliation(
        commits=1,
        upserts_asked=asked.upserts,
        deletes_asked=asked.deletes,
        superseded=asked.superseded,
        late=asked.late,
        inserted=inserted,
        updated=updated,
        deleted=deleted,
        live_delta=live or 0,
        mismatched_commits=1 if broken else 0,
        mismatches=broken,
        snapshot_id=snapshot_id,
    )


def _merge(asked: Asked, reported: Reported, done: tuple[int, int, int], broken: list[str]) -> None:
    """`mode: merge`: each latest change touches at most one row of its key, a late one none."""
    inserted, updated, deleted = done
    applicable = asked.upserts - asked.late
    if inserted + updated > applicable:
        broken.append(
            f"{inserted + updated:,} row(s) inserted or updated for {applicable:,} upsert(s) asked "
            f"({asked.upserts:,} less {asked.late:,} late): a key the table holds more than once?"
        )
    if deleted > asked.deletes:
        broken.append(
            f"{deleted:,} row(s) deleted for {asked.deletes:,} delete(s) asked: a key the table holds "
            "more than once?"
        )
    if (
        reported.merge_counts is not None
        and asked.expected is not None
        and reported.merge_counts != asked.expected
    ):
        broken.append(f"the MERGE did {reported.merge_counts}, the engine planned {asked.expected}")


def _scd2(asked: Asked, reported: Reported, broken: list[str]) -> None:
    """`mode: scd2`: the MERGE opens, closes and drops exactly the versions the engine planned."""
    if asked.expected is None:
        broken.append("scd2 commit without the engine's plan")
        return
    counts = reported.merge_counts
    if counts is not None and counts != asked.expected:
        opened, closed, dropped = asked.expected
        broken.append(
            f"the MERGE inserted, updated and deleted {counts[0]:,}, {counts[1]:,} and {counts[2]:,} "
            f"row(s) for {opened:,} version(s) opened, {closed:,} closed and {dropped:,} replaced: a key "
            "with more than one current version?"
        )
