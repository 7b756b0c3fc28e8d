# Least privilege: each function may touch only these resources. The DynamoDB actions are exactly those
# DynamoEventStore calls, the SQS ones those SqsTransport makes and Lambda's event source needs, the S3 ones those of
# large values: PutObject, GetObject, DeleteObjects (s3:DeleteObject) on the objects, ListObjectsV2 (s3:ListBucket)
# on the bucket, to sweep an actor's orphans.

locals {
  store_actions        = ["dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"]
  value_actions        = ["s3:DeleteObject", "s3:GetObject", "s3:PutObject"]
  send_actions         = ["sqs:SendMessage"]
  event_source_actions = ["sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"]
}

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
    sid       = "Values"
    effect    = "Allow"
    actions   = local.value_actions
    resources = ["${aws_s3_bucket.values.arn}/*"]
  }

  statement {
    sid       = "ListValues"
    effect    = "Allow"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.values.arn]
  }

  # The worker moves poison wake-ups to the dead-letter queues itself (with the reason attached).
  statement {
    sid       = "SendWakeUps"
    effect    = "Allow"
    actions   = local.send_actions
    resources = [aws_sqs_queue.wake.arn, aws_sqs_queue.timers.arn, aws_sqs_queue.wake_dlq.arn, aws_sqs_queue.timers_dlq.arn]
  }

  statement {
    sid       = "EventSource"
    effect    = "Allow"
    actions   = local.event_source_actions
    resources = [aws_sqs_queue.wake.arn, aws_sqs_queue.timers.arn]
  }

  # Committed events posted to the subscribed WebSocket connections (dormant.aws.realtime.Broadcaster)
  statement {
    sid       = "PushEvents"
    effect    = "Allow"
    actions   = ["execute-api:ManageConnections"]
    resources = ["${aws_apigatewayv2_api.realtime.execution_arn}/${var.stage}/POST/@connections/*"]
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

  # The API stores large message bodies on send, reads state, deletes actors.
  statement {
    sid       = "Values"
    effect    = "Allow"
    actions   = local.value_actions
    resources = ["${aws_s3_bucket.values.arn}/*"]
  }

  statement {
    sid       = "ListValues"
    effect    = "Allow"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.values.arn]
  }

  statement {
    sid       = "SendWakeUps"
    effect    = "Allow"
    actions   = local.send_actions
    resources = [aws_sqs_queue.wake.arn, aws_sqs_queue.timers.arn]
  }

  # The operator token, read at run time (a SecureString under the AWS-managed key aws/ssm, whose key policy
  # lets SSM decrypt for the account's principals; with a customer-managed key, grant kms:Decrypt too).
  statement {
    sid       = "OperatorToken"
    effect    = "Allow"
    actions   = ["ssm:GetParameter"]
    resources = ["arn:${data.aws_partition.current.partition}:ssm:${data.aws_region.current.name}:${data.aws_caller_identity.current.account_id}:parameter${var.inspector_token_parameter}"]
  }

  # The WebSocket routes answer a connection (replayed events, errors) and close one that lost its caller
  statement {
    sid     = "AnswerConnections"
    effect  = "Allow"
    actions = ["execute-api:ManageConnections"]
    resources = ["${aws_apigatewayv2_api.realtime.execution_arn}/${var.stage}/POST/@connections/*",
    "${aws_apigatewayv2_api.realtime.execution_arn}/${var.stage}/DELETE/@connections/*"]
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

data "aws_partition" "current" {}

data "aws_region" "current" {}

data "aws_caller_identity" "current" {}

# var.adot_layer_arn set: X-Ray's write actions (they have no resource-level permissions)
resource "aws_iam_role_policy_attachment" "worker_xray" {
  count      = var.adot_layer_arn != "" ? 1 : 0
  role       = aws_iam_role.worker.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AWSXRayDaemonWriteAccess"
}

resource "aws_iam_role_policy_attachment" "api_xray" {
  count      = var.adot_layer_arn != "" ? 1 : 0
  role       = aws_iam_role.api.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AWSXRayDaemonWriteAccess"
}
