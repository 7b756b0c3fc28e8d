# The HTTP API: every route to the API function, on the $default stage (paths carry no stage prefix). One route,
# $default, with the deploy-time authentication (auth_mode), in front of every path (but the callback routes
# below, authorized by their token): the operator routes (history,
# inspector, listing, resume, terminate, delete) need a verified caller like every other route, then the operator
# token (X-Dormant-Operator-Token), which the app checks (docs/http-api.md, "Auth").

locals {
  authorization_type = var.auth_mode == "iam" ? "AWS_IAM" : var.auth_mode == "jwt" ? "JWT" : "NONE"
}

resource "aws_apigatewayv2_api" "http" {
  name          = "${local.prefix}-api"
  protocol_type = "HTTP"
  tags          = local.tags
}

resource "aws_apigatewayv2_integration" "api" {
  api_id                 = aws_apigatewayv2_api.http.id
  integration_type       = "AWS_PROXY"
  integration_uri        = aws_lambda_alias.api.invoke_arn # the alias "live" (a published version, for SnapStart)
  payload_format_version = "2.0"
}

resource "aws_apigatewayv2_authorizer" "jwt" {
  count = var.auth_mode == "jwt" ? 1 : 0

  api_id           = aws_apigatewayv2_api.http.id
  name             = "jwt"
  authorizer_type  = "JWT"
  identity_sources = ["$request.header.Authorization"]

  jwt_configuration {
    issuer   = var.jwt_issuer
    audience = split(",", var.jwt_audience)
  }

  lifecycle {
    precondition {
      condition     = var.jwt_issuer != "" && var.jwt_audience != ""
      error_message = "auth_mode = jwt needs jwt_issuer and jwt_audience."
    }
  }
}

resource "aws_apigatewayv2_route" "default" {
  api_id             = aws_apigatewayv2_api.http.id
  route_key          = "$default"
  target             = "integrations/${aws_apigatewayv2_integration.api.id}"
  authorization_type = local.authorization_type
  authorizer_id      = var.auth_mode == "jwt" ? aws_apigatewayv2_authorizer.jwt[0].id : null
}

# The callback routes: the one way in without the auth mode's authorization. An outside system (a payment
# provider's webhook, a link in an email) holds a callback's token and nothing else; the token, checked by the app,
# is the authorization (../docs/http-api.md, "Callbacks"). The access log records the path, token included.
resource "aws_apigatewayv2_route" "callback" {
  #checkov:skip=CKV_AWS_309:Authorized otherwise: a callback route by the token in its path (checked by the app; single use, expiring), a WebSocket route by its connection's $connect (AWS_IAM in iam mode, the Lambda authorizer in jwt mode; API Gateway authorizes no other WebSocket route) and the actor's authorize hook
  api_id             = aws_apigatewayv2_api.http.id
  route_key          = "POST /callbacks/{token}"
  target             = "integrations/${aws_apigatewayv2_integration.api.id}"
  authorization_type = "NONE"
}

resource "aws_apigatewayv2_route" "callback_status" {
  #checkov:skip=CKV_AWS_309:Authorized otherwise: a callback route by the token in its path (checked by the app; single use, expiring), a WebSocket route by its connection's $connect (AWS_IAM in iam mode, the Lambda authorizer in jwt mode; API Gateway authorizes no other WebSocket route) and the actor's authorize hook
  api_id             = aws_apigatewayv2_api.http.id
  route_key          = "GET /callbacks/{token}"
  target             = "integrations/${aws_apigatewayv2_integration.api.id}"
  authorization_type = "NONE"
}

# A provider's own JSON (cb.webhook_url) and an approval link's page and form (cb.approval_url): the same token
resource "aws_apigatewayv2_route" "callback_webhook" {
  #checkov:skip=CKV_AWS_309:Authorized otherwise: a callback route by the token in its path (checked by the app; single use, expiring), a WebSocket route by its connection's $connect (AWS_IAM in iam mode, the Lambda authorizer in jwt mode; API Gateway authorizes no other WebSocket route) and the actor's authorize hook
  api_id             = aws_apigatewayv2_api.http.id
  route_key          = "POST /callbacks/{token}/webhook"
  target             = "integrations/${aws_apigatewayv2_integration.api.id}"
  authorization_type = "NONE"
}

resource "aws_apigatewayv2_route" "callback_approval_page" {
  #checkov:skip=CKV_AWS_309:Authorized otherwise: a callback route by the token in its path (checked by the app; single use, expiring), a WebSocket route by its connection's $connect (AWS_IAM in iam mode, the Lambda authorizer in jwt mode; API Gateway authorizes no other WebSocket route) and the actor's authorize hook
  api_id             = aws_apigatewayv2_api.http.id
  route_key          = "GET /callbacks/{token}/approve"
  target             = "integrations/${aws_apigatewayv2_integration.api.id}"
  authorization_type = "NONE"
}

resource "aws_apigatewayv2_route" "callback_approval" {
  #checkov:skip=CKV_AWS_309:Authorized otherwise: a callback route by the token in its path (checked by the app; single use, expiring), a WebSocket route by its connection's $connect (AWS_IAM in iam mode, the Lambda authorizer in jwt mode; API Gateway authorizes no other WebSocket route) and the actor's authorize hook
  api_id             = aws_apigatewayv2_api.http.id
  route_key          = "POST /callbacks/{token}/approve"
  target             = "integrations/${aws_apigatewayv2_integration.api.id}"
  authorization_type = "NONE"
}

resource "aws_cloudwatch_log_group" "api_access" {
  #checkov:skip=CKV_AWS_158:CloudWatch Logs encrypts at rest by default; reading them is an operator's right (the access log's paths hold callback tokens)
  #checkov:skip=CKV_AWS_338:Retention is a variable (log_retention_days, default 30 days, as template.yaml)
  name              = "/aws/http-api/${local.prefix}-access"
  retention_in_days = var.log_retention_days
  tags              = local.tags
}

resource "aws_apigatewayv2_stage" "default" {
  api_id      = aws_apigatewayv2_api.http.id
  name        = "$default"
  auto_deploy = true

  default_route_settings {
    throttling_rate_limit  = var.throttling_rate_limit
    throttling_burst_limit = var.throttling_burst_limit
  }

  access_log_settings {
    destination_arn = aws_cloudwatch_log_group.api_access.arn
    format = jsonencode({
      requestId        = "$context.requestId"
      time             = "$context.requestTimeEpoch"
      ip               = "$context.identity.sourceIp"
      method           = "$context.httpMethod"
      path             = "$context.path"
      status           = "$context.status"
      bytes            = "$context.responseLength"
      ms               = "$context.integrationLatency"
      principal        = "$context.identity.userArn"
      subject          = "$context.authorizer.claims.sub"
      error            = "$context.error.message"
      integrationError = "$context.integrationErrorMessage"
    })
  }

  tags = local.tags
}

resource "aws_lambda_permission" "http" {
  statement_id  = "AllowHttpApi"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_alias.api.arn # the alias the integration invokes
  principal     = "apigateway.amazonaws.com"
  source_arn    = "${aws_apigatewayv2_api.http.execution_arn}/*"
}
