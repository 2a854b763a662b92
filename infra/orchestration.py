"""Orchestration: the maintenance state machine (Glue maintain job, `.sync`; failure -> SNS).

Input: ``{"table_id": "<id>"}`` to maintain one table; ``{}`` or ``{"table_id": ""}`` for
every enabled table. The execution name is passed to the job as its correlation id.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_glue as glue
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from infra.nag import acknowledge_wildcards
from infra.settings_names import Retention, StageNames
from infra.storage import stage_log_group
from lakeloader.control.contract import ARG_CORRELATION_ID, ARG_TABLE_ID, glue_arg


class MaintenanceWorkflow(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        names: StageNames,
        retention: Retention,
        maintain_timeout_minutes: int,
        maintain_job: glue.IJob,
        topic: sns.ITopic,
        key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        job_timeout = Duration.minutes(maintain_timeout_minutes + 15)
        definition = self._definition(names.stage, maintain_job, topic, job_timeout)

        name = names.resource_name("maintenance")
        self.log_group = stage_log_group(
            self, "Logs", retention=retention, name=f"/aws/vendedlogs/states/{name}", key=key
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=name,
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            timeout=Duration.minutes(maintain_timeout_minutes + 20),
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=True
            ),
        )
        # SnsPublish grants sns:Publish only; the topic is encrypted with the stage's key.
        key.grant(self.state_machine, "kms:Decrypt", "kms:GenerateDataKey")
        acknowledge_wildcards(
            self.state_machine,
            ["Resource::*"],
            reason=(
                "X-Ray tracing and CloudWatch Logs delivery (CreateLogDelivery and friends) take no "
                "resource-level permissions; CDK grants them on '*' as AWS documents."
            ),
        )

    def _definition(
        self, stage_name: str, maintain_job: glue.IJob, topic: sns.ITopic, job_timeout: Duration
    ) -> sfn.IChainable:
        """Defaults, the caller's input, the maintenance run; a failure notifies the topic and fails."""
        defaults = sfn.Pass(
            self, "Defaults", result=sfn.Result.from_object({"table_id": ""}), result_path="$.defaults"
        )
        apply_input = sfn.Pass(
            self,
            "ApplyInput",
            parameters={"args.$": "States.JsonMerge($.defaults, $$.Execution.Input, false)"},
            output_path="$.args",
        )
        run = tasks.GlueStartJobRun(
            self,
            "RunMaintenance",
            glue_job_name=maintain_job.job_name,
            integration_pattern=sfn.IntegrationPattern.RUN_JOB,
            arguments=sfn.TaskInput.from_object(
                {
                    glue_arg(ARG_TABLE_ID): sfn.JsonPath.string_at("$.table_id"),
                    glue_arg(ARG_CORRELATION_ID): sfn.JsonPath.string_at("$$.Execution.Name"),
                }
            ),
            result_path="$.run",
            task_timeout=sfn.Timeout.duration(job_timeout),
        )
        notify = tasks.SnsPublish(
            self,
            "NotifyFailure",
            topic=topic,
            subject=f"lakeloader {stage_name}: maintenance failed",
            message=sfn.TaskInput.from_object(
                {
                    "stage": stage_name,
                    "execution": sfn.JsonPath.string_at("$$.Execution.Id"),
                    "table_id": sfn.JsonPath.string_at("$.table_id"),
                    "error": sfn.JsonPath.string_at("$.error.Error"),
                    "cause": sfn.JsonPath.string_at("$.error.Cause"),
                }
            ),
            result_path=sfn.JsonPath.DISCARD,
        )
        failed = sfn.Fail(
            self, "MaintenanceFailed", error="MaintenanceFailed", cause="The Glue maintenance job run failed"
        )
        run.add_catch(notify.next(failed), errors=["States.ALL"], result_path="$.error")
        return defaults.next(apply_input).next(run).next(sfn.Succeed(self, "Done"))
