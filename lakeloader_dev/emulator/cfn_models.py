"""CloudFormation resource types moto 5.2.5 skips silently, registered so a real CDK stack deploys.

moto builds its CloudFormation type map from ``CloudFormationModel.__subclasses__()``;
defining subclasses here (and clearing moto's cached map, see ``patches.apply``) adds
them. Types that create something (Glue databases, jobs, crawlers and security
configurations, the EMR Serverless application) create it in moto's backend, so the
APIs see it; policy/alarm/invoke-config types are accepted and recorded only
(``ACCEPTED``) because moto enforces none of them — docs/local_loop.md lists them.
"""

from __future__ import annotations

import contextlib
from typing import Any

from moto.core.common_models import CloudFormationModel

# logical type -> [(physical id, properties)], for `python -m lakeloader_dev.local status` and the docs
ACCEPTED: dict[str, list[tuple[str, dict[str, Any]]]] = {}


def _glue(account_id: str, region_name: str):
    from moto.glue.models import glue_backends

    return glue_backends[account_id][region_name]


def _tags(raw: Any) -> dict[str, str]:
    if isinstance(raw, dict):
        return {str(k): str(v) for k, v in raw.items()}
    if isinstance(raw, list):
        return {t["Key"]: str(t["Value"]) for t in raw}
    return {}


