"""Which files of a batch cannot be read, once its read failed naming none.

A Spark/JVM read error (a truncated Parquet file, a zero-byte object, a truncated gzip, an object the
role cannot decrypt, a CSV the reader cannot decode) names no input file the drain can set aside, so
one such file would block its table. Bisection finds each file that fails on its own: read the batch
as its format reads it (every column, every row: Spark's `noop` sink), and where that fails, each
half again, down to single files.

Cost: nothing while reads succeed; it runs only after a read failed. Then one read of the whole
batch (a failure that no file explains, e.g. the catalog or the JVM, ends there and the batch fails
as before), then each half of each failing group: about 2·log2(n) reads for one bad file among n,
which together read about the batch once more where the bad file fails as soon as it is opened
(a Parquet footer) and about twice where it fails mid-read (a truncated gzip). Measured
(benchmarks/unreadable.py, 1,000 Parquet files, one truncated): 14 Spark jobs and 50 s, where the
read of the good batch took 79 s. Files that only fail together are not blamed: no single file is
guilty (Parquet files whose schemas cannot be merged are named before the read, by
lakeloader.engine.file_conflicts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lakeloader.spark.errors import LakeloaderError, root_cause
from lakeloader.spark.inputs import InputFile
from lakeloader.spark.progress import Progress, no_progress

ReadError = Callable[[Sequence[InputFile]], str | None]
"""Reads a group of files; the reader's one-line reason when that fails, None when it succeeds."""


def bisect_unreadable(files: Sequence[InputFile], read_error: ReadError) -> dict[str, str]:
    """Every file whose own read fails, with its reason, in batch order."""
    found: dict[str, str] = {}

    def visit(group: Sequence[InputFile]) -> None:
        error = read_error(group)
        if error is None:
            return
        if len(group) == 1:
            found[group[0].name] = error
            return
        middle = len(group) // 2
        visit(group[:middle])
        visit(group[middle:])

    if files:
        visit(files)
    return found


def spark_read_error(spark, table) -> ReadError:
    """The batch's format reader over a group of files, every value read (no validation: a file that
    can be read but holds a bad value is the validation's to name)."""
    from lakeloader.formats import source_format

    fmt = source_format(table.source.cdc)

    def read_error(group: Sequence[InputFile]) -> str | None:
        try:
            frame = fmt.read_checked(spark, table, list(group), [])
            frame.write.format("noop").mode("overwrite").save()
        except LakeloaderError:  # readable: what is wrong is in its data, which validation reports
            return None
        except Exception as exc:  # Spark, the JVM, the object store
            return root_cause(exc)
        return None

    return read_error


def find_unreadable(
    spark, table, files: Sequence[InputFile], progress: Progress = no_progress
) -> dict[str, str]:
    """The files of a failed read that cannot be read on their own, each with the reader's reason."""
    progress(f"the read failed naming no file: looking for unreadable files among {len(files)}")
    found = bisect_unreadable(files, spark_read_error(spark, table))
    progress(f"{len(found)} unreadable file(s)" + (": " + ", ".join(found) if found else ""))
    return found
