# The WebSocket API (../docs/realtime.md): clients subscribe to actors' events, call actions, and the worker pushes
# events. The API function answers its three routes (dormant.aws.realtime.LambdaRealtime). Only $connect can be
# authorized (API Gateway's rule for WebSocket APIs): AWS_IAM in iam mode, the Lambda authorizer below in jwt mode (a
# WebSocket API has no JWT authorizer), none in none; the function records who connected and asks the actor's
# `authorize` hook at each subscribe and action.

resource "aws_apigatewayv2_api" "realtime" {
  name                       = "${local.prefix}-realtime"
  protocol_type              = "WEBSOCKET"
  route_selection_expression = "$request.body.type"
  tags                       = local.tags
}

resource "aws_apigatewayv2_integration" "realtime" {
  api_id                 = aws_apigatewayv2_api.realtime.id
  integration_type       = "AWS_PROXY"
  integration_uri        = aws_lambda_alias.api.invoke_arn
  payload_format_version = "1.0" # the only one a WebSocket API has
}

resource "aws_apigatewayv2_route" "realtime_connect" {
  #checkov:skip=CKV_AWS_309:Authorized otherwise: a callback route by the token in its path (checked by the app; single use, expiring), a WebSocket route by its connection's $connect (AWS_IAM in iam mode, the Lambda authorizer in jwt mode; API Gateway authorizes no other WebSocket route) and the actor's authorize hook
  api_id             = aws_apigatewayv2_api.realtime.id
  route_key          = "$connect"
  target             = "integrations/${aws_apigatewayv2_integration.realtime.id}"
  authorization_type = var.auth_mode == "jwt" ? "CUSTOM" : var.auth_mode == "iam" ? "AWS_IAM" : "NONE"
  authorizer_id      = var.auth_mode == "jwt" ? aws_apigatewayv2_authorizer.realtime[0].id : null
}

resource "aws_apigatewayv2_route" "realtime_disconnect" {
  #checkov:skip=CKV_AWS_309:Authorized otherwise: a callback route by the token in its path (checked by the app; single use, expiring), a WebSocket route by its connection's $connect (AWS_IAM in iam mode, the Lambda authorizer in jwt mode; API Gateway authorizes no other WebSocket route) and the actor's authorize hook
  api_id             = aws_apigatewayv2_api.realtime.id
  route_key          = "$disconnect"
  target             = "integrations/${aws_apigatewayv2_integration.realtime.id}"
  authorization_type = "NONE"
}

resource "aws_apigatewayv2_route" "realtime_default" {
  #checkov:skip=CKV_AWS_309:Authorized otherwise: a callback route by the token in its path (checked by the app; single use, expiring), a WebSocket route by its connection's $connect (AWS_IAM in iam mode, the Lambda authorizer in jwt mode; API Gateway authorizes no other WebSocket route) and the actor's authorize hook
  api_id             = aws_apigatewayv2_api.realtime.id
  route_key          = "$default"
  target             = "integrations/${aws_apigatewayv2_integration.realtime.id}"
  authorization_type = "NONE"
}

resource "aws_apigatewayv2_stage" "realtime" {
  #checkov:skip=CKV2_AWS_51:A client certificate authenticates API Gateway to an HTTP backend; this API's only integration is a Lambda function
  api_id      = aws_apigatewayv2_api.realtime.id
  name        = var.stage
  auto_deploy = true

  default_route_settings {
    throttling_rate_limit  = var.throttling_rate_limit  # as the HTTP API's
    throttling_burst_limit = var.throttling_burst_limit # (one budget each)
  }

  # No query string in the access log: in jwt mode a browser's $connect carries its token there (?token=).
  access_log_settings {
    destination_arn = aws_cloudwatch_log_group.api_access.arn
    format = jsonencode({
      requestId        = "$context.requestId"
      time             = "$context.requestTime"
      ip               = "$context.identity.sourceIp"
      route            = "$context.routeKey"
      event            = "$context.eventType"
      connection       = "$context.connectionId"
      status           = "$context.status"
      principal        = "$context.identity.userArn"
      subject          = "$context.authorizer.principalId"
      error            = "$context.error.message"
      integrationError = "$context.integrationErrorMessage"
    })
  }

  tags = local.tags
}

resource "aws_lambda_permission" "realtime" {
  statement_id  = "AllowRealtimeApi"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_alias.api.arn # the alias the integration invokes
  principal     = "apigateway.amazonaws.com"
  source_arn    = "${aws_apigatewayv2_api.realtime.execution_arn}/*"
}

# auth_mode = "jwt": the $connect REQUEST authorizer (dormant.aws.authorizer). It checks the bearer token as the HTTP
# API's JWT authorizer does (the issuer's JWKS, jwt_issuer, jwt_audience, exp/nbf) and allows the route with the
# claims in its context. No identity source: the token comes from the Authorization header or the `token` query
# parameter (browsers cannot set headers on a WebSocket handshake), and an identity source would require one of
# them; API Gateway then calls the authorizer at every $connect (WebSocket authorizers cache nothing anyway).
resource "aws_apigatewayv2_authorizer" "realtime" {
  count           = var.auth_mode == "jwt" ? 1 : 0
  api_id          = aws_apigatewayv2_api.realtime.id
  name            = "jwt"
  authorizer_type = "REQUEST"
  authorizer_uri  = aws_lambda_alias.authorizer[0].invoke_arn
}

