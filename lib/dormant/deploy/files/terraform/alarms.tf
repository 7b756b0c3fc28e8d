# Alarms: a message in a dead-letter queue is a wake-up that failed max_receives times (the error is on the
# actor: `dormant status`); worker errors are failed invocations (a crash, a timeout), not failed wake-ups,
# which the worker reports per message. Notifications go to alarm_topic_arn when it is set.

locals {
  alarm_actions = var.alarm_topic_arn != "" ? [var.alarm_topic_arn] : []
}

resource "aws_cloudwatch_metric_alarm" "wake_dlq" {
  alarm_name          = "${local.prefix}-dlq-fifo-not-empty"
  alarm_description   = "Wake-up messages reached the FIFO dead-letter queue (see the actors' status)"
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = aws_sqs_queue.wake_dlq.name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

resource "aws_cloudwatch_metric_alarm" "timers_dlq" {
  alarm_name          = "${local.prefix}-dlq-not-empty"
  alarm_description   = "Timer messages reached the dead-letter queue (see the actors' status)"
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = aws_sqs_queue.timers_dlq.name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}

resource "aws_cloudwatch_metric_alarm" "worker_errors" {
  alarm_name          = "${local.prefix}-worker-errors"
  alarm_description   = "Worker invocations failed (crashes, timeouts); see its log group"
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = aws_lambda_function.worker.function_name }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_actions
  ok_actions          = local.alarm_actions
  tags                = local.tags
}
