"""A stand-in for a SparkSession whose code only reads its runtime settings (`spark.conf.get`), so that code
is tested without a JVM. Like PySpark's RuntimeConfig.get, a key that is not set answers the default given,
and without a default it raises (PySpark raises the JVM's NoSuchElementException)."""

from __future__ import annotations

_NO_DEFAULT = object()


class Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: object = _NO_DEFAULT) -> object:
        if key in self.values or default is not _NO_DEFAULT:
            return self.values.get(key, default)
        raise KeyError(f"{key} is not set")  # where PySpark raises


class Session:
    def __init__(self, **values: str) -> None:
        self.conf = Conf(values)
