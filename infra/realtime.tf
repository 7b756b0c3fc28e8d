# The WebSocket API (../docs/realtime.md): clients subscribe to actors' events and the worker pushes them. The API
# function answers its three routes (dormant.aws.realtime.LambdaRealtime). Only $connect can be authorized (API
# Gateway's rule for WebSocket APIs): AWS_IAM in iam mode, none otherwise; the function records who connected and
# asks the actor's `authorize` hook at each subscribe. jwt mode has no WebSocket authorizer yet: its $connect is
# refused by the function (401).

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
  #checkov:skip=CKV_AWS_309:Authorized otherwise: a callback route by the token in its path (checked by the app; single use, expiring), a WebSocket route by its connection's $connect (AWS_IAM in iam mode; API Gateway authorizes no other WebSocket route) and the actor's authorize hook
  api_id             = aws_apigatewayv2_api.realtime.id
  route_key          = "$connect"
  target             = "integrations/${aws_apigatewayv2_integration.realtime.id}"
  authorization_type = var.auth_mode != "iam" ? "NONE" : "AWS_IAM"
}

resource "aws_apigatewayv2_route" "realtime_disconnect" {
  #checkov:skip=CKV_AWS_309:Authorized otherwise: a callback route by the token in its path (checked by the app; single use, expiring), a WebSocket route by its connection's $connect (AWS_IAM in iam mode; API Gateway authorizes no other WebSocket route) and the actor's authorize hook
  api_id             = aws_apigatewayv2_api.realtime.id
  route_key          = "$disconnect"
  target             = "integrations/${aws_apigatewayv2_integration.realtime.id}"
  authorization_type = "NONE"
}

resource "aws_apigatewayv2_route" "realtime_default" {
  #checkov:skip=CKV_AWS_309:Authorized otherwise: a callback route by the token in its path (checked by the app; single use, expiring), a WebSocket route by its connection's $connect (AWS_IAM in iam mode; API Gateway authorizes no other WebSocket route) and the actor's authorize hook
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
