"""`make test`'s two lanes: the suite runs on two pytest-xdist workers (``-n 2 --dist loadgroup``), and
each suite belongs to one lane, a worker's whole run (two Spark modules excepted: MOVED_TO_AWS_LANE).

On two cores no suite alone keeps both busy: a quiet serial run used 1.3 cores on average, waiting
on one JVM's driver thread, a subprocess or a deploy. Two lanes fill those gaps. The split keeps the
JVM-heavy suites that share the session's SparkSession (spark, faults) in one lane and the suites that
need little of it (e2e with its emulator and kept drivers, the CDK synths of infra, unit) in the
other, so neither worker's moto backends, emulator or Spark session is shared with the other's.
"""

from __future__ import annotations

SPARK_LANE, AWS_LANE = "spark", "aws"
LANES = {"spark": SPARK_LANE, "faults": SPARK_LANE, "e2e": AWS_LANE, "infra": AWS_LANE, "unit": AWS_LANE}
# Two Spark modules run in the AWS lane: since local Spark reads its jars in place (e2e gained most),
# the Spark lane ended 19, 50 and 44 s after the AWS lane in three fresh clones (2026-11-30). They
# took about 20 s there; in the AWS lane, whose first Spark tests they are, they start its session
# and took 41 s, and the next fresh clone's lanes ended within 10 s of each other (667 s).
MOVED_TO_AWS_LANE = ("tests/spark/test_snapshot_run.py", "tests/spark/test_reconcile_cli.py")


def lane_of(nodeid: str) -> str:
    """The lane of a test (`tests/<suite>/...`); anything else goes with the AWS lane."""
    if nodeid.split("::", 1)[0] in MOVED_TO_AWS_LANE:
        return AWS_LANE
    parts = nodeid.split("/")
    return LANES.get(parts[1], AWS_LANE) if len(parts) > 2 and parts[0] == "tests" else AWS_LANE
