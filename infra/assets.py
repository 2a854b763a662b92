"""File assets whose S3 key keeps a compound suffix (`.tar.gz`, `.gluewheels.zip`)."""

from __future__ import annotations

from pathlib import PurePath

from aws_cdk import AssetStaging, Stack
from aws_cdk import aws_s3 as s3
from constructs import Construct


class SuffixedFileAsset(Construct):
    """A file asset whose S3 key ends in `suffix`: `.gluewheels.zip` (the suffix Glue needs for a zip
    of wheels) or `.tar.gz` (a packed venv; Spark unpacks an archive by its name's ending).

    `s3_assets.Asset` names the key `<hash><last extension>` (`.zip`, `.gz`); the synthesizer names it
    `<source hash><extension>`, so the rest of the suffix rides on the source hash.
    """

    def __init__(self, scope: Construct, construct_id: str, *, path: str, suffix: str) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        staging = AssetStaging(self, "Stage", source_path=path)
        file_name = staging.relative_staged_path(stack)
        extension = PurePath(file_name).suffix
        if not suffix.endswith(extension):
            raise ValueError(f"{path}: its asset key would end in {extension}, not {suffix}")
        location = stack.synthesizer.add_file_asset(
            file_name=file_name,
            packaging=staging.packaging,
            source_hash=f"{staging.asset_hash}{suffix.removesuffix(extension)}",
        )
        self.bucket = s3.Bucket.from_bucket_name(self, "AssetBucket", location.bucket_name)
        self.s3_object_key = location.object_key
        self.s3_object_url = location.s3_object_url
