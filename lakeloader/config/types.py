"""Spark SQL's data type grammar, checked without Spark: a declared type (`source.schema`) that the
stage's runtime would refuse fails the config (`lakeloader tables`, every run, `cdk synth`) with one
line naming the table and field, instead of a ParseException in the middle of a run.

It follows `dataType` of Spark's SqlBaseParser.g4 and the checks Spark's AstBuilder makes on what
it parsed (decimal precision, char/varchar lengths, interval fields), per runtime: Spark 4 adds
`variant`, `string collate NAME`, `time(p)` and `geometry(SRID)`/`geography(SRID)` (whether Spark knows
the SRID is left to Spark). tests/spark/test_declared_types.py holds this module's verdicts
against the session's own SQL parser (`parseDataType`). Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lakeloader.control.runtimes import Runtime

MAX_DECIMAL_PRECISION = 38
# Spark's keywords for the primitive types, and the spelling their error message teaches.
SIMPLE = {
    "boolean": "boolean",
    "tinyint": "tinyint",
    "byte": "tinyint",
    "smallint": "smallint",
    "short": "smallint",
    "int": "int",
    "integer": "int",
    "bigint": "bigint",
    "long": "bigint",
    "float": "float",
    "real": "float",
    "double": "double",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
    "timestamp_ltz": "timestamp",
    "string": "string",
    "binary": "binary",
    "void": "void",
}
DECIMAL = ("decimal", "dec", "numeric")
CHARS = ("char", "character", "varchar")
SPARK4_SIMPLE = ("variant",)
YEAR_MONTH = ("year", "month")
DAY_TIME = ("day", "hour", "minute", "second")
# Spark 4's collations (optionally as system.builtin.NAME): UTF8_BINARY and UTF8_LCASE (with _RTRIM),
# and ICU's UNICODE or a locale (en, en_USA, sr_Cyrl_SRB: ISO 639 language, script, 3-letter country)
# with case, accent and trailing-space specifiers (_CI, _AI, _RTRIM, ...).
COLLATION = re.compile(
    r"^(?:system\.builtin\.)?(?:UTF8_(?:BINARY|LCASE)(?:_RTRIM)?"
    r"|(?:UNICODE|[A-Z]{2,3}(?:_[A-Z]{4})?(?:_[A-Z]{3})?)(?:_(?:CS|CI|AS|AI|RTRIM))*)$",
    re.IGNORECASE,
)
MAX_TIME_PRECISION = 6
TOKEN = re.compile(
    r"\s*(?:(?P<quoted>`(?:[^`]|``)*`)|(?P<word>[A-Za-z0-9_]+)|(?P<text>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<sym><>|[<>,:().]))"
)


class TypeSyntaxError(ValueError):
    """A type the runtime's Spark would not parse."""


def valid_forms(runtime: Runtime) -> str:
    """The forms a declared type takes on `runtime`, for error messages."""
    extra = ", time(p), variant, string collate UTF8_LCASE" if _spark4(runtime) else ""
    return (
        "boolean, tinyint, smallint, int, bigint, float, double, decimal(p,s) (p <= 38), string, "
        f"char(n), varchar(n), binary, date, timestamp, timestamp_ntz{extra}, "
        "array<T>, map<K,V>, struct<name:T,...> (Spark SQL, " + f"{runtime.name}: Spark {runtime.spark})"
    )


def check_type(text: str, runtime: Runtime) -> None:
    """Raise TypeSyntaxError (saying where and why) unless `text` is one Spark SQL data type on `runtime`."""
    parser = _Parser(text, runtime)
    parser.data_type()
    if parser.peek() is not None:
        raise parser.error(f"unexpected {parser.peek().text!r} after a complete type")


def _spark4(runtime: Runtime) -> bool:
    return int(runtime.spark.split(".")[0]) >= 4


@dataclass(frozen=True)
class _Token:
    kind: str  # word, quoted, text, sym
    text: str


def _tokens(text: str) -> list[_Token]:
    tokens, position = [], 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        found = TOKEN.match(text, position)
        if found is None:
            raise TypeSyntaxError(f"unexpected character {text[position:].lstrip()[0]!r}")
        kind = found.lastgroup or "sym"
        tokens.append(_Token(kind, found.group(kind)))
        position = found.end()
    return tokens


