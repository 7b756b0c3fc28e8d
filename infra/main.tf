# Dormant on AWS: the same resources as ../template.yaml (tests/deploy/test_parity.py checks that they agree).
# One DynamoDB table (the event store), an S3 bucket for stored values too large for its items (values.tf), a FIFO
# queue for wake-ups and a standard queue for timers, each with a dead-letter queue, a worker function fed by both
# queues and an API function behind an HTTP API (api.tf), with alarms (alarms.tf) and least-privilege roles (iam.tf).

locals {
  prefix      = "${var.name}-${var.stage}"
  data_prefix = var.data_name_prefix != "" ? var.data_name_prefix : local.prefix
  code_zip    = var.code_zip != null ? var.code_zip : "${path.module}/.build/code.zip"
  layer_zip   = var.layer_zip != null ? var.layer_zip : "${path.module}/.build/layer.zip"
  tags        = merge(var.tags, { "dormant:stage" = var.stage })

  runtime      = "python3.13"
  architecture = "arm64"

  worker_timeout = 60
  api_timeout    = 30
  # Lambda's SQS event source needs the visibility timeout >= 6 x the function timeout (+ the batching window).
  wake_visibility_timeout  = 6 * local.worker_timeout
  timer_batching_window    = 1
  timer_visibility_timeout = 6 * local.worker_timeout + local.timer_batching_window
  retention_seconds        = 1209600 # 14 days

  # dormant.settings.Settings reads these (DORMANT_*).
  environment = {
    DORMANT_APP              = var.app
    DORMANT_TABLE            = aws_dynamodb_table.actors.name
    DORMANT_BUCKET           = aws_s3_bucket.values.bucket
    DORMANT_QUEUE_NAME       = aws_sqs_queue.wake.name
    DORMANT_QUEUE_URL        = aws_sqs_queue.wake.url
    DORMANT_TIMER_QUEUE_NAME = aws_sqs_queue.timers.name
    DORMANT_TIMER_QUEUE_URL  = aws_sqs_queue.timers.url
    DORMANT_DLQ_NAME         = aws_sqs_queue.timers_dlq.name
    DORMANT_DLQ_URL          = aws_sqs_queue.timers_dlq.url
    DORMANT_FIFO_DLQ_NAME    = aws_sqs_queue.wake_dlq.name
    DORMANT_FIFO_DLQ_URL     = aws_sqs_queue.wake_dlq.url
    DORMANT_MAX_RECEIVES     = tostring(var.max_receives)
    # the base of callback URLs (cb.url): var.public_url, or the HTTP API's own URL
    DORMANT_PUBLIC_URL = var.public_url != "" ? var.public_url : "https://${aws_apigatewayv2_api.http.id}.execute-api.${data.aws_region.current.name}.${data.aws_partition.current.dns_suffix}"
    # the WebSocket API's connection management (docs/realtime.md): the worker pushes committed events there
    DORMANT_REALTIME_URL = "https://${aws_apigatewayv2_api.realtime.id}.execute-api.${data.aws_region.current.name}.${data.aws_partition.current.dns_suffix}/${var.stage}"
  }
  # var.adot_layer_arn set: the ADOT layer's wrapper installs its SDK, which dormant.runtime.tracing then uses
  tracing_environment = var.adot_layer_arn != "" ? { AWS_LAMBDA_EXEC_WRAPPER = "/opt/otel-instrument" } : {}
  layers              = var.adot_layer_arn != "" ? [aws_lambda_layer_version.dependencies.arn, var.adot_layer_arn] : [aws_lambda_layer_version.dependencies.arn]
  tracing_mode        = var.adot_layer_arn != "" ? "Active" : "PassThrough"
}

# -- storage: one table, single-item conditional commits. Key schema, the `pending` local and `status` global secondary
# indexes and the TTL attribute are those of dormant.dynamodb.table.table_definition / TTL_ATTRIBUTE. The data outlives the module:
# prevent_destroy refuses any plan that would delete or replace the table or a queue (a dev stack drops a
# `*_override.tf` that sets it to false: ../docs/deploy.md), deletion protection and point-in-time recovery are
# on by default. Encrypted at rest with the AWS-owned key (DynamoDB's default).
resource "aws_dynamodb_table" "actors" {
  #checkov:skip=CKV_AWS_119:Encrypted at rest with the AWS-owned key; a customer-managed key is optional (docs/deploy.md)
  name                        = "${local.data_prefix}-actors"
  billing_mode                = "PAY_PER_REQUEST"
  hash_key                    = "pk"
  range_key                   = "sk"
  deletion_protection_enabled = var.table_deletion_protection

  attribute {
    name = "pk"
    type = "S"
  }

  attribute {
    name = "sk"
    type = "S"
  }

  attribute {
    name = "pq"
    type = "S"
  }

  attribute {
    name = "lt"
    type = "S"
  }

  attribute {
    name = "ls"
    type = "S"
  }

  attribute {
    name = "xk"
    type = "S"
  }

  attribute {
    name = "xv"
    type = "S"
  }

  local_secondary_index {
    name            = "pending"
    range_key       = "pq"
    projection_type = "ALL"
  }

  # operators list actors by type and status (status items only; written when an actor's status changes)
  global_secondary_index {
    name            = "status"
    hash_key        = "lt"
    range_key       = "ls"
    projection_type = "ALL"
  }

  # operators find actors by their search attributes (one item per attribute set; ../docs/storage.md)
  global_secondary_index {
    name            = "search"
    hash_key        = "xk"
    range_key       = "xv"
    projection_type = "ALL"
  }

  ttl {
    attribute_name = "expires_at"
    enabled        = true
  }

  point_in_time_recovery {
    enabled = true
  }

  tags = local.tags

  lifecycle {
    prevent_destroy = true
  }
}

