"""The newer-than rule's SQL, evaluated by a real SQL engine (SQLite) against the rule written in Python.

Spark runs the same text in tests/spark/test_merge.py and test_scd2.py.
"""

from __future__ import annotations

import itertools
import sqlite3

import pytest

from lakeloader.engine.sequence import newer_sql
from lakeloader.spark.sql import quote


def expected(held: tuple, incoming: tuple) -> bool:
    """The documented rule: first differing element decides, NULL oldest; all-NULL held: any change wins."""
    if all(h is None for h in held):
        return True
    for h, s in zip(held, incoming, strict=True):
        if h != s:
            return h is None or (s is not None and s > h)
    return False  # the same change: a replay is a no-op


def evaluate(held: tuple, incoming: tuple) -> bool:
    n = len(held)
    names = [f"c {i}`x" for i in range(n)]  # names that only work when quoted
    sql = newer_sql([f"t.{quote(c)}" for c in names], [f"s.{quote(c)}" for c in names])
    db = sqlite3.connect(":memory:")
    columns = ", ".join(f'"{c}"' for c in names)
    for alias, values in (("t", held), ("s", incoming)):
        db.execute(f"CREATE TABLE {alias} ({columns})")
        db.execute(f"INSERT INTO {alias} VALUES ({', '.join('?' * n)})", values)
    # SQLite reads Spark's backticks as identifier quotes; the text is the one Spark runs.
    (result,) = db.execute(f"SELECT {sql} FROM t, s").fetchone()
    assert result in (0, 1)  # never NULL: a NULL guard would silently skip the change
    return bool(result)


VALUES = (None, 1, 2)


@pytest.mark.parametrize("width", [1, 2, 3])
def test_every_pair_of_tuples_follows_the_rule(width):
    tuples = list(itertools.product(VALUES, repeat=width))
    for held, incoming in itertools.product(tuples, repeat=2):
        assert evaluate(held, incoming) == expected(held, incoming), (held, incoming)


@pytest.mark.parametrize(
    ("held", "incoming", "newer"),
    [
        (("08:00", "0001"), ("08:00", "0002"), True),  # same time, later change sequence: applies
        (("08:00", "0002"), ("08:00", "0002"), False),  # exact replay: no-op
        (("08:00", "0002"), ("08:00", "0001"), False),  # replayed earlier change: no regression
        (("08:00", "0009"), ("08:01", "0001"), True),  # the time decides first
        (("08:00", None), ("08:00", "0001"), True),  # a tie-breaker beats none (NULL is oldest)
        (("08:00", "0001"), ("08:00", None), False),
        (("08:00", None), ("08:00", None), False),  # no tie-breaker on either side: equal, skipped
        ((None, None), (None, None), True),  # nothing held to order by: a re-delivered row replaces it
        (("0000000000000000009",), ("0000000000000000010",), True),  # zero-padded: text order is order
    ],
)
def test_the_documented_cases(held, incoming, newer):
    assert evaluate(held, incoming) is newer


def test_a_single_column_keeps_the_old_rule():
    """held NULL -> applies; incoming NULL -> older; else strictly greater."""
    for held, incoming in itertools.product(VALUES, repeat=2):
        old = True if held is None else False if incoming is None else incoming > held
        assert evaluate((held,), (incoming,)) is old


def test_every_identifier_is_the_callers_quoted_expression():
    sql = newer_sql(["t.`a b`", "t.`c`"], ["s.`a b`", "s.`c`"])
    assert sql.count("t.`a b`") == 4 and sql.count("s.`c`") == 3
    with pytest.raises(ValueError, match="one length"):
        newer_sql(["t.`a`"], ["s.`a`", "s.`b`"])
