"""Compare a batch's schema with its target table's, decide what the table's policy allows, and
evolve the table in one schema commit before the write (Spark 3.5's MERGE does not evolve a schema).

Policies, widenings and what is incompatible: docs/schema_and_scd2.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakeloader import iceberg
from lakeloader.config import NEW_TABLE_PROPERTIES, TableConfig
from lakeloader.engine import table_settings
from lakeloader.spark.errors import SchemaChangeError
from lakeloader.spark.session import java_class
from lakeloader.spark.sql import quote, tblproperties
from lakeloader.spark.type_changes import Path, aligned, compare, dotted


@dataclass
class SchemaPlan:
    """What the batch needs of the target schema. Paths are tuples of field names."""

    add: list[tuple[Path, T.DataType]] = field(default_factory=list)
    widen: list[tuple[Path, T.DataType, T.DataType]] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    untyped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def changes_table(self) -> bool:
        return bool(self.add or self.widen)

    def describe_drift(self) -> list[str]:
        return (
            [f"new column {dotted(path)} {dtype.simpleString()}" for path, dtype in self.add]
            + [
                f"column {dotted(path)} widened {old.simpleString()} -> {new.simpleString()}"
                for path, old, new in self.widen
            ]
            + [f"new column {path} (ignored)" for path in self.ignored]
            + [f"column {path} missing from the source" for path in self.missing]
        )

    @property
    def notes(self) -> list[str]:
        """Lines for the run summary: what changed, what was ignored, what reads NULL."""
        return (
            [f"schema: added column {dotted(path)} {dtype.simpleString()}" for path, dtype in self.add]
            + [
                f"schema: widened {dotted(path)} {old.simpleString()} -> {new.simpleString()}"
                for path, old, new in self.widen
            ]
            + [f"schema frozen: source column {path} is not in the table, ignored" for path in self.ignored]
            + [
                f"schema: source column {path} holds only NULLs (no type yet), not added"
                for path in self.untyped
            ]
            + [
                f"schema: column {path} missing from the source, NULL in the rows written"
                for path in self.missing
            ]
        )


def _has_null_type(dtype: T.DataType) -> bool:
    if isinstance(dtype, T.NullType):
        return True
    if isinstance(dtype, T.StructType):
        return any(_has_null_type(f.dataType) for f in dtype.fields)
    if isinstance(dtype, T.ArrayType):
        return _has_null_type(dtype.elementType)
    if isinstance(dtype, T.MapType):
        return _has_null_type(dtype.keyType) or _has_null_type(dtype.valueType)
    return False


def typed_columns(df: DataFrame) -> DataFrame:
    """`df` without the columns that have no type yet (NULL in every row of a JSON batch, say).

    Iceberg has no NULL type; such a column is added by a later batch that carries a value.
    """
    return df.select(*[F.col(f.name) for f in df.schema.fields if not _has_null_type(f.dataType)])


def _duplicates(struct: T.StructType) -> list[str]:
    seen: dict[str, str] = {}
    clashes = []
    for fld in struct.fields:
        other = seen.setdefault(fld.name.lower(), fld.name)
        if other != fld.name:
            clashes.append(f"{other}/{fld.name}")
    return clashes


def _plan_type(path: Path, target: T.DataType, source: T.DataType, plan: SchemaPlan) -> None:
    """Compare one field's types, recursing into structs, array elements and map values."""
    if isinstance(target, T.StructType) and isinstance(source, T.StructType):
        _plan_struct(path, target, source, plan)
        return
    if isinstance(target, T.ArrayType) and isinstance(source, T.ArrayType):
        _plan_type((*path, "element"), target.elementType, source.elementType, plan)
        return
    if isinstance(target, T.MapType) and isinstance(source, T.MapType):
        if compare(target.keyType, source.keyType) not in ("same", "fits"):
            plan.problems.append(
                f"column {dotted(path)}: map key {source.keyType.simpleString()} cannot be written to "
                f"{target.keyType.simpleString()} (map keys cannot change)"
            )
        _plan_type((*path, "value"), target.valueType, source.valueType, plan)
        return
    verdict = compare(target, source)
    if verdict == "widen":
        plan.widen.append((path, target, source))
    elif verdict == "incompatible":
        plan.problems.append(
            f"column {dotted(path)}: {source.simpleString()} cannot be written to "
            f"{target.simpleString()} (incompatible type change)"
        )


def _plan_struct(prefix: Path, target: T.StructType, source: T.StructType, plan: SchemaPlan) -> None:
    for clash in _duplicates(source):
        where = f" in {dotted(prefix)}" if prefix else ""
        plan.problems.append(f"source columns {clash}{where} differ only in case")
    target_by_name = {f.name.lower(): f for f in target.fields}
    source_names = {f.name.lower() for f in source.fields}
    for src in source.fields:
        tgt = target_by_name.get(src.name.lower())
        if tgt is None:
            if _has_null_type(src.dataType):
                plan.untyped.append(dotted((*prefix, src.name)))
            else:
                plan.add.append(((*prefix, src.name), src.dataType))
            continue
        _plan_type((*prefix, tgt.name), tgt.dataType, src.dataType, plan)
    plan.missing.extend(
        dotted((*prefix, tgt.name)) for tgt in target.fields if tgt.name.lower() not in source_names
    )