# -- wake-ups: a FIFO queue (MessageGroupId = actor) and a standard queue for delayed wake-ups (timers, retries,
# scheduled actions), encrypted at rest (SSE-SQS). A FIFO queue's dead-letter queue must be FIFO too, hence two.
resource "aws_sqs_queue" "wake_dlq" {
  name                      = "${local.data_prefix}-dlq.fifo"
  fifo_queue                = true
  message_retention_seconds = local.retention_seconds
  sqs_managed_sse_enabled   = true
  tags                      = local.tags

  lifecycle {
    prevent_destroy = true
  }
}

resource "aws_sqs_queue" "timers_dlq" {
  name                      = "${local.data_prefix}-dlq"
  message_retention_seconds = local.retention_seconds
  sqs_managed_sse_enabled   = true
  tags                      = local.tags

  lifecycle {
    prevent_destroy = true
  }
}

resource "aws_sqs_queue" "wake" {
  name                        = "${local.data_prefix}-messages.fifo"
  fifo_queue                  = true
  content_based_deduplication = false
  deduplication_scope         = "messageGroup"
  fifo_throughput_limit       = "perMessageGroupId"
  visibility_timeout_seconds  = local.wake_visibility_timeout
  message_retention_seconds   = local.retention_seconds
  sqs_managed_sse_enabled     = true
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.wake_dlq.arn
    maxReceiveCount     = var.max_receives
  })
  tags = local.tags

  lifecycle {
    prevent_destroy = true
  }
}

resource "aws_sqs_queue" "timers" {
  name                       = "${local.data_prefix}-timers"
  visibility_timeout_seconds = local.timer_visibility_timeout
  message_retention_seconds  = local.retention_seconds
  sqs_managed_sse_enabled    = true
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.timers_dlq.arn
    maxReceiveCount     = var.max_receives
  })
  tags = local.tags

  lifecycle {
    prevent_destroy = true
  }
}

# -- code: the functions hold only our Python (`make infra-zips` zips lib/dormant, functions/ and the registry's
# package, as `sam build` bundles them); third-party packages are in a layer (`make lambda-layer`).
resource "aws_lambda_layer_version" "dependencies" {
  layer_name               = "${local.prefix}-dependencies"
  filename                 = local.layer_zip
  source_code_hash         = filebase64sha256(local.layer_zip)
  compatible_runtimes      = [local.runtime]
  compatible_architectures = [local.architecture]
}

resource "aws_cloudwatch_log_group" "worker" {
  #checkov:skip=CKV_AWS_158:CloudWatch Logs encrypts at rest by default; reading them is an operator's right (the access log's paths hold callback tokens)
  #checkov:skip=CKV_AWS_338:Retention is a variable (log_retention_days, default 30 days, as template.yaml)
  name              = "/aws/lambda/${local.prefix}-worker"
  retention_in_days = var.log_retention_days
  tags              = local.tags
}

resource "aws_cloudwatch_log_group" "api" {
  #checkov:skip=CKV_AWS_158:CloudWatch Logs encrypts at rest by default; reading them is an operator's right (the access log's paths hold callback tokens)
  #checkov:skip=CKV_AWS_338:Retention is a variable (log_retention_days, default 30 days, as template.yaml)
  name              = "/aws/lambda/${local.prefix}-api"
  retention_in_days = var.log_retention_days
  tags              = local.tags
}

