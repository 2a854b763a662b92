"""Compare a batch's schema with its target table's and decide what the policy allows.

Spark 3.5's MERGE does not evolve a schema, so the plan is applied with
ALTER TABLE *before* the MERGE, and the batch is then aligned to the
(possibly evolved) target schema with a `select` that is the schema contract.

Policies: ``evolve`` adds new columns and applies safe widenings; ``freeze``
never changes the table and reports ignored columns; ``fail`` fails on any
drift. An incompatible change fails under every policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeloader.errors import SchemaChangeError
from lakeloader.sql import quote

INTEGRAL_RANK = {T.ByteType: 1, T.ShortType: 2, T.IntegerType: 3, T.LongType: 4}


@dataclass
class SchemaPlan:
    """What the batch needs of the target schema. Paths are dotted for nested fields."""

    add: list[tuple[str, T.DataType]] = field(default_factory=list)
    widen: list[tuple[str, T.DataType, T.DataType]] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def changes_table(self) -> bool:
        return bool(self.add or self.widen)

    def describe_drift(self) -> list[str]:
        return (
            [f"new column {path} {dtype.simpleString()}" for path, dtype in self.add]
            + [
                f"column {path} widened {old.simpleString()} -> {new.simpleString()}"
                for path, old, new in self.widen
            ]
            + [f"new column {path} (ignored)" for path in self.ignored]
            + [f"column {path} missing from the source" for path in self.missing]
        )


def _integral_rank(dtype: T.DataType) -> int | None:
    return INTEGRAL_RANK.get(type(dtype))


def _compare(path: str, target: T.DataType, source: T.DataType) -> str:
    """'same', 'fits' (source casts losslessly into target), 'widen' (target must widen) or 'incompatible'."""
    if target == source or isinstance(source, T.NullType):
        return "same" if target == source else "fits"
    t_rank, s_rank = _integral_rank(target), _integral_rank(source)
    if t_rank and s_rank:
        return "fits" if s_rank <= t_rank else "widen"
    if isinstance(target, T.DoubleType) and isinstance(
        source, (T.FloatType, T.IntegerType, T.ShortType, T.ByteType)
    ):
        return "fits"
    if isinstance(target, T.FloatType) and isinstance(source, T.DoubleType):
        return "widen"
    if (
        isinstance(target, T.DecimalType)
        and isinstance(source, T.DecimalType)
        and target.scale == source.scale
    ):
        return "fits" if source.precision <= target.precision else "widen"
    if isinstance(target, T.TimestampType) and isinstance(source, (T.TimestampNTZType, T.DateType)):
        return "fits"
    return "incompatible"


def _plan_struct(
    prefix: str, target: T.StructType, source: T.StructType, plan: SchemaPlan, *, top: bool
) -> None:
    target_by_name = {f.name.lower(): f for f in target.fields}
    source_names = {f.name.lower() for f in source.fields}
    for src in source.fields:
        path = f"{prefix}{src.name}"
        tgt = target_by_name.get(src.name.lower())
        if tgt is None:
            plan.add.append((path, src.dataType))
            continue
        tgt_path = f"{prefix}{tgt.name}"
        if isinstance(tgt.dataType, T.StructType) and isinstance(src.dataType, T.StructType):
            _plan_struct(f"{tgt_path}.", tgt.dataType, src.dataType, plan, top=False)
            continue
        verdict = _compare(tgt_path, tgt.dataType, src.dataType)
        if verdict == "widen":
            plan.widen.append((tgt_path, tgt.dataType, src.dataType))
        elif verdict == "incompatible":
            plan.problems.append(
                f"column {tgt_path}: {src.dataType.simpleString()} cannot be written to "
                f"{tgt.dataType.simpleString()} (incompatible type change)"
            )
    for tgt in target.fields:
        if tgt.name.lower() not in source_names and top:
            plan.missing.append(f"{prefix}{tgt.name}")


def plan_schema(
    table_id: str, target: T.StructType, source: T.StructType, *, policy: str, keys: list[str]
) -> SchemaPlan:
    """Decide what happens to the target schema; raise SchemaChangeError when the policy forbids it."""
    plan = SchemaPlan()
    _plan_struct("", target, source, plan, top=True)
    missing_keys = [k for k in keys if k.lower() in {m.lower() for m in plan.missing}]
    plan.problems.extend(f"key column {k} was removed from the source" for k in missing_keys)
    if policy == "freeze":
        plan.ignored = [path for path, _ in plan.add]
        plan.add = []
        plan.problems.extend(
            f"column {path}: source type {new.simpleString()} does not fit the frozen "
            f"type {old.simpleString()}"
            for path, old, new in plan.widen
        )
        plan.widen = []
    elif policy == "fail":
        drift = plan.describe_drift()
        plan.problems.extend(d for d in drift if d not in plan.problems)
    if plan.problems:
        raise SchemaChangeError(table_id, plan.problems)
    return plan


def apply_plan(spark: SparkSession, table_name: str, plan: SchemaPlan) -> None:
    """ALTER the target so it can hold the batch (runs only under the evolve policy)."""
    for path, dtype in plan.add:
        column = ".".join(quote(p) for p in path.split("."))
        spark.sql(f"ALTER TABLE {table_name} ADD COLUMN {column} {dtype.simpleString()}")
    for path, _, new in plan.widen:
        column = ".".join(quote(p) for p in path.split("."))
        spark.sql(f"ALTER TABLE {table_name} ALTER COLUMN {column} TYPE {new.simpleString()}")


def _aligned(value: Column, source: T.DataType, target: T.DataType) -> Column:
    """Cast `value` to `target`, matching struct fields by name (Spark's struct cast is positional)."""
    if isinstance(source, T.StructType) and isinstance(target, T.StructType):
        by_lower = {f.name.lower(): f for f in source.fields}
        parts = []
        for fld in target.fields:
            src = by_lower.get(fld.name.lower())
            part = _aligned(value.getField(src.name), src.dataType, fld.dataType) if src else F.lit(None)
            parts.append(part.cast(fld.dataType).alias(fld.name))
        return F.when(value.isNull(), F.lit(None).cast(target)).otherwise(F.struct(*parts))
    return value.cast(target)


def align(df: DataFrame, target: T.StructType, extra: list[str]) -> DataFrame:
    """The batch in the target's column order and types; target columns the batch lacks read NULL.

    `extra` names bookkeeping columns carried along unchanged.
    """
    by_lower = {f.name.lower(): f for f in df.schema.fields}
    columns = []
    for fld in target.fields:
        src = by_lower.get(fld.name.lower())
        value = (
            _aligned(F.col(src.name), src.dataType, fld.dataType) if src else F.lit(None).cast(fld.dataType)
        )
        columns.append(value.alias(fld.name))
    return df.select(*columns, *[F.col(c) for c in extra])
