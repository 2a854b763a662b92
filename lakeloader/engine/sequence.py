"""The order of changes to one key: a tuple of sequence columns, compared element by element.

Plain Python (no PySpark), so the one SQL text the batch's classification, the MERGE's guard and
SCD2 use is unit-tested without a JVM. The rule (NULL oldest, an equal tuple is a replay, an all-NULL
held row is replaced) is README "How a batch is merged", "The order of changes".
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
