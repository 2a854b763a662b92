"""Data quality rules: evaluated on an audit branch, failing rows quarantined, outcomes reported.

lakeloader.engine.gate writes a gated batch to an audit branch, calls `evaluate` and publishes or
rejects it; the rules' semantics and the write-audit-publish steps: docs/quality_erase_maintain.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakeloader import iceberg
from lakeloader.config import QualityRule, TableConfig
from lakeloader.spark.columns import find_column
from lakeloader.spark.errors import LakeloaderError
from lakeloader.spark.sql import literal, qualified, quote, value_literal

QUARANTINE_COLUMNS = (
    "table_id STRING, run_id STRING, audit_branch STRING, rule STRING, reason STRING, "
    "record STRING, quarantined_at TIMESTAMP"
)


@dataclass
class RuleOutcome:
    """One rule's verdict on one batch."""

    rule: str
    kind: str
    passed: bool
    failed_rows: int = 0
    detail: str = ""

    def describe(self) -> str:
        if self.passed:
            return f"{self.rule}: passed" + (f" ({self.detail})" if self.detail else "")
        what = self.detail or f"{self.failed_rows:,} row(s) failed"
        return f"{self.rule}: FAILED, {what}"


@dataclass
class QualityReport:
    """The quality gate's outcome for one batch; `LoadResult.quality`."""

    action: str = "passed"  # passed | quarantined | failed
    outcomes: list[RuleOutcome] = field(default_factory=list)
    quarantined_rows: int = 0
    quarantine_table: str | None = None
    branch: str | None = None

    def describe(self) -> str:
        failed = [o for o in self.outcomes if not o.passed]
        head = (
            f"quality {self.action}: {len(self.outcomes) - len(failed)}/{len(self.outcomes)} rule(s) passed"
        )
        if self.quarantined_rows:
            head += f"; {self.quarantined_rows:,} row(s) quarantined in {self.quarantine_table}"
        return "; ".join([head, *(o.describe() for o in failed)])


class QualityError(LakeloaderError):
    """A batch failed its quality rules; nothing of it was published."""

    def __init__(self, table_id: str, report: QualityReport, why: str):
        self.table_id, self.report = table_id, report
        listing = "\n  - ".join(o.describe() for o in report.outcomes)
        super().__init__(f"table {table_id!r}: {why}; nothing was published:\n  - {listing}")


# --------------------------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class _RowCheck:
    """A row rule as SQL: `fails` is TRUE for a failing row, `reason` explains it."""

    outcome_index: int
    fails: str
    reason: str


def _column(columns: list[str], name: str, table_id: str, rule: str) -> str:
    actual = find_column(columns, name)
    if actual is None:
        raise LakeloaderError(
            f"table {table_id!r}: quality rule {rule!r} names column {name!r}, which the table does not "
            f"have (columns: {', '.join(columns)})"
        )
    return quote(actual)


def _row_check(rule: QualityRule, index: int, columns: list[str], table_id: str) -> _RowCheck | None:
    label = rule.label

    def col(name: str) -> str:
        return _column(columns, name, table_id, label)

    as_text = "CAST({} AS STRING)"
    if rule.not_null is not None:
        cols = [col(c) for c in rule.not_null]
        fails = " OR ".join(f"{c} IS NULL" for c in cols)
        reason = (
            "concat_ws(', ', "
            + ", ".join(
                f"IF({c} IS NULL, {literal(name + ' is NULL')}, NULL)"
                for c, name in zip(cols, rule.not_null, strict=True)
            )
            + ")"
        )
        return _RowCheck(index, fails, reason)
    if rule.between is not None:
        c = col(rule.between.column)
        bounds = []
        if rule.between.min is not None:
            bounds.append(f"{c} < {value_literal(rule.between.min)}")
        if rule.between.max is not None:
            bounds.append(f"{c} > {value_literal(rule.between.max)}")
        interval = f"[{rule.between.min if rule.between.min is not None else '-inf'}, " + (
            f"{rule.between.max if rule.between.max is not None else 'inf'}]"
        )
        fails = f"{c} IS NOT NULL AND ({' OR '.join(bounds)})"
        reason = (
            f"concat({literal(rule.between.column + ' = ')}, {as_text.format(c)}, "
            f"{literal(' not in ' + interval)})"
        )
        return _RowCheck(index, fails, reason)
    if rule.in_set is not None:
        c = col(rule.in_set.column)
        values = ", ".join(value_literal(v) for v in rule.in_set.values)
        fails = f"{c} IS NOT NULL AND NOT ({c} IN ({values}))"
        reason = f"concat({literal(rule.in_set.column + ' = ')}, {as_text.format(c)}, ' is not in the set')"
        return _RowCheck(index, fails, reason)
    if rule.regex is not None:
        c = col(rule.regex.column)
        fails = f"{c} IS NOT NULL AND NOT ({as_text.format(c)} RLIKE {literal(rule.regex.pattern)})"
        reason = (
            f"concat({literal(rule.regex.column + ' = ')}, {as_text.format(c)}, "
            f"{literal(' does not match ' + rule.regex.pattern)})"
        )
        return _RowCheck(index, fails, reason)
    if rule.expression is not None:
        fails = f"NOT coalesce(({rule.expression}), FALSE)"
        return _RowCheck(index, fails, literal(f"not true: {rule.expression}"))
    return None