# Neither function is invoked asynchronously (SQS batches and API Gateway call them synchronously), so a
# function-level dead-letter queue would never receive anything: failed wake-ups go to the queues' DLQs.
resource "aws_lambda_function" "worker" {
  #checkov:skip=CKV_AWS_116:Invoked synchronously only (SQS event source, API Gateway); failed wake-ups go to the queues DLQs
  #checkov:skip=CKV_AWS_117:Reaches only public endpoints (DynamoDB, SQS, S3, SSM, and the JWT issuer's keys for the $connect authorizer); a VPC would add NAT or endpoint costs
  #checkov:skip=CKV_AWS_173:The environment holds resource names only (no secrets), encrypted at rest with the AWS-managed key
  #checkov:skip=CKV_AWS_272:Code signing needs a signing profile; the bundle is built locally by make
  #checkov:skip=CKV_AWS_50:X-Ray tracing costs per trace: off unless adot_layer_arn is set; logs and metrics cover each wake-up
  function_name                  = "${local.prefix}-worker"
  description                    = "SQS batch of wake-ups -> one wake-up per actor -> partial batch failures"
  role                           = aws_iam_role.worker.arn
  handler                        = "functions.worker.handler.handler"
  runtime                        = local.runtime
  architectures                  = [local.architecture]
  memory_size                    = 512
  timeout                        = local.worker_timeout
  reserved_concurrent_executions = var.worker_reserved_concurrency
  filename                       = local.code_zip
  source_code_hash               = filebase64sha256(local.code_zip)
  layers                         = local.layers
  publish                        = true # a version per change, behind the alias "live" (SnapStart snapshots it)

  snap_start {
    apply_on = var.snap_start
  }

  tracing_config {
    mode = local.tracing_mode
  }

  environment {
    variables = merge(local.environment, local.tracing_environment)
  }

  logging_config { # JSON records; Lambda's START/END/REPORT lines (INFO) left out: docs/observability.md "Logs"
    log_format       = "JSON"
    system_log_level = "WARN"
    log_group        = aws_cloudwatch_log_group.worker.name
  }

  tags = local.tags
}

resource "aws_lambda_function" "api" {
  #checkov:skip=CKV_AWS_116:Invoked synchronously only (SQS event source, API Gateway); failed wake-ups go to the queues DLQs
  #checkov:skip=CKV_AWS_117:Reaches only public endpoints (DynamoDB, SQS, S3, SSM, and the JWT issuer's keys for the $connect authorizer); a VPC would add NAT or endpoint costs
  #checkov:skip=CKV_AWS_173:The environment holds resource names only (no secrets), encrypted at rest with the AWS-managed key
  #checkov:skip=CKV_AWS_272:Code signing needs a signing profile; the bundle is built locally by make
  #checkov:skip=CKV_AWS_50:X-Ray tracing costs per trace: off unless adot_layer_arn is set; logs and metrics cover each wake-up
  function_name                  = "${local.prefix}-api"
  description                    = "The Dormant HTTP API (FastAPI through Mangum)"
  role                           = aws_iam_role.api.arn
  handler                        = "functions.api.handler.handler"
  runtime                        = local.runtime
  architectures                  = [local.architecture]
  memory_size                    = 512
  timeout                        = local.api_timeout
  reserved_concurrent_executions = var.api_reserved_concurrency
  filename                       = local.code_zip
  source_code_hash               = filebase64sha256(local.code_zip)
  layers                         = local.layers
  publish                        = true # a version per change, behind the alias "live" (SnapStart snapshots it)

  snap_start {
    apply_on = var.snap_start
  }

  tracing_config {
    mode = local.tracing_mode
  }

  # The operator token is read at run time from its SSM parameter: only the name is here (and in the state).
  environment {
    variables = merge(local.environment, local.tracing_environment, {
      DORMANT_AUTH_MODE                 = var.auth_mode
      DORMANT_JWT_ISSUER                = var.jwt_issuer
      DORMANT_JWT_AUDIENCE              = var.jwt_audience
      DORMANT_INSPECTOR_TOKEN_PARAMETER = var.inspector_token_parameter
    })
  }

  logging_config { # JSON records; Lambda's START/END/REPORT lines (INFO) left out: docs/observability.md "Logs"
    log_format       = "JSON"
    system_log_level = "WARN"
    log_group        = aws_cloudwatch_log_group.api.name
  }

  tags = local.tags
}

# The alias the queues and the HTTP API invoke: the latest published version (as SAM's AutoPublishAlias).
resource "aws_lambda_alias" "worker" {
  name             = "live"
  function_name    = aws_lambda_function.worker.function_name
  function_version = aws_lambda_function.worker.version
}

resource "aws_lambda_alias" "api" {
  name             = "live"
  function_name    = aws_lambda_function.api.function_name
  function_version = aws_lambda_function.api.version
}

# Lambda's SQS event sources; the worker reports partial batch failures. FIFO queues take no batching window.
# Each source starts at most worker_max_concurrency invocations, below the worker's reserved concurrency, so
# batches are never throttled (a throttled batch would count as a receive on its way to the DLQ).
resource "aws_lambda_event_source_mapping" "wake" {
  # Lambda checks at creation that the role may receive from the queue: wait for the role's policy.
  depends_on = [aws_iam_role_policy.worker]

  function_name           = aws_lambda_alias.worker.arn
  event_source_arn        = aws_sqs_queue.wake.arn
  batch_size              = 10
  function_response_types = ["ReportBatchItemFailures"]

  scaling_config {
    maximum_concurrency = var.worker_max_concurrency
  }
}

resource "aws_lambda_event_source_mapping" "timers" {
  depends_on = [aws_iam_role_policy.worker]

  function_name                      = aws_lambda_alias.worker.arn
  event_source_arn                   = aws_sqs_queue.timers.arn
  batch_size                         = 10
  maximum_batching_window_in_seconds = local.timer_batching_window
  function_response_types            = ["ReportBatchItemFailures"]

  scaling_config {
    maximum_concurrency = var.worker_max_concurrency
  }
}
