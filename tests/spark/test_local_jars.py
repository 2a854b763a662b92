"""A local session reads the runtime's jars where they lie (lakeloader_dev.jars.spark_conf: ``local:``
URIs): none is served by the driver's file server, which copies every jar, 377 MB for glue-5.1, to
each new SparkContext's executor."""

from __future__ import annotations

import uuid

import pytest

from lakeloader_dev.jars import local_jars

pytestmark = pytest.mark.spark


def test_the_sessions_jars_are_read_in_place_not_served(spark):
    listed = spark.sparkContext._jsc.sc().listJars().mkString("\n").splitlines()
    assert sorted(listed) == sorted(f"file:{path}" for path in local_jars()), listed
    name = f"lakeloader.local_jars_{uuid.uuid4().hex[:8]}.t"  # Iceberg's classes, loaded from them in a task
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING iceberg")
    spark.sql(f"INSERT INTO {name} VALUES (1), (2)")
    assert spark.table(name).count() == 2