def _unique_columns(rule: QualityRule, table: TableConfig) -> list[str]:
    return list(table.keys) if rule.unique is True else list(rule.unique or [])


@dataclass
class Evaluation:
    outcomes: list[RuleOutcome]
    quarantine: DataFrame | None  # table_id, run_id, audit_branch, rule, reason, record, quarantined_at
    failing_rows: DataFrame | None  # distinct new rows that failed a row rule (table columns)
    table_level_failed: bool

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outcomes)


def new_rows(
    spark: SparkSession, name: str, branch: str, base: int | None, table: TableConfig, batch: DataFrame
) -> DataFrame:
    """The rows the branch holds and `main` (snapshot `base`) does not: what the batch wrote."""
    after = spark.sql(f"SELECT * FROM {name} VERSION AS OF {literal(branch)}")
    columns = after.columns
    if base is None:
        return after
    before = spark.sql(f"SELECT * FROM {name} VERSION AS OF {base}")
    # The base snapshot may predate a column the batch added: align it to the branch's schema.
    before = before.select(
        *[
            F.col(c) if c in before.columns else F.lit(None).cast(after.schema[c].dataType).alias(c)
            for c in columns
        ]
    )
    keys = [(find_column(columns, k), find_column(batch.columns, k)) for k in table.keys]
    if keys and all(t and b for t, b in keys):
        touched = batch.select(*[F.col(b).alias(f"_ll_k{i}") for i, (_, b) in enumerate(keys)]).distinct()
        on = [F.col(t) == F.col(f"_ll_k{i}") for i, (t, _) in enumerate(keys)]
        after = after.join(F.broadcast(touched), on=on, how="left_semi")
        before = before.join(F.broadcast(touched), on=on, how="left_semi")
    return after.exceptAll(before)


def evaluate(
    spark: SparkSession,
    name: str,
    branch: str,
    base: int | None,
    table: TableConfig,
    batch: DataFrame,
    *,
    run_id: str,
) -> Evaluation:
    """Check every rule of `table` against the audit branch."""
    rules = table.quality.rules
    outcomes = [RuleOutcome(rule.label, rule.kind, True) for rule in rules]
    whole = spark.sql(f"SELECT * FROM {name} VERSION AS OF {literal(branch)}")
    columns = whole.columns
    fresh = new_rows(spark, name, branch, base, table, batch).localCheckpoint(eager=True)
    checks = [c for i, rule in enumerate(rules) if (c := _row_check(rule, i, columns, table.id))]

    # unique: duplicated values over the whole branch, blamed on the batch's rows holding them
    flagged = fresh
    unique_flags: list[tuple[int, str, str]] = []
    for index, rule in enumerate(rules):
        if rule.unique is None or rule.unique is False:
            continue
        for column in _unique_columns(rule, table):
            _column(columns, column, table.id, rule.label)  # raises naming an unknown column
        cols = [find_column(columns, c) or c for c in _unique_columns(rule, table)]
        dup = (
            whole.groupBy(*cols)
            .count()
            .filter(F.col("count") > 1)
            .select(
                *[F.col(c).alias(f"_ll_u{index}_{j}") for j, c in enumerate(cols)],
                F.col("count").alias(f"_ll_u{index}_n"),
            )
        )
        on = [flagged[c].eqNullSafe(F.col(f"_ll_u{index}_{j}")) for j, c in enumerate(cols)]
        flagged = flagged.join(dup, on=on, how="left").drop(*[f"_ll_u{index}_{j}" for j in range(len(cols))])
        count_col = quote(f"_ll_u{index}_n")
        shown = ", ".join(rule_cols for rule_cols in _unique_columns(rule, table))
        unique_flags.append(
            (
                index,
                f"{count_col} IS NOT NULL",
                f"concat({literal('(' + shown + ') value appears ')}, CAST({count_col} AS STRING), ' times')",
            )
        )

    all_checks = [(c.outcome_index, c.fails, c.reason) for c in checks] + unique_flags
    fail_cols = {i: f"_ll_fail_{i}" for i, _, _ in all_checks}
    for index, fails, reason in all_checks:
        flagged = flagged.withColumn(fail_cols[index], F.expr(f"coalesce(({fails}), FALSE)"))
        flagged = flagged.withColumn(f"_ll_reason_{index}", F.expr(reason))
    flagged = flagged.localCheckpoint(eager=True)

    if all_checks:
        counts = flagged.agg(*[F.sum(F.col(c).cast("long")).alias(c) for c in fail_cols.values()]).first()
        for index, column in fail_cols.items():
            failed = int(counts[column] or 0)
            outcomes[index].failed_rows = failed
            outcomes[index].passed = failed == 0

    table_level_failed = False
    for index, rule in enumerate(rules):
        if rule.min_row_count is not None:
            total = whole.count()
            outcomes[index].passed = total >= rule.min_row_count
            outcomes[
                index
            ].detail = f"the table would hold {total:,} row(s), at least {rule.min_row_count:,} needed"
            table_level_failed = table_level_failed or not outcomes[index].passed

    failing_indexes = [i for i in fail_cols if not outcomes[i].passed]
    quarantine = failing = None
    if failing_indexes:
        record = F.to_json(F.struct(*[F.col(quote(c)) for c in columns]))
        parts = [
            flagged.filter(F.col(fail_cols[i])).select(
                F.lit(table.id).alias("table_id"),
                F.lit(run_id).alias("run_id"),
                F.lit(branch).alias("audit_branch"),
                F.lit(rules[i].label).alias("rule"),
                F.col(f"_ll_reason_{i}").alias("reason"),
                record.alias("record"),
                F.current_timestamp().alias("quarantined_at"),
            )
            for i in failing_indexes
        ]
        quarantine = parts[0]
        for part in parts[1:]:
            quarantine = quarantine.unionByName(part)
        any_fail = F.lit(False)
        for i in failing_indexes:
            any_fail = any_fail | F.col(fail_cols[i])
        failing = flagged.filter(any_fail).select(*[F.col(quote(c)) for c in columns]).distinct()
    return Evaluation(outcomes, quarantine, failing, table_level_failed)