resource "aws_lambda_permission" "authorizer" {
  count         = var.auth_mode == "jwt" ? 1 : 0
  statement_id  = "AllowRealtimeAuthorizer"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_alias.authorizer[0].arn
  principal     = "apigateway.amazonaws.com"
  source_arn    = "${aws_apigatewayv2_api.realtime.execution_arn}/authorizers/${aws_apigatewayv2_authorizer.realtime[0].id}"
}

resource "aws_cloudwatch_log_group" "authorizer" {
  #checkov:skip=CKV_AWS_158:CloudWatch Logs encrypts at rest by default; reading them is an operator's right (the access log's paths hold callback tokens)
  #checkov:skip=CKV_AWS_338:Retention is a variable (log_retention_days, default 30 days, as template.yaml)
  count             = var.auth_mode == "jwt" ? 1 : 0
  name              = "/aws/lambda/${local.prefix}-authorizer"
  retention_in_days = var.log_retention_days
  tags              = local.tags
}

resource "aws_lambda_function" "authorizer" {
  #checkov:skip=CKV_AWS_116:Invoked synchronously only (SQS event source, API Gateway); failed wake-ups go to the queues DLQs
  #checkov:skip=CKV_AWS_117:Reaches only public endpoints (DynamoDB, SQS, S3, SSM, and the JWT issuer's keys for the $connect authorizer); a VPC would add NAT or endpoint costs
  #checkov:skip=CKV_AWS_115:Reserved concurrency would cap connects; API Gateway's stage throttling bounds them
  #checkov:skip=CKV_AWS_173:The environment holds resource names only (no secrets), encrypted at rest with the AWS-managed key
  #checkov:skip=CKV_AWS_272:Code signing needs a signing profile; the bundle is built locally by make
  #checkov:skip=CKV_AWS_50:X-Ray tracing costs per trace: off unless adot_layer_arn is set; logs and metrics cover each wake-up
  count            = var.auth_mode == "jwt" ? 1 : 0
  function_name    = "${local.prefix}-authorizer"
  description      = "The WebSocket API's $connect authorizer in auth_mode jwt (a bearer token checked as the HTTP API's)"
  role             = aws_iam_role.authorizer[0].arn
  handler          = "functions.authorizer.handler.handler"
  runtime          = local.runtime
  architectures    = [local.architecture]
  memory_size      = 512
  timeout          = 10
  filename         = local.code_zip
  source_code_hash = filebase64sha256(local.code_zip)
  layers           = local.layers
  publish          = true # a version per change, behind the alias "live" (as the other functions)

  snap_start {
    apply_on = var.snap_start
  }

  tracing_config {
    mode = local.tracing_mode
  }

  environment {
    variables = merge(local.environment, local.tracing_environment, {
      DORMANT_AUTH_MODE    = var.auth_mode
      DORMANT_JWT_ISSUER   = var.jwt_issuer
      DORMANT_JWT_AUDIENCE = var.jwt_audience
    })
  }

  logging_config { # as the other functions: JSON records, no START/END/REPORT lines (docs/observability.md "Logs")
    log_format       = "JSON"
    system_log_level = "WARN"
    log_group        = aws_cloudwatch_log_group.authorizer[0].name
  }

  tags = local.tags
}

resource "aws_lambda_alias" "authorizer" {
  count            = var.auth_mode == "jwt" ? 1 : 0
  name             = "live"
  function_name    = aws_lambda_function.authorizer[0].function_name
  function_version = aws_lambda_function.authorizer[0].version
}

# The authorizer reads nothing of the stack: its own logs only (and X-Ray's writes when traced).
data "aws_iam_policy_document" "authorizer" {
  count = var.auth_mode == "jwt" ? 1 : 0
  statement {
    sid       = "Logs"
    effect    = "Allow"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.authorizer[0].arn}:*"]
  }
}

resource "aws_iam_role" "authorizer" {
  count              = var.auth_mode == "jwt" ? 1 : 0
  name               = "${local.prefix}-authorizer"
  assume_role_policy = data.aws_iam_policy_document.assume_lambda.json
  tags               = local.tags
}

resource "aws_iam_role_policy" "authorizer" {
  count  = var.auth_mode == "jwt" ? 1 : 0
  name   = "dormant-authorizer"
  role   = aws_iam_role.authorizer[0].id
  policy = data.aws_iam_policy_document.authorizer[0].json
}

resource "aws_iam_role_policy_attachment" "authorizer_xray" {
  count      = var.auth_mode == "jwt" && var.adot_layer_arn != "" ? 1 : 0
  role       = aws_iam_role.authorizer[0].name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AWSXRayDaemonWriteAccess"
}
