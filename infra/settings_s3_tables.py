"""A stage's S3 Tables settings (tables with `target.storage: s3_tables`)."""

from __future__ import annotations

from pydantic import Field

from infra.settings_base import SettingsModel


class S3TablesSettings(SettingsModel):
    """The stage's S3 Tables table bucket (tables with `target.storage: s3_tables`).

    Unreferenced file removal is a table bucket setting in S3 Tables (UnreferencedFileRemoval of
    AWS::S3Tables::TableBucket): a file no snapshot references is marked noncurrent after
    `unreferenced_days` and deleted `noncurrent_days` later. Their sum is how long an erased row's
    files can outlive `lakeloader erase` (docs/deploy.md#amazon-s3-tables)."""

    unreferenced_days: int = Field(
        default=3, ge=1, description="Days before a file no snapshot references is marked noncurrent"
    )
    noncurrent_days: int = Field(default=10, ge=1, description="Days a noncurrent file is kept, then deleted")
