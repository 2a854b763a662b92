"""Progress lines said from several threads at once (the demo's event listener beside its main loop, a
ticker beside a run) each end their own line: none runs into another."""

from __future__ import annotations

import io
import re
import threading
import time

from lakeloader.spark.progress import write_line


class Yielding(io.StringIO):
    """A stream that lets other threads run between writes, as a terminal's slow write does."""

    def write(self, text: str) -> int:
        time.sleep(0)
        written = super().write(text)
        time.sleep(0.0001)
        return written


def test_lines_said_from_many_threads_never_run_together():
    stream = Yielding()

    def say(n: int) -> None:
        for i in range(100):
            write_line(stream, f"thread {n} line {i}")

    threads = [threading.Thread(target=say, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    lines = stream.getvalue().split("\n")
    assert lines[-1] == ""
    assert all(re.fullmatch(r"thread \d line \d+", line) for line in lines[:-1]), [
        line for line in lines[:-1] if not re.fullmatch(r"thread \d line \d+", line)
    ][:5]
    assert len(lines) == 601
