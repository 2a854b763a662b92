"""How a column's Spark type may change: which source types a table's type holds as they are, which
widen it (int -> bigint, float -> double, decimal precision up) and which it cannot hold; two types'
wider one; a value cast from one to the other by field name. The engine plans a table's schema with
them (lakeloader.engine.schema), and a batch's files are checked and read with them before they are
combined (lakeloader.engine.file_conflicts, lakeloader.formats.files). Policies: docs/schema_and_scd2.md.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

INTEGRAL_RANK = {T.ByteType: 1, T.ShortType: 2, T.IntegerType: 3, T.LongType: 4}

Path = tuple[str, ...]


def dotted(path: Path) -> str:
    """A field path as users read it: ``address.zip``, ``items.element.qty``."""
    return ".".join(path)


def _integral_rank(dtype: T.DataType) -> int | None:
    return INTEGRAL_RANK.get(type(dtype))


def compare(target: T.DataType, source: T.DataType) -> str:
    """'same', 'fits' (source casts losslessly into target), 'widen' (target must widen) or 'incompatible'."""
    if target == source:
        return "same"
    if isinstance(source, T.NullType):
        return "fits"
    t_rank, s_rank = _integral_rank(target), _integral_rank(source)
    if t_rank and s_rank:
        return "fits" if s_rank <= t_rank else "widen"
    if isinstance(target, T.DoubleType) and isinstance(
        source, (T.FloatType, T.IntegerType, T.ShortType, T.ByteType)
    ):
        return "fits"
    if isinstance(target, T.FloatType) and isinstance(source, (T.ShortType, T.ByteType)):
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
    if isinstance(target, T.TimestampNTZType) and isinstance(source, T.DateType):
        return "fits"
    return "incompatible"


def differences(
    path: Path, target: T.DataType, source: T.DataType
) -> list[tuple[Path, str, T.DataType, T.DataType]]:
    """Where `source` does not fit `target` as it is: (path, 'widen' or 'incompatible', the target's
    type there, the source's), through struct fields both have, array elements and map values. A map
    key that would have to change is incompatible."""
    if isinstance(target, T.StructType) and isinstance(source, T.StructType):
        by_lower = {f.name.lower(): f for f in target.fields}
        found = []
        for fld in source.fields:
            own = by_lower.get(fld.name.lower())
            if own is not None:
                found += differences((*path, own.name), own.dataType, fld.dataType)
        return found
    if isinstance(target, T.ArrayType) and isinstance(source, T.ArrayType):
        return differences((*path, "element"), target.elementType, source.elementType)
    if isinstance(target, T.MapType) and isinstance(source, T.MapType):
        key = compare(target.keyType, source.keyType)
        keys = (
            []
            if key in ("same", "fits")
            else [((*path, "key"), "incompatible", target.keyType, source.keyType)]
        )
        return keys + differences((*path, "value"), target.valueType, source.valueType)
    verdict = compare(target, source)
    return [] if verdict in ("same", "fits") else [(path, verdict, target, source)]


def wider(first: T.DataType, second: T.DataType) -> T.DataType:
    """One type holding both (where `differences` finds nothing incompatible): `first`, widened where
    `second` is wider, with the struct fields only `second` has appended (as Spark's schema merge)."""
    if isinstance(first, T.StructType) and isinstance(second, T.StructType):
        by_lower = {f.name.lower(): f for f in second.fields}
        fields = []
        for fld in first.fields:
            other = by_lower.get(fld.name.lower())
            if other is None:
                fields.append(fld)
            else:
                kind = wider(fld.dataType, other.dataType)
                fields.append(T.StructField(fld.name, kind, fld.nullable or other.nullable, fld.metadata))
        known = {f.name.lower() for f in first.fields}
        return T.StructType(fields + [f for f in second.fields if f.name.lower() not in known])
    if isinstance(first, T.ArrayType) and isinstance(second, T.ArrayType):
        return T.ArrayType(
            wider(first.elementType, second.elementType), first.containsNull or second.containsNull
        )
    if isinstance(first, T.MapType) and isinstance(second, T.MapType):
        value = wider(first.valueType, second.valueType)
        return T.MapType(first.keyType, value, first.valueContainsNull or second.valueContainsNull)
    return second if compare(first, second) == "widen" else first


def aligned(value: Column, source: T.DataType, target: T.DataType) -> Column:
    """Cast `value` to `target`, matching struct fields by name (Spark's struct cast is positional)."""
    if source == target:
        return value
    if isinstance(source, T.StructType) and isinstance(target, T.StructType):
        by_lower = {f.name.lower(): f for f in source.fields}
        parts = []
        for fld in target.fields:
            src = by_lower.get(fld.name.lower())
            part = aligned(value.getField(src.name), src.dataType, fld.dataType) if src else F.lit(None)
            parts.append(part.cast(fld.dataType).alias(fld.name))
        return F.when(value.isNull(), F.lit(None).cast(target)).otherwise(F.struct(*parts))
    if isinstance(source, T.ArrayType) and isinstance(target, T.ArrayType):
        return F.transform(value, lambda x: aligned(x, source.elementType, target.elementType))
    if isinstance(source, T.MapType) and isinstance(target, T.MapType):
        keys_cast = value.cast(T.MapType(target.keyType, source.valueType, source.valueContainsNull))
        return F.transform_values(keys_cast, lambda _, v: aligned(v, source.valueType, target.valueType))
    return value.cast(target)