class _Model(CloudFormationModel):
    """Common plumbing: the physical id is the resource's name; Ref returns it."""

    def __init__(self, physical_id: str, properties: dict[str, Any]) -> None:
        self.physical_id = physical_id
        self.properties = properties

    @property
    def physical_resource_id(self) -> str:
        return self.physical_id

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return True

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        return self.physical_id

    def is_created(self) -> bool:
        return True

    @classmethod
    def update_from_cloudformation_json(  # type: ignore[misc]
        cls,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> Any:
        cls.delete_from_cloudformation_json(
            original_resource.physical_id,
            {"Properties": original_resource.properties},
            account_id,
            region_name,
        )
        return cls.create_from_cloudformation_json(
            new_resource_name, cloudformation_json, account_id, region_name
        )

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        return None


class GlueDatabase(_Model):
    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::Glue::Database"

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> GlueDatabase:
        props = cloudformation_json["Properties"]
        database_input = dict(props.get("DatabaseInput") or {})
        name = database_input.get("Name") or resource_name.lower()
        database_input["Name"] = name
        backend = _glue(account_id, region_name)
        if name not in backend.databases:
            backend.create_database(name, database_input)
        return cls(name, props)

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        backend = _glue(account_id, region_name)
        backend.databases.pop(resource_name, None)


class GlueJob(_Model):
    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::Glue::Job"

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> GlueJob:
        props = cloudformation_json["Properties"]
        name = props.get("Name") or resource_name
        _glue(account_id, region_name).create_job(
            name=name,
            role=props.get("Role", ""),
            command=props.get("Command", {}),
            description=props.get("Description", ""),
            log_uri=props.get("LogUri", ""),
            execution_property=props.get("ExecutionProperty") or {"MaxConcurrentRuns": 1},
            default_arguments={k: str(v) for k, v in (props.get("DefaultArguments") or {}).items()},
            non_overridable_arguments=props.get("NonOverridableArguments") or {},
            connections=props.get("Connections") or {},
            max_retries=int(props.get("MaxRetries", 0)),
            allocated_capacity=props.get("AllocatedCapacity"),
            timeout=props.get("Timeout"),
            max_capacity=props.get("MaxCapacity"),
            security_configuration=props.get("SecurityConfiguration"),
            tags=_tags(props.get("Tags")),
            notification_property=props.get("NotificationProperty"),
            glue_version=props.get("GlueVersion"),
            number_of_workers=props.get("NumberOfWorkers"),
            worker_type=props.get("WorkerType"),
            code_gen_configuration_nodes=None,
            execution_class=props.get("ExecutionClass"),
            source_control_details=None,
        )
        return cls(name, props)

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        _glue(account_id, region_name).delete_job(resource_name)


class GlueCrawler(_Model):
    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::Glue::Crawler"

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> GlueCrawler:
        props = cloudformation_json["Properties"]
        name = props.get("Name") or resource_name
        schedule = props.get("Schedule") or {}
        _glue(account_id, region_name).create_crawler(
            name=name,
            role=props.get("Role", ""),
            database_name=props.get("DatabaseName", ""),
            description=props.get("Description", ""),
            targets=props.get("Targets") or {},
            schedule=schedule.get("ScheduleExpression", "") if isinstance(schedule, dict) else str(schedule),
            classifiers=props.get("Classifiers") or [],
            table_prefix=props.get("TablePrefix", ""),
            schema_change_policy=props.get("SchemaChangePolicy") or {},
            recrawl_policy=props.get("RecrawlPolicy") or {},
            lineage_configuration=props.get("LineageConfiguration") or {},
            configuration=props.get("Configuration", ""),
            crawler_security_configuration=props.get("CrawlerSecurityConfiguration", ""),
            tags=_tags(props.get("Tags")),
        )
        return cls(name, props)

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        _glue(account_id, region_name).crawlers.pop(resource_name, None)


class GlueSecurityConfiguration(_Model):
    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::Glue::SecurityConfiguration"

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> GlueSecurityConfiguration:
        props = cloudformation_json["Properties"]
        name = props.get("Name") or resource_name
        _glue(account_id, region_name).create_security_configuration(
            name, props.get("EncryptionConfiguration") or {}
        )
        return cls(name, props)

    @classmethod
    def delete_from_cloudformation_json(  # type: ignore[misc]
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        with contextlib.suppress(Exception):  # already gone
            _glue(account_id, region_name).delete_security_configuration(resource_name)


class EmrServerlessApplication(_Model):
    def __init__(self, physical_id: str, properties: dict[str, Any], arn: str) -> None:
        super().__init__(physical_id, properties)
        self.arn = arn

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::EMRServerless::Application"

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        return self.arn if attribute_name == "Arn" else self.physical_id

    @classmethod
    def create_from_cloudformation_json(  # type: ignore[misc]
        cls,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> EmrServerlessApplication:
        from moto.emrserverless.models import emrserverless_backends

        props = cloudformation_json["Properties"]
        app = emrserverless_backends[account_id][region_name].create_application(
            name=props.get("Name") or resource_name,
            release_label=props.get("ReleaseLabel", "emr-7.0.0"),
            application_type=props.get("Type", "SPARK"),
            client_token="cloudformation",
            initial_capacity=props.get("InitialCapacity"),
            maximum_capacity=props.get("MaximumCapacity"),
            tags=_tags(props.get("Tags")),
            auto_start_configuration=props.get("AutoStartConfiguration"),
            auto_stop_configuration=props.get("AutoStopConfiguration"),
            network_configuration=props.get("NetworkConfiguration"),
        )
        app.runtime_configuration = props.get("RuntimeConfiguration") or []  # spark-defaults of its runs
        return cls(app.id, props, app.arn)


def _accepted(cfn_type: str) -> type[_Model]:
    """A type that CloudFormation accepts and the emulator records, enforcing nothing."""

    class Accepted(_Model):
        @staticmethod
        def cloudformation_type() -> str:
            return cfn_type

        @classmethod
        def create_from_cloudformation_json(  # type: ignore[misc]
            cls,
            resource_name: str,
            cloudformation_json: dict[str, Any],
            account_id: str,
            region_name: str,
            **kwargs: Any,
        ) -> _Model:
            props = cloudformation_json.get("Properties") or {}
            ACCEPTED.setdefault(cfn_type, []).append((resource_name, props))
            return cls(resource_name, props)

    Accepted.__name__ = Accepted.__qualname__ = "Accepted" + cfn_type.replace("::", "")
    return Accepted


ACCEPTED_TYPES = (
    "AWS::S3::BucketPolicy",
    "AWS::SNS::TopicPolicy",
    "AWS::SQS::QueuePolicy",
    "AWS::CloudWatch::Alarm",
    "AWS::Lambda::EventInvokeConfig",
)
ACCEPTED_MODELS = [_accepted(t) for t in ACCEPTED_TYPES]
MODELS = [
    GlueDatabase,
    GlueJob,
    GlueCrawler,
    GlueSecurityConfiguration,
    EmrServerlessApplication,
    *ACCEPTED_MODELS,
]
