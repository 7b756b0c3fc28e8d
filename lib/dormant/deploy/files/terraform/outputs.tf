output "api_url" {
  description = "Base URL of the HTTP API"
  value       = aws_apigatewayv2_stage.default.invoke_url
}

output "realtime_url" {
  description = "The WebSocket API (docs/realtime.md; HttpClient(realtime_url=...))"
  value       = aws_apigatewayv2_stage.realtime.invoke_url
}

output "table_name" {
  description = "The actor table (DORMANT_TABLE)"
  value       = aws_dynamodb_table.actors.name
}

output "value_bucket_name" {
  description = "The bucket of large values (DORMANT_BUCKET)"
  value       = aws_s3_bucket.values.bucket
}

output "wake_queue_url" {
  description = "FIFO wake-up queue (DORMANT_QUEUE_URL)"
  value       = aws_sqs_queue.wake.url
}

output "timer_queue_url" {
  description = "Timer queue (DORMANT_TIMER_QUEUE_URL)"
  value       = aws_sqs_queue.timers.url
}

output "dead_letter_queue_url" {
  description = "Dead-letter queue of the timer queue (DORMANT_DLQ_URL)"
  value       = aws_sqs_queue.timers_dlq.url
}

output "fifo_dead_letter_queue_url" {
  description = "Dead-letter queue of the wake-up queue (DORMANT_FIFO_DLQ_URL)"
  value       = aws_sqs_queue.wake_dlq.url
}

output "worker_function_name" {
  value = aws_lambda_function.worker.function_name
}

output "api_function_name" {
  value = aws_lambda_function.api.function_name
}

output "api_access_log_group_name" {
  description = "The API stage's access log (one JSON line per request, with the caller)"
  value       = aws_cloudwatch_log_group.api_access.name
}
