"""The order of changes to one key: a tuple of sequence columns, compared element by element.

Plain Python (no PySpark): the SQL comes from here once, for the batch's classification, the
MERGE's own guard and SCD2, and is unit-tested without a JVM.

The rule (README "How a batch is merged"): the incoming change is newer than the row held when its
tuple is greater, compared left to right; NULL is the oldest value of each element and equal to
another NULL. An equal full tuple is the same change, so it is skipped (a replay is a no-op). One
exception keeps re-delivered full loads without any sequence working: a held row whose tuple is all
NULL carries no order at all, and any change replaces it.
"""

from __future__ import annotations

from collections.abc import Sequence


def newer_sql(held: Sequence[str], incoming: Sequence[str]) -> str:
    """SQL boolean: is the `incoming` tuple newer than the `held` one?

    Both are SQL expressions, already quoted, element for element (e.g. ``t.`ts``` and ``s.`ts```).
    Written out as one CASE (first differing element decides) so that Spark and the unit tests'
    SQLite evaluate the same text; it never yields NULL.
    """
    if not held or len(held) != len(incoming):
        raise ValueError(f"sequence tuples must be non-empty and of one length: {held} vs {incoming}")
    all_null = " AND ".join(f"{h} IS NULL" for h in held)
    branches = [f"WHEN {all_null} THEN TRUE"]
    for h, s in zip(held, incoming, strict=True):
        branches.append(
            f"WHEN {h} IS DISTINCT FROM {s} THEN ({h} IS NULL OR ({s} IS NOT NULL AND {s} > {h}))"
        )
    return "(CASE " + " ".join(branches) + " ELSE FALSE END)"
