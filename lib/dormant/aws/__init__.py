"""Dormant on AWS Lambda: the composition of the backends (dormant.dynamodb, dormant.s3, dormant.sqs) into the
worker function (`worker`, `redelivery`, `consumed`) and the API's service (`service`, `prewarm`), with the clients
they share (`clients`), secrets, telemetry (JSON logs, EMF metrics), tracing and request metering. Everything takes
an endpoint URL: AWS, a moto server, LocalStack, DynamoDB Local."""