class _Parser:
    def __init__(self, text: str, runtime: Runtime) -> None:
        self.tokens, self.at, self.runtime = _tokens(text), 0, runtime

    def error(self, why: str) -> TypeSyntaxError:
        return TypeSyntaxError(why)

    def spark4(self, what: str) -> None:
        if not _spark4(self.runtime):
            raise self.error(f"{what} needs Spark 4; {self.runtime.name} runs Spark {self.runtime.spark}")

    def collation(self) -> None:
        """A collation name, bare or qualified as Spark 4 qualifies its built-in ones."""
        parts = []
        while True:
            token = self.peek()
            if token is None or token.kind not in ("word", "quoted"):
                raise self.error("expected a collation name after collate, e.g. UTF8_LCASE")
            self.at += 1
            parts.append(token.text.strip("`"))
            if not self.take("."):
                break
        name = ".".join(parts)
        if not COLLATION.match(name):
            raise self.error(
                f"{name!r} is not a collation (UTF8_BINARY, UTF8_LCASE, UNICODE_CI, en_USA, ...)"
            )

    def peek(self) -> _Token | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def word(self) -> str | None:
        token = self.peek()
        return token.text.lower() if token is not None and token.kind == "word" else None

    def take(self, symbol: str) -> bool:
        token = self.peek()
        if token is not None and token.kind in ("sym", "word") and token.text.lower() == symbol:
            self.at += 1
            return True
        return False

    def expect(self, symbol: str, after: str) -> None:
        if not self.take(symbol):
            token = self.peek()
            got = "the end" if token is None else repr(token.text)
            raise self.error(f"expected {symbol!r} after {after}, found {got}")

    def integer(self, what: str) -> int:
        token = self.peek()
        if token is None or token.kind != "word" or not token.text.isdigit():
            raise self.error(f"{what} must be a whole number")
        self.at += 1
        return int(token.text)

    def data_type(self) -> None:
        name = self.word()
        if name is None:
            token = self.peek()
            raise self.error("expected a type" + ("" if token is None else f", found {token.text!r}"))
        self.at += 1
        if name == "array":
            self.expect("<", "array")
            self.data_type()
            self.expect(">", "array<T")
        elif name == "map":
            self.expect("<", "map")
            self.data_type()
            self.expect(",", "map<K")
            self.data_type()
            self.expect(">", "map<K,V")
        elif name == "struct":
            self.struct_fields()
        elif name == "interval":
            self.interval()
        elif name in DECIMAL:
            self.decimal()
        elif name in CHARS:
            self.expect("(", f"{name} (it needs a length: {name}(n))")
            self.integer(f"{name}'s length")
            self.expect(")", f"{name}(n")
        elif name == "string" and self.word() == "collate":
            self.spark4("string collate")
            self.at += 1
            self.collation()
        elif name in ("time", "timestamp") and self.word() == "without" or name == "time":
            self.spark4(name)
            if name == "time" and self.take("("):
                if self.integer("time's precision") > MAX_TIME_PRECISION:
                    raise self.error(f"time's precision is 0..{MAX_TIME_PRECISION}")
                self.expect(")", "time(p")
            if self.take("without"):
                self.expect("time", "without")
                self.expect("zone", "without time")
        elif name in ("geometry", "geography"):
            self.spark4(name)
            self.expect("(", f"{name} (it needs an SRID: {name}(4326) or {name}(ANY))")
            if not self.take("any"):
                self.integer(f"{name}'s SRID")
            self.expect(")", f"{name}(srid")
        elif name in SIMPLE or name in SPARK4_SIMPLE:
            if name in SPARK4_SIMPLE:
                self.spark4(name)
            if self.peek() is not None and self.peek().text == "(":
                raise self.error(f"{name} takes no parameters")
        else:
            raise self.error(f"{name!r} is not a Spark SQL type")

    def decimal(self) -> None:
        if not self.take("("):
            return
        precision = self.integer("decimal's precision")
        scale = 0
        if self.take(","):
            scale = self.integer("decimal's scale")
        self.expect(")", "decimal(p,s")
        if precision > MAX_DECIMAL_PRECISION:
            raise self.error(f"decimal precision {precision} is above {MAX_DECIMAL_PRECISION}")
        if scale > precision:
            raise self.error(f"decimal scale {scale} is larger than its precision {precision}")

    def interval(self) -> None:
        start = self.word()
        if start is None:  # the calendar interval
            return
        if start not in YEAR_MONTH + DAY_TIME:
            raise self.error("an interval's fields: interval year to month, interval day to second, ...")
        self.at += 1
        units = YEAR_MONTH if start in YEAR_MONTH else DAY_TIME
        if self.take("to"):
            end = self.word()
            if end not in units or units.index(end) <= units.index(start):
                raise self.error(
                    f"interval {start} to {end or '?'} is not an interval; "
                    "use interval year to month or interval day to second"
                )
            self.at += 1

    def struct_fields(self) -> None:
        if self.take("<>"):
            return
        self.expect("<", "struct")
        if self.take(">"):
            return
        while True:
            token = self.peek()
            if token is None or token.kind not in ("word", "quoted"):
                raise self.error("expected a field name in struct<name:T,...>")
            self.at += 1
            self.take(":")
            self.data_type()
            if self.take("not"):
                self.expect("null", "not")
            if self.take("comment"):
                token = self.peek()
                if token is None or token.kind != "text":
                    raise self.error("expected a quoted comment after comment")
                self.at += 1
            if self.take(">"):
                return
            self.expect(",", "a struct field")
