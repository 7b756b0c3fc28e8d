# Dormant on AWS: the same resources as ../template.yaml (tests/deploy/test_parity.py checks that they agree).
# One DynamoDB table (the event store), a FIFO queue for wake-ups and a standard queue for timers, each with a
# dead-letter queue, a worker function fed by both queues and an API function behind an HTTP API.

locals {
  prefix    = "${var.name}-${var.stage}"
  root      = coalesce(var.source_root, "${path.module}/..")
  app_dir   = coalesce(var.app_source_dir, "${local.root}/examples")
  layer_dir = coalesce(var.layer_dir, "${local.root}/build/lambda/layer")
  tags      = merge(var.tags, { "dormant:stage" = var.stage })

  runtime      = "python3.13"
  architecture = "arm64"

  worker_timeout = 60
  api_timeout    = 30
  # Lambda's SQS event source needs the visibility timeout >= 6 x the function timeout (+ the batching window).
  wake_visibility_timeout  = 6 * local.worker_timeout
  timer_batching_window    = 1
  timer_visibility_timeout = 6 * local.worker_timeout + local.timer_batching_window
  retention_seconds        = 1209600 # 14 days

  # The functions' bundle, as `make build-WorkerFunction` makes it for sam build: lib/dormant, functions/ and
  # the registry's package under its own name (zip path => file on disk).
  code_files = merge(
    { for f in fileset("${local.root}/lib", "dormant/**/*.py") : f => "${local.root}/lib/${f}" },
    { for f in fileset("${local.root}/lib", "dormant/http/static/**") : f => "${local.root}/lib/${f}" },
    { for f in fileset(local.root, "functions/**/*.py") : f => "${local.root}/${f}" },
    { for f in fileset(local.app_dir, "**/*.py") : "${basename(local.app_dir)}/${f}" => "${local.app_dir}/${f}" },
  )

  # dormant.settings.Settings reads these (DORMANT_*).
  environment = {
    DORMANT_APP              = var.app
    DORMANT_TABLE            = aws_dynamodb_table.actors.name
    DORMANT_QUEUE_NAME       = aws_sqs_queue.wake.name
    DORMANT_QUEUE_URL        = aws_sqs_queue.wake.url
    DORMANT_TIMER_QUEUE_NAME = aws_sqs_queue.timers.name
    DORMANT_TIMER_QUEUE_URL  = aws_sqs_queue.timers.url
    DORMANT_DLQ_NAME         = aws_sqs_queue.timers_dlq.name
    DORMANT_DLQ_URL          = aws_sqs_queue.timers_dlq.url
    DORMANT_FIFO_DLQ_NAME    = aws_sqs_queue.wake_dlq.name
    DORMANT_FIFO_DLQ_URL     = aws_sqs_queue.wake_dlq.url
    DORMANT_MAX_RECEIVES     = tostring(var.max_receives)
  }

  store_actions        = ["dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"]
  send_actions         = ["sqs:SendMessage"]
  event_source_actions = ["sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"]
}

# -- storage: one table, single-item conditional commits. Key schema, the `pending` local and `status` global
# secondary indexes and the TTL attribute are those of dormant.aws.store.table_definition / TTL_ATTRIBUTE.
resource "aws_dynamodb_table" "actors" {
  name                        = "${local.prefix}-actors"
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

  ttl {
    attribute_name = "expires_at"
    enabled        = true
  }

  point_in_time_recovery {
    enabled = true
  }

  tags = local.tags
}

# -- wake-ups: a FIFO queue (MessageGroupId = actor) and a standard queue for delayed wake-ups (timers, retries,
# scheduled actions). A FIFO queue's dead-letter queue must be FIFO too, hence two.
resource "aws_sqs_queue" "wake_dlq" {
  name                      = "${local.prefix}-dlq.fifo"
  fifo_queue                = true
  message_retention_seconds = local.retention_seconds
  tags                      = local.tags
}

resource "aws_sqs_queue" "timers_dlq" {
  name                      = "${local.prefix}-dlq"
  message_retention_seconds = local.retention_seconds
  tags                      = local.tags
}