# -------------------------------------------------------------------------------------- quarantine


def quarantine_name(name: str, table: TableConfig) -> str:
    quarantine = table.quality.quarantine_table or f"{table.target.table}__quarantine"
    return qualified(iceberg.catalog_of(name), table.target.database, quarantine)


def write_quarantine(spark: SparkSession, target: str, rows: DataFrame) -> int:
    """Append the failing rows (Evaluation.quarantine) to the quarantine table; how many."""
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {target} ({QUARANTINE_COLUMNS}) USING iceberg "
        "TBLPROPERTIES ('format-version'='2')"
    )
    rows = rows.localCheckpoint(eager=True)
    count = rows.count()
    rows.writeTo(target).append()
    return count


def exclude(batch: DataFrame, failing: DataFrame, table: TableConfig) -> DataFrame:
    """The batch without the failing rows' changes: by key, or (no keys) by every column."""
    if table.keys:
        pairs = [(find_column(batch.columns, k), find_column(failing.columns, k)) for k in table.keys]
    else:
        pairs = [(b, f) for f in failing.columns if (b := find_column(batch.columns, f))]
    bad = failing.select(*[F.col(quote(f)).alias(f"_ll_x{i}") for i, (_, f) in enumerate(pairs)]).distinct()
    on = [F.col(quote(b)).eqNullSafe(F.col(f"_ll_x{i}")) for i, (b, _) in enumerate(pairs)]
    return batch.join(F.broadcast(bad), on=on, how="left_anti")


def delete_quarantined(spark: SparkSession, target: str, branch: str) -> None:
    """Take back the rows an attempt quarantined whose batch was then not published."""
    spark.sql(f"DELETE FROM {target} WHERE audit_branch = {literal(branch)}")


def combine_reports(total: QualityReport | None, report: QualityReport | None) -> QualityReport | None:
    """Several batches of one run as one report: failed rows and quarantined rows add up."""
    if report is None:
        return total
    if total is None:
        return QualityReport(
            report.action,
            [RuleOutcome(o.rule, o.kind, o.passed, o.failed_rows, o.detail) for o in report.outcomes],
            report.quarantined_rows,
            report.quarantine_table,
            report.branch,
        )
    severity = {"passed": 0, "quarantined": 1, "failed": 2}
    if severity.get(report.action, 0) > severity.get(total.action, 0):
        total.action = report.action
    by_rule = {o.rule: o for o in total.outcomes}
    for outcome in report.outcomes:
        mine = by_rule.get(outcome.rule)
        if mine is None:
            total.outcomes.append(
                RuleOutcome(outcome.rule, outcome.kind, outcome.passed, outcome.failed_rows)
            )
            continue
        mine.passed = mine.passed and outcome.passed
        mine.failed_rows += outcome.failed_rows
        mine.detail = outcome.detail or mine.detail
    total.quarantined_rows += report.quarantined_rows
    total.quarantine_table = report.quarantine_table or total.quarantine_table
    return total


def report_counts(report: QualityReport | None) -> dict[str, int]:
    """Rule outcomes as run-history counts (the ledger's counts map)."""
    if report is None:
        return {}
    counts = {
        "quality_rules_checked": len(report.outcomes),
        "quality_rules_failed": sum(1 for o in report.outcomes if not o.passed),
        "quality_quarantined_rows": report.quarantined_rows,
    }
    counts.update({f"quality_failed_rows:{o.rule}": o.failed_rows for o in report.outcomes if not o.passed})
    return counts
