"""The roles outside the stack a stage gives access: readers (query the tables) and writers (land raw
files), and the checks across a stage's list of them."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from infra.settings_base import SettingsModel
from lakeloader.config.format_versions import DEFAULT_ENGINES

ROLE_ARN = r"^arn:aws[a-z-]*:iam::\d{12}:role/(?:[\w+=,.@-]+/)*[\w+=,.@-]{1,64}$"


class ReaderSettings(SettingsModel):
    """A role that may query the stage's tables (SELECT only), through Athena or any Iceberg reader."""

    role_arn: str = Field(
        pattern=ROLE_ARN,
        description="The reader's IAM role, in the stage's account (the stack attaches a policy to it)",
    )
    tables: list[str] = Field(
        default_factory=lambda: ["*"],
        min_length=1,
        description='Target tables it may read, as "<database>.<table>" of the config; "<database>.*" or '
        '"*" for many (default "*": every table of the config; never the tombstones\' side tables)',
    )
    exclude_columns: dict[str, list[str]] = Field(
        default_factory=dict,
        description='Columns hidden from it, per "<database>.<table>": Lake Formation mode only (an IAM '
        "grant on a data file cannot hide a column of it)",
    )
    engines: list[str] = Field(
        default_factory=lambda: list(DEFAULT_ENGINES),
        min_length=1,
        description='What it queries with (default ["athena"]: it gets an Athena workgroup; without '
        '"athena", none): a table with target.format_version 3 is refused to a reader whose engines '
        'include athena, which reads format 2 only; say e.g. ["spark"] for one that reads through '
        "Spark, EMR or Glue (docs/format-versions.md)",
    )

    @property
    def role_name(self) -> str:
        return self.role_arn.rsplit("/", 1)[1]

    @property
    def query_name(self) -> str:
        """The role name in the characters an Athena workgroup name allows ([a-zA-Z0-9._-]; IAM also
        allows +=,@ in a role name): it names the reader's workgroup and its results prefix."""
        return re.sub(r"[^A-Za-z0-9._-]", "_", self.role_name)


class WriterSettings(SettingsModel):
    """A role that lands files in the raw bucket: a DMS endpoint's service-access role or an S3 sink
    connector's role (docs/sources.md). It may write under its prefixes and nothing else."""

    role_arn: str = Field(
        pattern=ROLE_ARN,
        description="The writer's IAM role, in the stage's account (the stack attaches a policy to it)",
    )
    prefixes: list[str] = Field(
        min_length=1,
        description='Raw-bucket key prefixes it writes under, each ending in "/" (a DMS endpoint\'s '
        "BucketFolder, a sink's topics.dir)",
    )

    kind: Literal["dms", "kafka_connect", "other"] = Field(
        default="other",
        description='What writes: "dms" (a DMS endpoint\'s S3 target: ListBucket of the whole bucket, as '
        'DMS\'s prerequisites grant it), "kafka_connect" (an S3 sink connector: it also lists and '
        'resumes its multipart uploads), "other" (default: write under the prefixes, list them)',
    )

    @field_validator("prefixes")
    @classmethod
    def _prefixes(cls, value: list[str]) -> list[str]:
        for prefix in value:
            if not re.match(r"^[A-Za-z0-9!_.*'()=-]+(/[A-Za-z0-9!_.*'()=-]+)*/$", prefix):
                raise ValueError(
                    f"{prefix!r} is not a raw-bucket folder: give a relative key prefix ending in '/', "
                    "e.g. crm/"
                )
        return value

    @property
    def role_name(self) -> str:
        return self.role_arn.rsplit("/", 1)[1]


def _named_twice(names: list[str]) -> str | None:
    """The first (sorted) of `names` given more than once, or None."""
    twice = sorted({name for name in names if names.count(name) > 1})
    return twice[0] if twice else None


def check_writers(writers: list[WriterSettings]) -> None:
    """Refuse a writer role given twice (one entry holds all its prefixes)."""
    twice = _named_twice([writer.role_name for writer in writers])
    if twice:
        raise ValueError(f"writers: role name {twice!r} appears twice (give one entry its prefixes)")


def check_readers(readers: list[ReaderSettings], *, lake_formation: bool) -> None:
    """Refuse two readers of one workgroup name, and hidden columns without Lake Formation."""
    twice = _named_twice([reader.role_name for reader in readers])
    if twice:
        raise ValueError(f"readers: role name {twice!r} appears twice (it names the reader's workgroup)")
    clash = _named_twice([reader.query_name for reader in readers])
    if clash:
        roles = [r.role_name for r in readers if r.query_name == clash]
        raise ValueError(
            f"readers: roles {' and '.join(repr(r) for r in roles)} would share the Athena workgroup "
            f"name suffix {clash!r} (a workgroup name has no +=,@)"
        )
    for index, reader in enumerate(readers):
        if reader.exclude_columns and not lake_formation:
            raise ValueError(
                f"readers[{index}].exclude_columns needs lake_formation: true (an IAM grant on a data "
                "file cannot hide a column of it)"
            )
