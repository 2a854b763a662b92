"""The stage's customer-managed key: one the stack creates, or yours."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from infra.settings_base import SettingsModel

KEY_ARN = r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/([0-9a-f-]{36}|mrk-[0-9a-f]{32})$"


class EncryptionSettings(SettingsModel):
    """The customer-managed KMS key that encrypts the stage: its buckets, DynamoDB tables, queues, topic,
    log groups, Lambda environments, Glue security configuration, EMR logs and Athena results."""

    customer_managed_key: bool | str = Field(
        default=True,
        description="true (default): a key the stack creates (rotation on); or the ARN of your key "
        "(the stack outputs the key-policy statements the services need: docs/deploy.md#your-own-key)",
    )

    @field_validator("customer_managed_key")
    @classmethod
    def _key(cls, value: bool | str) -> bool | str:
        if value is False:
            raise ValueError(
                "customer_managed_key: false is not offered: every bucket, table, queue, topic and log group "
                "of the stage is encrypted with a customer-managed key (true, or your key's ARN)"
            )
        if isinstance(value, str) and not re.match(KEY_ARN, value):
            raise ValueError(
                f"customer_managed_key: {value!r} is not a KMS key ARN "
                "(arn:aws:kms:<region>:<account>:key/<id>)"
            )
        return value

    @property
    def key_arn(self) -> str | None:
        """Your key's ARN, or None when the stack creates the key."""
        return self.customer_managed_key if isinstance(self.customer_managed_key, str) else None