def plan_schema(
    table_id: str,
    target: T.StructType,
    source: T.StructType,
    *,
    policy: str,
    keys: list[str],
    managed: list[str] | tuple[str, ...] = (),
) -> SchemaPlan:
    """Decide what happens to the target schema; raise SchemaChangeError when the policy forbids it.

    `managed` names target columns lakeloader maintains itself (SCD2's valid_from, ...):
    the source must not send them and they are never reported as missing.
    """
    managed_lower = {m.lower() for m in managed}
    clashing = [f.name for f in source.fields if f.name.lower() in managed_lower]
    target = T.StructType([f for f in target.fields if f.name.lower() not in managed_lower])
    source = T.StructType([f for f in source.fields if f.name.lower() not in managed_lower])

    plan = SchemaPlan()
    plan.problems.extend(
        f"source column {c} has the name of a column lakeloader manages on this table" for c in clashing
    )
    _plan_struct((), target, source, plan)
    missing_lower = {m.lower() for m in plan.missing}
    plan.problems.extend(
        f"key column {k} was removed from the source" for k in keys if k.lower() in missing_lower
    )
    if policy == "freeze":
        plan.ignored = [dotted(path) for path, _ in plan.add] + plan.untyped
        plan.add, plan.untyped = [], []
        plan.problems.extend(
            f"column {dotted(path)}: source type {new.simpleString()} does not fit the frozen "
            f"type {old.simpleString()}"
            for path, old, new in plan.widen
        )
        plan.widen = []
    elif policy == "fail":
        # An all-NULL new column carries nothing yet: noted, not drift (it fails once it has a type).
        plan.problems.extend(d for d in plan.describe_drift() if d not in plan.problems)
    elif policy != "evolve":
        raise ValueError(f"unknown schema_evolution policy {policy!r}")
    if plan.problems:
        raise SchemaChangeError(table_id, plan.problems)
    return plan


def _iceberg_type(spark: SparkSession, dtype: T.DataType):
    """The Iceberg type of a Spark type (fresh field ids are assigned when the column is added)."""
    java_type = java_class(spark, "org.apache.spark.sql.types.DataType").fromJson(dtype.json())
    convert = java_class(spark, "org.apache.iceberg.spark.SparkSchemaUtil").convert
    if isinstance(dtype, T.StructType):
        return convert(java_type).asStruct()
    return convert(java_type)


def apply_plan(spark: SparkSession, plan: SchemaPlan, name: str) -> None:
    """Evolve table `name` so it can hold the batch: every change of the plan in ONE schema commit.

    Spark SQL would need one ALTER TABLE (one commit) per change; Iceberg's
    UpdateSchema applies them all or none.
    """
    if not plan.changes_table:
        return
    update = iceberg.iceberg_table(spark, name).updateSchema().caseSensitive(False)
    for path, dtype in plan.add:
        parent, column = path[:-1], path[-1]
        if parent:
            update = update.addColumn(dotted(parent), column, _iceberg_type(spark, dtype))
        else:
            update = update.addColumn(column, _iceberg_type(spark, dtype))
    for path, _, new in plan.widen:
        update = update.updateColumn(dotted(path), _iceberg_type(spark, new))
    update.commit()
    spark.sql(f"REFRESH TABLE {name}")


def create_table(spark: SparkSession, name: str, table: TableConfig, data: DataFrame) -> None:
    """Create the target from the first batch's columns, with the configured partitioning and properties."""
    catalog_db = name.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog_db}")
    columns = ", ".join(f"{quote(f.name)} {f.dataType.simpleString()}" for f in data.schema.fields)
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} ({columns}) {table_layout_sql(table, data.columns)}")


def table_layout_sql(table: TableConfig, columns: list[str]) -> str:
    """`USING iceberg [PARTITIONED BY (...)] TBLPROPERTIES (...)` of a table lakeloader creates."""
    partitioning = ""
    if table.target.partition_by:
        transforms = [table_settings.partition_sql(expr, columns) for expr in table.target.partition_by]
        partitioning = f" PARTITIONED BY ({', '.join(transforms)})"
    properties = {
        **NEW_TABLE_PROPERTIES,
        "format-version": str(table.target.format_version),
        **table_settings.config_properties(table),
    }
    return f"USING iceberg{partitioning} {tblproperties(properties)}"


def align(df: DataFrame, target: T.StructType, extra: list[str]) -> DataFrame:
    """The batch in the target's column order and types; target columns the batch lacks read NULL.

    `extra` names bookkeeping columns carried along unchanged.
    """
    by_lower = {f.name.lower(): f for f in df.schema.fields}
    columns = []
    for fld in target.fields:
        src = by_lower.get(fld.name.lower())
        value = (
            aligned(F.col(src.name), src.dataType, fld.dataType) if src else F.lit(None).cast(fld.dataType)
        )
        columns.append(value.alias(fld.name))
    return df.select(*columns, *[F.col(c) for c in extra])
