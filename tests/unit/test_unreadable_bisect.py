"""How lakeloader.engine.unreadable finds the files of a failed read that fail on their own: bisection
over the batch, with the reader given as a function (here one that knows which files are broken)."""

from __future__ import annotations

from lakeloader.engine.unreadable import bisect_unreadable
from lakeloader.spark.inputs import InputFile


def files(n: int) -> list[InputFile]:
    return [InputFile(f"src/part-{i}.csv.gz", f"file:///raw/src/part-{i}.csv.gz", 10, "v1") for i in range(n)]


class Reader:
    """Reads a group: fails naming the first broken file in it; `together` fail only when all are read."""

    def __init__(self, broken: set[str] = frozenset(), together: set[str] = frozenset()) -> None:
        self.broken, self.together, self.groups = broken, together, []

    def __call__(self, group) -> str | None:
        names = [f.name for f in group]
        self.groups.append(names)
        bad = [n for n in names if n in self.broken]
        if bad:
            return f"{bad[0]}: Unexpected end of input stream"
        if self.together and self.together <= set(names):
            return "cannot merge schemas"
        return None


def test_each_file_that_fails_alone_is_named_with_its_reason_in_batch_order():
    batch = files(7)
    read = Reader(broken={"src/part-5.csv.gz", "src/part-1.csv.gz"})

    assert bisect_unreadable(batch, read) == {
        "src/part-1.csv.gz": "src/part-1.csv.gz: Unexpected end of input stream",
        "src/part-5.csv.gz": "src/part-5.csv.gz: Unexpected end of input stream",
    }


def test_one_bad_file_among_eight_takes_seven_reads_halving_each_failing_group():
    """The whole batch, then both halves of each failing group: 2·log2(8) + 1 reads."""
    read = Reader(broken={"src/part-5.csv.gz"})

    assert list(bisect_unreadable(files(8), read)) == ["src/part-5.csv.gz"]
    assert [len(group) for group in read.groups] == [8, 4, 4, 2, 1, 1, 2]
    assert read.groups[2] == [f"src/part-{i}.csv.gz" for i in (4, 5, 6, 7)]


def test_a_batch_that_reads_is_read_once_and_files_that_fail_only_together_are_not_blamed():
    read = Reader()
    assert bisect_unreadable(files(4), read) == {} and len(read.groups) == 1
    together = Reader(together={"src/part-0.csv.gz", "src/part-3.csv.gz"})
    assert bisect_unreadable(files(4), together) == {}
    assert bisect_unreadable(files(1), Reader(broken={"src/part-0.csv.gz"})) == {
        "src/part-0.csv.gz": "src/part-0.csv.gz: Unexpected end of input stream"
    }


def test_no_files_no_read():
    read = Reader()
    assert bisect_unreadable([], read) == {} and read.groups == []
