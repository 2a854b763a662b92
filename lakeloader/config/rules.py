"""`quality:` -- the data quality rules a batch is checked against before it is published."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from lakeloader.config.base import IDENTIFIER, _Strict


class BetweenRule(_Strict):
    """`column` lies in [min, max] (either bound may be left out). NULLs pass: add not_null for them."""

    column: str
    min: float | int | str | None = None
    max: float | int | str | None = None

    @model_validator(mode="after")
    def _a_bound(self) -> BetweenRule:
        if self.min is None and self.max is None:
            raise ValueError("between needs min, max or both")
        return self


class InSetRule(_Strict):
    """`column` is one of `values`. NULLs pass: add not_null for them."""

    column: str
    values: list[str | int | float | bool] = Field(min_length=1)


class RegexRule(_Strict):
    """`column` (as a string) matches the Java regular expression `pattern` (RLIKE: a match anywhere,
    anchor with ^...$). NULLs pass."""

    column: str
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"pattern {value!r} is not a regular expression: {exc}") from None
        return value


class QualityRule(_Strict):
    """One data quality rule; give exactly one of the rule kinds (and optionally a `name`)."""

    name: str | None = Field(default=None, description="Shown in the run summary and the quarantine table")
    not_null: list[str] | None = Field(default=None, description="These columns are never NULL")
    unique: bool | list[str] | None = Field(
        default=None,
        description="true: the key columns are unique over the whole table; or a list of columns",
    )
    between: BetweenRule | None = None
    in_set: InSetRule | None = None
    regex: RegexRule | None = None
    min_row_count: int | None = Field(
        default=None, ge=0, description="The whole table (after the batch) has at least this many rows"
    )
    expression: str | None = Field(
        default=None, description="A Spark SQL boolean expression every new row satisfies (NULL fails)"
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> QualityRule:
        given = [k for k in RULE_KINDS if getattr(self, k) not in (None, False)]
        if len(given) != 1:
            raise ValueError(f"a rule needs exactly one of {', '.join(RULE_KINDS)}; got {given or 'none'}")
        if self.not_null is not None and not self.not_null:
            raise ValueError("not_null needs at least one column")
        if isinstance(self.unique, list) and not self.unique:
            raise ValueError("unique needs at least one column (or true for the key columns)")
        if self.expression is not None and not self.expression.strip():
            raise ValueError("expression must not be empty")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in RULE_KINDS if getattr(self, k) not in (None, False))

    @property
    def label(self) -> str:
        """The rule's name, or one derived from its kind and columns, e.g. not_null(email)."""
        if self.name:
            return self.name
        kind = self.kind
        if kind == "not_null":
            return f"not_null({', '.join(self.not_null or [])})"
        if kind == "unique":
            return "unique(key)" if self.unique is True else f"unique({', '.join(self.unique or [])})"
        if kind in ("between", "in_set", "regex"):
            return f"{kind}({getattr(self, kind).column})"
        if kind == "min_row_count":
            return f"min_row_count({self.min_row_count})"
        return f"expression({self.expression})"


RULE_KINDS = ("not_null", "unique", "between", "in_set", "regex", "min_row_count", "expression")


class QualityConfig(_Strict):
    """Write-audit-publish: each batch is committed to an audit branch, checked, then published."""

    rules: list[QualityRule] = Field(default_factory=list)
    on_failure: Literal["quarantine", "fail"] = Field(
        default="quarantine",
        description="quarantine: failing rows go to the quarantine table, the rest is published; "
        "fail: nothing of the batch is published and the table's run fails",
    )
    quarantine_table: str | None = Field(
        default=None, description="Quarantine table name in the target database (default <table>__quarantine)"
    )

    @field_validator("quarantine_table")
    @classmethod
    def _quarantine_name(cls, value: str | None) -> str | None:
        if value is not None and not IDENTIFIER.match(value):
            raise ValueError(f"{value!r} is not a valid table name")
        return value
