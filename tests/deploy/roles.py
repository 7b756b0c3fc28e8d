"""The roles every deployed resource plays, by SAM logical id and by Terraform address, and the parameters
(SAM) / variables (Terraform) the two deployments share. A description (tests/deploy/describe.py) names a
resource by its role: "{wake.url}" is the wake-up queue's URL on either side."""

from __future__ import annotations

import re
from typing import Any


class Unsupported(Exception):
    """A construct the description reader does not know (extend the reader, do not ignore it)."""


SAM_ROLES = {
    "ActorTable": "table", "ValueBucket": "values", "ValueBucketPolicy": "values_policy",
    "WakeQueue": "wake", "TimerQueue": "timers", "WakeDeadLetterQueue": "wake_dlq",
    "TimerDeadLetterQueue": "timers_dlq", "WorkerFunction": "worker", "ApiFunction": "api",
    "WorkerRole": "worker_role", "ApiRole": "api_role", "WorkerLogGroup": "worker_logs", "ApiLogGroup": "api_logs",
    "ApiAccessLogGroup": "api_access_logs", "HttpApi": "http_api", "ApiIntegration": "api_integration",
    "JwtAuthorizer": "jwt_authorizer", "DefaultRoute": "default_route", "ApiStage": "stage",
    "CallbackRoute": "callback_route", "CallbackStatusRoute": "callback_status_route",
    "CallbackWebhookRoute": "callback_webhook_route", "CallbackApprovalPageRoute": "callback_approval_page_route",
    "CallbackApprovalRoute": "callback_approval_route",
    "ApiInvokePermission": "api_permission",
    "RealtimeApi": "realtime_api", "RealtimeIntegration": "realtime_integration",
    "RealtimeConnectRoute": "realtime_connect_route", "RealtimeDisconnectRoute": "realtime_disconnect_route",
    "RealtimeDefaultRoute": "realtime_default_route", "RealtimeStage": "realtime_stage",
    "RealtimeInvokePermission": "realtime_permission",
    "RealtimeAuthorizer": "realtime_authorizer", "AuthorizerInvokePermission": "authorizer_permission",
    "AuthorizerFunction": "authorizer", "AuthorizerRole": "authorizer_role", "AuthorizerLogGroup": "authorizer_logs",
    "WakeDeadLetterAlarm": "wake_dlq_alarm", "TimerDeadLetterAlarm": "timers_dlq_alarm",
    "WorkerErrorsAlarm": "worker_errors_alarm",
    # SAM's AutoPublishAlias: the alias `live` the event sources and the API invoke (SnapStart)
    "WorkerFunctionAliaslive": "worker_alias", "ApiFunctionAliaslive": "api_alias",
    "AuthorizerFunctionAliaslive": "authorizer_alias",
}
TF_ROLES = {
    "aws_dynamodb_table.actors": "table", "aws_s3_bucket.values": "values",
    "aws_sqs_queue.wake": "wake", "aws_sqs_queue.timers": "timers",
    "aws_sqs_queue.wake_dlq": "wake_dlq", "aws_sqs_queue.timers_dlq": "timers_dlq",
    "aws_lambda_function.worker": "worker", "aws_lambda_function.api": "api", "aws_iam_role.worker": "worker_role",
    "aws_iam_role.api": "api_role", "aws_cloudwatch_log_group.worker": "worker_logs",
    "aws_cloudwatch_log_group.api": "api_logs", "aws_cloudwatch_log_group.api_access": "api_access_logs",
    "aws_lambda_layer_version.dependencies": "layer", "aws_apigatewayv2_api.http": "http_api",
    "aws_apigatewayv2_integration.api": "api_integration", "aws_apigatewayv2_authorizer.jwt": "jwt_authorizer",
    "aws_apigatewayv2_route.default": "default_route", "aws_apigatewayv2_stage.default": "stage",
    "aws_apigatewayv2_route.callback": "callback_route",
    "aws_apigatewayv2_route.callback_status": "callback_status_route",
    "aws_apigatewayv2_route.callback_webhook": "callback_webhook_route",
    "aws_apigatewayv2_route.callback_approval_page": "callback_approval_page_route",
    "aws_apigatewayv2_route.callback_approval": "callback_approval_route",
    "aws_lambda_permission.http": "api_permission",
    "aws_apigatewayv2_api.realtime": "realtime_api", "aws_apigatewayv2_integration.realtime": "realtime_integration",
    "aws_apigatewayv2_route.realtime_connect": "realtime_connect_route",
    "aws_apigatewayv2_route.realtime_disconnect": "realtime_disconnect_route",
    "aws_apigatewayv2_route.realtime_default": "realtime_default_route",
    "aws_apigatewayv2_stage.realtime": "realtime_stage", "aws_lambda_permission.realtime": "realtime_permission",
    "aws_apigatewayv2_authorizer.realtime": "realtime_authorizer",
    "aws_lambda_permission.authorizer": "authorizer_permission",
    "aws_lambda_function.authorizer": "authorizer", "aws_iam_role.authorizer": "authorizer_role",
    "aws_cloudwatch_log_group.authorizer": "authorizer_logs",
    "aws_cloudwatch_metric_alarm.wake_dlq": "wake_dlq_alarm",
    "aws_cloudwatch_metric_alarm.timers_dlq": "timers_dlq_alarm",
    "aws_cloudwatch_metric_alarm.worker_errors": "worker_errors_alarm",
    "aws_lambda_alias.worker": "worker_alias", "aws_lambda_alias.api": "api_alias",
    "aws_lambda_alias.authorizer": "authorizer_alias",
}
# SAM parameter -> Terraform variable (both shown as "{param.<variable>}")
PARAMETERS = {
    "Stage": "stage", "App": "app", "InspectorTokenParameter": "inspector_token_parameter",
    "MaxReceives": "max_receives", "TableDeletionProtection": "table_deletion_protection",
    "LogRetentionDays": "log_retention_days", "AuthMode": "auth_mode", "JwtIssuer": "jwt_issuer",
    "JwtAudience": "jwt_audience", "ThrottlingRateLimit": "throttling_rate_limit",
    "ThrottlingBurstLimit": "throttling_burst_limit", "ApiReservedConcurrency": "api_reserved_concurrency",
    "WorkerReservedConcurrency": "worker_reserved_concurrency", "WorkerMaxConcurrency": "worker_max_concurrency",
    "DataNamePrefix": "data_name_prefix", "AlarmTopicArn": "alarm_topic_arn", "SnapStart": "snap_start",
    "ValueBucketName": "value_bucket_name",
    "PublicUrl": "public_url", "AdotLayerArn": "adot_layer_arn",
}
_TOKEN = re.compile(r"\{param\.(\w+)\}")


def token_values(value: Any, values: dict[str, Any]) -> Any:
    """A value in which a whole "{param.x}" token is replaced by x's value in the scenario."""
    if isinstance(value, str):
        match = _TOKEN.fullmatch(value)
        if match and match.group(1) in values:
            return values[match.group(1)]
    return value
