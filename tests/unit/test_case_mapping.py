"""The engine maps case for the ASCII letters alone (lakeloader.formats.base.ascii_upper): Spark 4's
`upper`, `lower` and `initcap` map case through ICU, whose case data take about a second to load in
every new JVM, each Glue 6.0 job run among them (benchmarks/RESULTS.md). Read from the source, no Spark."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "lakeloader"
# F.upper(...) and the like, and the SQL functions in generated SQL; not Python's str.lower().
ICU_CASE_MAPPING = re.compile(
    r"\bF\.(?:upper|lower|initcap)\(|(?<![.\w])(?:upper|lower|initcap|ucase|lcase)\("
)


def test_no_spark_case_mapping_in_the_engine():
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if ICU_CASE_MAPPING.search(line)
    ]
    assert not found, "use lakeloader.formats.base.ascii_upper / ascii_lower:\n" + "\n".join(found)