resource "aws_sqs_queue" "wake" {
  name                        = "${local.prefix}-messages.fifo"
  fifo_queue                  = true
  content_based_deduplication = false
  deduplication_scope         = "messageGroup"
  fifo_throughput_limit       = "perMessageGroupId"
  visibility_timeout_seconds  = local.wake_visibility_timeout
  message_retention_seconds   = local.retention_seconds
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.wake_dlq.arn
    maxReceiveCount     = var.max_receives
  })
  tags = local.tags
}

resource "aws_sqs_queue" "timers" {
  name                       = "${local.prefix}-timers"
  visibility_timeout_seconds = local.timer_visibility_timeout
  message_retention_seconds  = local.retention_seconds
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.timers_dlq.arn
    maxReceiveCount     = var.max_receives
  })
  tags = local.tags
}

# -- code: the functions hold only our Python; third-party packages are in a layer built by `make lambda-layer`.
data "archive_file" "code" {
  type        = "zip"
  output_path = "${path.module}/.build/${local.prefix}-code.zip"

  dynamic "source" {
    for_each = local.code_files
    content {
      content  = file(source.value)
      filename = source.key
    }
  }
}

data "archive_file" "layer" {
  type        = "zip"
  source_dir  = local.layer_dir
  output_path = "${path.module}/.build/${local.prefix}-layer.zip"
}

resource "aws_lambda_layer_version" "dependencies" {
  layer_name               = "${local.prefix}-dependencies"
  filename                 = data.archive_file.layer.output_path
  source_code_hash         = data.archive_file.layer.output_base64sha256
  compatible_runtimes      = [local.runtime]
  compatible_architectures = [local.architecture]
}

resource "aws_cloudwatch_log_group" "worker" {
  name              = "/aws/lambda/${local.prefix}-worker"
  retention_in_days = var.log_retention_days
  tags              = local.tags
}

resource "aws_cloudwatch_log_group" "api" {
  name              = "/aws/lambda/${local.prefix}-api"
  retention_in_days = var.log_retention_days
  tags              = local.tags
}

resource "aws_lambda_function" "worker" {
  function_name    = "${local.prefix}-worker"
  description      = "SQS batch of wake-ups -> one wake-up per actor -> partial batch failures"
  role             = aws_iam_role.worker.arn
  handler          = "functions.worker.handler.handler"
  runtime          = local.runtime
  architectures    = [local.architecture]
  memory_size      = 512
  timeout          = local.worker_timeout
  filename         = data.archive_file.code.output_path
  source_code_hash = data.archive_file.code.output_base64sha256
  layers           = [aws_lambda_layer_version.dependencies.arn]
  publish          = true # a version per change, behind the alias "live" (SnapStart snapshots published versions)

  snap_start {
    apply_on = var.snap_start
  }

  environment {
    variables = local.environment
  }

  logging_config {
    log_format = "Text"
    log_group  = aws_cloudwatch_log_group.worker.name
  }

  tags = local.tags
}

data "aws_ssm_parameter" "inspector_token" {
  name            = var.inspector_token_parameter
  with_decryption = true
}

