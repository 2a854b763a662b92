"""`make test`'s two lanes: the suite runs on two pytest-xdist workers (``-n 2 --dist loadgroup``), and
each suite belongs to one lane, a worker's whole run.

On two cores no suite alone keeps both busy: a quiet serial run used 1.3 cores on average, waiting
on one JVM's driver thread, a subprocess or a deploy. Two lanes fill those gaps. The split keeps the
JVM-heavy suites that share the session's SparkSession (spark, faults) in one lane and the suites that
need little of it (e2e with its emulator and kept drivers, the CDK synths of infra, unit) in the
other, so neither worker's moto backends, emulator or Spark session is shared with the other's.
"""

from __future__ import annotations

SPARK_LANE, AWS_LANE = "spark", "aws"
LANES = {"spark": SPARK_LANE, "faults": SPARK_LANE, "e2e": AWS_LANE, "infra": AWS_LANE, "unit": AWS_LANE}


def lane_of(nodeid: str) -> str:
    """The lane of a test (`tests/<suite>/...`); anything else goes with the AWS lane."""
    parts = nodeid.split("/")
    return LANES.get(parts[1], AWS_LANE) if len(parts) > 2 and parts[0] == "tests" else AWS_LANE
