"""Turn `python -m benchmarks.merge --json FILE` output into the markdown tables of RESULTS.md.

python -m benchmarks.report results.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def markdown(results: dict) -> str:
    lines = [
        "| scenario | case | engine | median s | min .. max (n) | cpu s | jobs | changes/s "
        "| peak MiB jvm / py |",
        "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    for c in results["cases"]:
        head = f"| {c['scenario']} | {c['case']} | {c['engine']} |"
        if c["skipped"]:
            lines.append(f"{head} skipped: {c['skipped']} | | | | | |")
            continue
        s = c["seconds"]
        jobs = str(round(statistics.median(c["jobs"]))) if c.get("jobs") and max(c["jobs"]) else "-"
        mem = f"{c['peak_mib'].get('jvm', '?')} / {c['peak_mib'].get('py', '?')}"
        lines.append(
            f"{head} {c['median']:.2f} | {min(s):.2f} .. {max(s):.2f} ({len(s)}) | "
            f"{statistics.median(c['cpu']):.2f} | {jobs} | {c['changes'] / c['median']:,.0f} | {mem} |"
        )
    if compaction := results.get("compaction"):
        before, after = compaction["query_before_s"], compaction["query_after_s"]
        mb, ma = statistics.median(before), statistics.median(after)
        lines += [
            "",
            f"Compaction of lakeloader's small-batch table ({compaction['compaction_seconds']:.1f} s): files "
            f"{compaction['files_before']} -> {compaction['files_after']}; `{compaction['query']}` "
            f"median {mb:.2f} s -> {ma:.2f} s (x{mb / ma:.1f}).",
        ]
    lines += ["", "```", *[r.strip() for r in results.get("ratios", [])], "```"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    for path in args:
        print(markdown(json.loads(Path(path).read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