resource "aws_lambda_function" "api" {
  function_name    = "${local.prefix}-api"
  description      = "The Dormant HTTP API (FastAPI through Mangum)"
  role             = aws_iam_role.api.arn
  handler          = "functions.api.handler.handler"
  runtime          = local.runtime
  architectures    = [local.architecture]
  memory_size      = 512
  timeout          = local.api_timeout
  filename         = data.archive_file.code.output_path
  source_code_hash = data.archive_file.code.output_base64sha256
  layers           = [aws_lambda_layer_version.dependencies.arn]
  publish          = true # a version per change, behind the alias "live" (SnapStart snapshots published versions)

  snap_start {
    apply_on = var.snap_start
  }

  environment {
    variables = merge(local.environment, {
      DORMANT_INSPECTOR_TOKEN = data.aws_ssm_parameter.inspector_token.value
    })
  }

  logging_config {
    log_format = "Text"
    log_group  = aws_cloudwatch_log_group.api.name
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
resource "aws_lambda_event_source_mapping" "wake" {
  # Lambda checks at creation that the role may receive from the queue: wait for the role's policy.
  depends_on = [aws_iam_role_policy.worker]

  function_name           = aws_lambda_alias.worker.arn
  event_source_arn        = aws_sqs_queue.wake.arn
  batch_size              = 10
  function_response_types = ["ReportBatchItemFailures"]
}

resource "aws_lambda_event_source_mapping" "timers" {
  depends_on = [aws_iam_role_policy.worker]

  function_name                      = aws_lambda_alias.worker.arn
  event_source_arn                   = aws_sqs_queue.timers.arn
  batch_size                         = 10
  maximum_batching_window_in_seconds = local.timer_batching_window
  function_response_types            = ["ReportBatchItemFailures"]
}

# -- the HTTP API: every route to the API function, on the $default stage (paths carry no stage prefix).
resource "aws_apigatewayv2_api" "http" {
  name          = "${local.prefix}-api"
  protocol_type = "HTTP"
  tags          = local.tags
}

resource "aws_apigatewayv2_integration" "api" {
  api_id                 = aws_apigatewayv2_api.http.id
  integration_type       = "AWS_PROXY"
  integration_uri        = aws_lambda_alias.api.invoke_arn
  payload_format_version = "2.0"
}

resource "aws_apigatewayv2_route" "default" {
  api_id    = aws_apigatewayv2_api.http.id
  route_key = "$default"
  target    = "integrations/${aws_apigatewayv2_integration.api.id}"
}

resource "aws_apigatewayv2_stage" "default" {
  api_id      = aws_apigatewayv2_api.http.id
  name        = "$default"
  auto_deploy = true
  tags        = local.tags
}

resource "aws_lambda_permission" "http" {
  statement_id  = "AllowHttpApi"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_alias.api.arn # the alias the integration invokes
  principal     = "apigateway.amazonaws.com"
  source_arn    = "${aws_apigatewayv2_api.http.execution_arn}/*"
}

# -- least privilege: each function may touch only these resources. The DynamoDB actions are exactly those
# DynamoEventStore calls.
data "aws_iam_policy_document" "assume_lambda" {
  statement {
    effect  = "Allow"
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "worker" {
  statement {
    sid       = "Logs"
    effect    = "Allow"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.worker.arn}:*"]
  }

  statement {
    sid       = "Store"
    effect    = "Allow"
    actions   = local.store_actions
    resources = [aws_dynamodb_table.actors.arn, "${aws_dynamodb_table.actors.arn}/index/*"]
  }

  statement {
    sid       = "SendWakeUps"
    effect    = "Allow"
    actions   = local.send_actions
    resources = [aws_sqs_queue.wake.arn, aws_sqs_queue.timers.arn]
  }

  statement {
    sid       = "EventSource"
    effect    = "Allow"
    actions   = local.event_source_actions
    resources = [aws_sqs_queue.wake.arn, aws_sqs_queue.timers.arn]
  }
}

data "aws_iam_policy_document" "api" {
  statement {
    sid       = "Logs"
    effect    = "Allow"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.api.arn}:*"]
  }

  statement {
    sid       = "Store"
    effect    = "Allow"
    actions   = local.store_actions
    resources = [aws_dynamodb_table.actors.arn, "${aws_dynamodb_table.actors.arn}/index/*"]
  }

  statement {
    sid       = "SendWakeUps"
    effect    = "Allow"
    actions   = local.send_actions
    resources = [aws_sqs_queue.wake.arn, aws_sqs_queue.timers.arn]
  }
}

resource "aws_iam_role" "worker" {
  name               = "${local.prefix}-worker"
  assume_role_policy = data.aws_iam_policy_document.assume_lambda.json
  tags               = local.tags
}

resource "aws_iam_role_policy" "worker" {
  name   = "dormant-worker"
  role   = aws_iam_role.worker.id
  policy = data.aws_iam_policy_document.worker.json
}

resource "aws_iam_role" "api" {
  name               = "${local.prefix}-api"
  assume_role_policy = data.aws_iam_policy_document.assume_lambda.json
  tags               = local.tags
}

resource "aws_iam_role_policy" "api" {
  name   = "dormant-api"
  role   = aws_iam_role.api.id
  policy = data.aws_iam_policy_document.api.json
}
